"""A stdio upstream server's stderr, as the gateway logs it.

The SDK's stdio transport hands the server's stderr to a file (the gateway's own by default), so whatever
the server prints, secrets it was given included, would reach the log unread. Here the server writes into
a pipe instead; a thread reads it line by line (a line too long to log whole is cut: worker/loglines.py),
masks the namespace's secret values, and writes each line to the gateway's stderr prefixed with the
namespace, as a worker's output is. The last lines are kept, so a server that exits can be reported with
what it said last, not only "Connection closed".

A thread, not a task: the pipe's write end belongs to a child process group the event loop does not own,
and a blocking read on a thread needs no event-loop integration to end at EOF.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import threading
from types import TracebackType
from typing import TextIO

from tooldock.worker.loglines import READ_SIZE, LineSplitter, as_text
from tooldock.worker.secretenv import Masker

TAIL = 3


class ServerOutput:
    """`with ServerOutput(prefix, mask) as errlog:` gives the file to pass as the server's stderr."""

    def __init__(self, prefix: str, mask: Masker) -> None:
        self.prefix, self.mask = prefix, mask
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL)
        self._writer: TextIO | None = None
        self._drained = threading.Event()

    def __enter__(self) -> TextIO:
        read_end, write_end = os.pipe()
        self._writer = os.fdopen(write_end, "w")
        threading.Thread(target=self._pump, args=(read_end,), name=f"stderr {self.prefix}", daemon=True).start()
        return self._writer

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        # The server has its own copy of the write end: the reader sees EOF once it (and its children) exit.
        if self._writer is not None:
            self._writer.close()

    def _pump(self, read_end: int) -> None:
        try:
            self._read(read_end)
        finally:
            self._drained.set()

    def _read(self, read_end: int) -> None:
        splitter = LineSplitter()
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while data := pipe.read(READ_SIZE):
                self._log(splitter.feed(data))
        self._log(splitter.end())

    def _log(self, split: list[tuple[bytes, int]]) -> None:
        for head, more in split:
            line = as_text(head, more, self.mask)
            if not line.strip():
                continue
            self._tail.append(line)
            try:
                print(f"{self.prefix} {line}", file=sys.stderr, flush=True)
            except (OSError, ValueError):  # the gateway's stderr is gone (shutting down): keep draining
                pass

    async def said(self, wait: float = 1.0) -> str:
        """The server's last lines (masked), joined with " | "; empty when it printed nothing. Waits up to
        `wait` seconds for the pipe to end first (a server that just exited may have lines not read yet;
        a child of it still holding the pipe only delays this)."""
        await asyncio.to_thread(self._drained.wait, wait)
        return " | ".join(self._tail)
