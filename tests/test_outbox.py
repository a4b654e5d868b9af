"""The worker protocol's Outbox (both ends of a worker connection): the lines of one event-loop turn go out
in one write; a line sent `alone` (the only call in flight) goes out at once, unless lines are already
waiting for the end of the turn, so the order on the wire is always the order sent."""

from __future__ import annotations

import asyncio

import pytest

from tooldock.worker.protocol import Outbox


class Writer:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False
        self.transport = self

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0


def run(steps) -> list[bytes]:
    async def main() -> list[bytes]:
        writer = Writer()
        await steps(Outbox(writer, 1 << 20), writer)  # type: ignore[arg-type]
        await asyncio.sleep(0)
        return writer.writes

    return asyncio.run(main())


def test_a_turns_lines_are_one_write() -> None:
    async def steps(outbox: Outbox, writer: Writer) -> None:
        await outbox.send(b"a\n")
        await outbox.send(b"b\n")
        assert writer.writes == []

    assert run(steps) == [b"a\nb\n"]


def test_a_line_sent_alone_goes_out_at_once() -> None:
    async def steps(outbox: Outbox, writer: Writer) -> None:
        await outbox.send(b"only\n", alone=True)
        assert writer.writes == [b"only\n"]

    assert run(steps) == [b"only\n"]


def test_alone_never_overtakes_lines_already_waiting() -> None:
    async def steps(outbox: Outbox, writer: Writer) -> None:
        await outbox.send(b"first\n")
        await outbox.send(b"second\n", alone=True)
        assert writer.writes == []

    assert run(steps) == [b"first\nsecond\n"]


def test_a_closed_connection_refuses() -> None:
    async def steps(outbox: Outbox, writer: Writer) -> None:
        writer.closing = True
        with pytest.raises(ConnectionResetError):
            await outbox.send(b"x\n", alone=True)

    assert run(steps) == []
