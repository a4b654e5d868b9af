"""What a worker writes (its stdout and stderr, one stream, or a container's log) and how it ended: each
line goes to the gateway's stderr prefixed with its namespace and with secret values masked; the last
lines are kept for the reason a start failed or a worker ended."""

from __future__ import annotations

import asyncio
import collections
import sys

from tooldock.worker import protocol
from tooldock.worker.loglines import READ_SIZE, LineSplitter, as_text
from tooldock.worker.secretenv import Masker


class WorkerOutput:
    def __init__(self, namespace: str, mask: Masker) -> None:
        self.namespace, self.mask = namespace, mask
        self._lines: collections.deque[str] = collections.deque(maxlen=20)

    def launched(self) -> None:
        """A new process or container: what the last one wrote is no reason for what this one does."""
        self._lines.clear()

    def line(self, line: str) -> None:
        self._emit(self.mask(line))

    def lines(self, split: list[tuple[bytes, int]]) -> None:
        """Lines of the worker's output from a LineSplitter (cut when they are too long to log whole)."""
        for head, more in split:
            self._emit(as_text(head, more, self.mask))

    async def follow(self, stream: asyncio.StreamReader) -> None:
        """Log what a process writes on `stream` until it closes it, line by line; however long a line is,
        the reading goes on (the process never blocks on a full pipe)."""
        splitter = LineSplitter()
        while data := await stream.read(READ_SIZE):
            self.lines(splitter.feed(data))
        self.lines(splitter.end())

    def _emit(self, line: str) -> None:
        self._lines.append(line)
        prefix = f"[{self.namespace}]"
        print(line if line.startswith(prefix) else f"{prefix} {line}", file=sys.stderr, flush=True)

    def tail(self, ready: bool = False) -> str:
        """The last lines; `ready`: the reason for an end after the worker was ready, so not its own "worker
        ready" line (its only line when it ended without a word, as `os._exit()` does)."""
        lines = [line for line in self._lines if not (ready and protocol.READY_LINE in line)]
        return " | ".join(lines[-3:]) or "no output"


def how_it_ended(code: int | None) -> str:
    """An exit code as a reason: a negative one is the signal that ended a process."""
    if code is None:
        return "exit code unknown"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"
