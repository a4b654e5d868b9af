"""The audit log: one JSON line per call in daily files, `<dir>/YYYY-MM-DD.jsonl` (seed 000's layout).

Writing never blocks or fails a call: `record` appends the line to a deque, one thread writes what is
there to the day's file every 0.1 s (opened per batch, so a rotated or removed file is simply recreated).
The engine's lines are queued as the tuple of their values (`call_line`'s arguments) and built into their JSON
object by that thread: building the object on the event loop cost 7% of a lean MCP call's rate at 1
concurrent (two gateways in turn), ten times what a micro-benchmark of it says, as code run once per
request runs cold in the caches.
A write that fails (a full disk, a read-only directory) is counted in `dropped`, and one warning is
printed until a write succeeds again. Files older than `retention_days` are removed when the day changes and at start.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tooldock.runtime import requestid

if TYPE_CHECKING:
    from tooldock.keys import ApiKey
    from tooldock.runtime.observe.context import CallInfo

DAILY = re.compile(r"(\d{4}-\d{2}-\d{2})\.jsonl")
_second: list[Any] = [None, ""]  # the last whole second timestamp() formatted, and its text


def timestamp(now: float | None = None) -> str:
    """`now` (default: the current time) as `datetime.now(UTC).isoformat(timespec="milliseconds")` writes
    it, `2026-11-23T12:00:00.123+00:00`, with the date and time formatted once a second: building and
    formatting a datetime was a twentieth of a REST call's gateway time."""
    now = time.time() if now is None else now
    second = int(now)
    if _second[0] != second:
        _second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_second[1]}.{int((now - second) * 1000):03d}+00:00"


def call_line(
    now: float,
    info: CallInfo,
    request_id: str | None,
    key: ApiKey | None,
    namespace: str,
    method: str,
    name: str,
    status: str,
    elapsed: float,
    generation: int,
    arguments: Any,
) -> dict[str, Any]:
    """The audit line of a call the engine served (the values `AuditLog.record` queues for it): `arguments`
    (already masked) only when the namespace logs them."""
    line: dict[str, Any] = {
        "time": timestamp(now),
        **info.to_dict(),
        "request_id": request_id or info.request_id or requestid.new(),
        **(key.audit_fields() if key is not None else {}),
        "namespace": namespace,
        "method": method,
        "tool" if method == "tools/call" else "target": name[:500],
        "status": status,
        "latency_ms": round(elapsed * 1000, 2),
        "generation": generation,
    }
    if arguments is not None:
        line["arguments"] = arguments
    return line


MAX_QUEUE = 100_000  # lines waiting; beyond this they are dropped (and counted), never awaited


class AuditLog:
    FLUSH_EVERY = 0.1  # seconds between the writer's passes; a call never waits for one

    def __init__(self, directory: Path | None, retention_days: int = 30) -> None:
        self.directory, self.retention_days = directory, retention_days
        self.written = 0
        self.dropped = 0
        # A deque, not a Queue: appending is one atomic operation with no lock or wake-up per call (the
        # writer looks every FLUSH_EVERY seconds), which is most of what a Queue would cost the event loop.
        # A line, or the values `call_line` builds one from.
        self._pending: collections.deque[dict[str, Any] | tuple[Any, ...]] = collections.deque()
        self._stop = threading.Event()
        self._warned = False
        self._day = ""
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    def start(self) -> None:
        if self.directory is None or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tooldock-audit", daemon=True)
        self._thread.start()

    def record(self, line: dict[str, Any] | tuple[Any, ...]) -> None:
        """Queue a line: the line itself, or a call's values for `call_line` (the writer thread builds it)."""
        if self.directory is None:
            return
        if len(self._pending) >= MAX_QUEUE:  # the writer is far behind (a stuck disk): drop, never wait
            self.dropped += 1
            return
        self._pending.append(line)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is pending, then stop the writer."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout)
        self._thread = None

    # -- the writer thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            stopping = self._stop.wait(self.FLUSH_EVERY)
            lines: list[dict[str, Any]] = []
            while self._pending and len(lines) < 10_000:
                item = self._pending.popleft()
                lines.append(item if isinstance(item, dict) else call_line(*item))
            if lines:
                self._write(lines)
            if stopping and not self._pending:
                return

    def _write(self, lines: list[dict[str, Any]]) -> None:
        assert self.directory is not None
        by_day: dict[str, list[str]] = {}
        for line in lines:
            day = str(line.get("time", ""))[:10] or dt.date.today().isoformat()
            by_day.setdefault(day, []).append(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for day, text in by_day.items():
                if day != self._day:
                    self._day = day
                    self._prune(day)
                fd = os.open(self.directory / f"{day}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as out:
                    out.writelines(text)
            self.written += len(lines)
            self._warned = False
        except OSError as exc:
            self.dropped += len(lines)
            if not self._warned:
                self._warned = True
                print(f"tooldock: cannot write the audit log in {self.directory}: {exc}", file=sys.stderr, flush=True)

    def _prune(self, today: str) -> None:
        assert self.directory is not None
        oldest = dt.date.fromisoformat(today) - dt.timedelta(days=self.retention_days)
        for path in self.directory.glob("*.jsonl"):
            found = DAILY.fullmatch(path.name)
            with contextlib.suppress(ValueError, OSError):
                if found and dt.date.fromisoformat(found.group(1)) < oldest:
                    path.unlink()
