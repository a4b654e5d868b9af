"""A process's output as log lines: split at newlines however it arrives (pipe reads of any size, Docker's
log frames), each line cut to MAX_LINE bytes, secret values masked.

One line of megabytes (a tool printing a whole file or a JSON blob without newlines) is logged as its start
and its size: it neither holds the gateway's memory nor stops the reading. (asyncio's `readline` raised on a
line over the reader's limit and so ended the reading; the worker's pipe then filled and its next print
blocked the tool until its time limit, and the worker was replaced as stuck.)

Only the standard library here (the worker package is in every image).
"""

from __future__ import annotations

from tooldock.worker.secretenv import Masker

MAX_LINE = 16 * 1024  # bytes of one line that reach the log
READ_SIZE = 64 * 1024  # bytes asked of the pipe per read, whatever its lines
NEWLINE = b"\n"


class LineSplitter:
    """`feed(data)` gives the lines `data` completes, each as (its first MAX_LINE bytes, how many bytes
    followed them); `end()` the last line when the output ended without a newline."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self._head = bytearray()
        self._more = 0

    def feed(self, data: bytes) -> list[tuple[bytes, int]]:
        lines = []
        start = 0
        while (end := data.find(NEWLINE, start)) != -1:
            self._take(data, start, end)
            lines.append(self._line())
            start = end + 1
        self._take(data, start, len(data))
        return lines

    def end(self) -> list[tuple[bytes, int]]:
        return [self._line()] if self._head or self._more else []

    def _take(self, data: bytes, start: int, end: int) -> None:
        room = self.limit - len(self._head)
        if room > 0:
            self._head += data[start : min(end, start + room)]
        self._more += max(end - start - max(room, 0), 0)

    def _line(self) -> tuple[bytes, int]:
        line, more = bytes(self._head), self._more
        self._head, self._more = bytearray(), 0
        return line, more


def as_text(head: bytes, more: int, mask: Masker) -> str:
    """A split line as the log shows it: masked, and when it was cut, ending with its size. What is kept of a
    cut line stops short of anything that could be the start of a secret value the cut went through (the
    value's longest length less one character), so no part of a value is logged unmasked."""
    line = mask(head.decode(errors="replace").rstrip("\r\n"))
    if not more:
        return line.rstrip()
    if mask.values:
        line = line[: max(len(line) - len(mask.values[0]) + 1, 0)]
    return f"{line} ... [a line of {len(head) + more} bytes, cut: a log line keeps its first {len(head)}]"
