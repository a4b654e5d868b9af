"""MCP `tools/call` driven by wrk (Debian's `wrk`, one thread), for bench/mcp_raw.py's table.

At 1 concurrent the load generator, the gateway and its worker (or the peer) run one after another, so the
load generator's own time per call is part of every call's time, for both targets: the Python client
spends about 0.12 ms of CPU on a call (a fifth of the gateway's cycle), which pulls every ratio toward
1x. wrk spends a tenth of that, so its rows compare the servers rather than the servers plus the client.

The requests are bench/mcp_raw.py's: on one 2025-11-25 session (shared by the connections), or 2026-07-28
ones with their `_meta` envelope and routing headers; each has an id of its own and its own `x`, and every
answer is checked in Lua (status 200, `structuredContent` of the right shape, no `isError`): an answer that
fails the check counts as an error, as do wrk's own (connect, read, write, timeout).
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

LUA = """
-- wrk runs request/response in each thread's own Lua state and done in another: the threads' counts of bad
-- answers are globals, read back through setup's thread handles (a local here would always read 0 in done)
local path, template, threads = %(path)s, %(template)s, {}
local headers = %(headers)s
counter, bad = 0, 0
setup = function(thread)
  table.insert(threads, thread)
end
request = function()
  counter = counter + 1
  return wrk.format("POST", path, headers, string.format(template, counter, counter %% 100000))
end
response = function(status, _, body)
  if status ~= 200 or not string.find(body, '"structuredContent":{"result":', 1, true)
      or string.find(body, '"isError":true', 1, true) then
    bad = bad + 1
  end
end
done = function(summary, latency, _)
  local e, total = summary.errors, 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("bad")
  end
  io.write(string.format('WRK {"requests":%%d,"duration_us":%%d,"bad":%%d,"errors":%%d,"p50_us":%%d,"p99_us":%%d}\\n',
    summary.requests, summary.duration, total, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def available() -> bool:
    return shutil.which("wrk") is not None


def _lua(path: str, headers: dict[str, str], tool: str, meta: dict | None) -> str:
    params = {"name": tool, "arguments": {"x": 0}, **({"_meta": meta} if meta else {})}
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params}, separators=(",", ":"))
    # the request's body as a Lua format string: its id and x filled in per request
    template = body.replace("%", "%%").replace('"id":0', '"id":%d', 1).replace('"x":0', '"x":%d', 1)
    table = "{" + ", ".join(f"[{_lua_string(k)}] = {_lua_string(v)}" for k, v in headers.items()) + "}"
    return LUA % {"path": _lua_string(path), "template": _lua_string(template), "headers": table}


def _lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run(url: str, headers: dict[str, str], connections: int, seconds: float, tool: str,
        meta: dict | None = None) -> dict[str, float]:
    """One wrk run against `url`: calls, wall seconds, wrk's CPU seconds, errors, p50 and p99 in ms. A
    warm-up is a short run of its own (the caller reads the server's CPU after it)."""
    path = "/" + url.removeprefix("http://").partition("/")[2]
    all_headers = {**headers, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "mcp.lua"
        script.write_text(_lua(path, all_headers, tool, meta))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        got = _wrk(url, seconds, connections, script)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"calls": got["requests"], "wall": got["duration_us"] / 1e6 or wall, "cpu": cpu,
            "errors": got["bad"] + got["errors"], "p50": got["p50_us"] / 1000, "p99": got["p99_us"] / 1000}


def _wrk(url: str, seconds: float, connections: int, script: Path) -> dict[str, int]:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "-s", str(script), url],
        capture_output=True, text=True, timeout=seconds + 60,
    )
    found = re.search(r"^WRK (\{.*\})$", out.stdout, re.M)
    if found is None:
        raise SystemExit(f"wrk gave no summary (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")
    return json.loads(found.group(1))
