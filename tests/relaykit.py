"""Helpers for the relay tests: a gateway over tests/fixtures/relay with its own keys directory and a
short relay socket path, and a line-at-a-time JSON-RPC client for the socket."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from conftest import FIXTURES

from tooldock.keys import KeyStore

RELAY_TOOLS = FIXTURES / "relay"
LATER_TOOL = '''from fastmcp.tools import tool


@tool
def twice(x: int) -> int:
    """Return 2x.

    Args:
        x: A number.
    """
    return 2 * x
'''


CONTEXT_TOOL = '''from fastmcp import Context
from fastmcp.tools import tool


@tool
async def steps(ctx: Context) -> str:
    """Report three steps of progress, log at debug, info and warning, then answer."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3, f"step {step}")
    await ctx.debug("a debug line")
    await ctx.info("an info line")
    await ctx.warning("a warning line")
    return "done"


@tool
async def ask_name(ctx: Context) -> str:
    """Ask the caller for a name (elicitation)."""
    answer = await ctx.elicit("What is your name?", str)
    return f"hello {answer.data}"


@tool
async def trip(city: str, ctx: Context) -> dict:
    """Ask the traveller's name (elicitation), the LLM for a sight (sampling), and the client's roots."""
    from mcp.types import SamplingMessage, TextContent

    name = await ctx.elicit(f"Who is travelling to {city}?", str)
    if name.action != "accept":
        return {"declined": name.action}
    sampled = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=f"One sight in {city}?"))],
        max_tokens=20,
        related_request_id=ctx.request_id,
    )
    roots = await ctx.session.list_roots()
    sight = sampled.content.text if isinstance(sampled.content, TextContent) else "?"
    return {"traveller": name.data, "sight": sight, "roots": [str(r.uri) for r in roots.roots]}
'''


def add_namespace(gateway: Any, name: str = "later", source: str = LATER_TOOL) -> None:
    """Write namespace `name` (one file, `source`), or rewrite it, and have the gateway reload."""
    import signal

    folder = gateway.tools_dir / name
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(source)
    gateway.proc.send_signal(signal.SIGHUP)


def relay_env(base: Path | None = None, **extra: str) -> tuple[dict[str, str], Path, KeyStore]:
    """Environment for a gateway with a private keys dir and relay socket (a short path under /tmp: unix
    socket paths are limited to ~107 bytes)."""
    home = Path(tempfile.mkdtemp(prefix="tdr", dir="/tmp")) if base is None else base
    sock = home / "relay" / "relay.sock"
    env = {"TOOLDOCK_KEYS_DIR": str(home / "keys"), "TOOLDOCK_RELAY_SOCKET": str(sock), **extra}
    return env, sock, KeyStore(home / "keys")


def cleanup(sock: Path) -> None:
    shutil.rmtree(sock.parent.parent, ignore_errors=True)


class Line:
    """One connection to the relay socket; `rpc` sends a request and reads the next answer."""

    def __init__(self, path: Path, timeout: float = 60) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rwb")

    def send(self, raw: bytes) -> None:
        self.file.write(raw)
        self.file.flush()

    def read(self) -> dict[str, Any]:
        line = self.file.readline()
        assert line, "the relay closed the connection"
        return json.loads(line)

    def rpc(self, method: str, rid: Any = 1, **params: Any) -> dict[str, Any]:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        answer = self.read()
        assert answer.get("id") == rid, answer
        return answer

    def tools(self, key: str) -> list[str]:
        answer = self.rpc("oubliette_tools", api_key=key)
        assert "result" in answer, answer
        return sorted(t["name"] for t in answer["result"]["tools"])

    def call(self, key: str | None, tool: str, rid: Any = 1, **arguments: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"tool": tool, "arguments": arguments}
        if key is not None:
            params["api_key"] = key
        return self.rpc("oubliette_call_tool", rid, **params)

    def close(self) -> None:
        self.file.close()
        self.sock.close()
