"""The worker protocol's connection reading (`LineStream`) and the gateway's worker connection on it."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest

from tooldock.runtime.workerclient import ProtocolMismatch, WorkerConnection
from tooldock.worker import protocol


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False
        self.buffered = 0

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return self.buffered


class Lines(protocol.LineStream):
    def __init__(self, limit: int = 64) -> None:
        super().__init__(limit)
        self.lines: list[bytes] = []
        self.overflows = 0
        self.gone: list[Exception | None] = []

    def line_received(self, line: bytes) -> None:
        self.lines.append(line)

    def too_long(self) -> None:
        self.overflows += 1
        super().too_long()

    def lost(self, exc: Exception | None) -> None:
        self.gone.append(exc)


def made(limit: int = 64) -> tuple[Lines, FakeTransport]:
    stream, transport = Lines(limit), FakeTransport()
    stream.connection_made(transport)  # type: ignore[arg-type]
    return stream, transport


def test_lines_are_delivered_whole_and_in_order_however_the_bytes_arrive():
    stream, _ = made()
    for chunk in (b'{"a":1}\n', b'{"b"', b":2}\n{", b'"c":3}\n{"d":4}\n', b"\n"):
        stream.data_received(chunk)
    assert stream.lines == [b'{"a":1}\n', b'{"b":2}\n', b'{"c":3}\n', b'{"d":4}\n', b"\n"]
    stream.data_received(b'{"e":')  # a partial line waits for its end
    assert len(stream.lines) == 5
    stream.data_received(b"5}\n")
    assert stream.lines[-1] == b'{"e":5}\n' and stream.overflows == 0


@pytest.mark.parametrize("chunks", [[b"x" * 80], [b"x" * 40, b"x" * 40], [b"ok\n" + b"y" * 70 + b"\n"]])
def test_a_line_over_the_limit_closes_the_connection(chunks):
    stream, transport = made(limit=64)
    for chunk in chunks:
        stream.data_received(chunk)
    assert stream.overflows == 1 and transport.closed
    assert all(len(line) <= 64 for line in stream.lines)  # the lines before it still arrived whole


def test_drain_waits_while_the_peer_is_not_reading_and_fails_once_the_connection_is_gone():
    async def flow() -> None:
        stream, _ = made()
        await stream.drain()  # not paused: returns at once
        stream.pause_writing()
        waiting = asyncio.ensure_future(stream.drain())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        stream.resume_writing()
        await asyncio.wait_for(waiting, 1)
        stream.pause_writing()
        waiting = asyncio.ensure_future(stream.drain())
        await asyncio.sleep(0)
        stream.connection_lost(None)
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(waiting, 1)
        with pytest.raises(ConnectionResetError):
            await stream.drain()
        assert stream.is_closing() and stream.gone == [None]

    asyncio.run(flow())


async def _serve_once(path: Path, lines: list[bytes], answer: bool = False) -> asyncio.AbstractServer:
    """A fake worker: sends `lines`, then (with `answer`) answers each request with its own id."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for line in lines:
            writer.write(line)
        await writer.drain()
        while answer and (line := await reader.readline()):
            request = json.loads(line)
            writer.write(
                json.dumps({"id": request["id"], "ok": True, "result": {"op": request["op"]}}).encode() + b"\n"
            )
        writer.close()

    return await asyncio.start_unix_server(handle, str(path))


def test_a_worker_that_closes_before_its_handshake_is_a_protocol_mismatch():
    async def flow() -> None:
        path = Path(tempfile.mkdtemp(prefix="tdls-")) / "w.sock"
        async with await _serve_once(path, []):
            with pytest.raises(ProtocolMismatch, match="closed the connection before its handshake"):
                await WorkerConnection.open("ns", path)

    asyncio.run(flow())


def test_a_line_in_the_same_read_as_the_handshake_is_taken_in_order():
    """What a worker sends right behind its handshake is kept until the connection takes it over, so the
    framing and the order of what follows are kept."""

    async def flow() -> None:
        path = Path(tempfile.mkdtemp(prefix="tdls-")) / "w.sock"
        ready = {"op": "ready", "protocol": protocol.PROTOCOL_VERSION, "namespace": "ns", "tools": []}
        stray = {"id": "99", "ok": True, "result": {}}  # no request of that id: dropped
        first = (json.dumps(ready) + "\n" + json.dumps(stray) + "\n").encode()
        async with await _serve_once(path, [first], answer=True):
            conn = await WorkerConnection.open("ns", path)
            assert conn.handshake["op"] == "ready"
            assert await asyncio.wait_for(conn.request("ping"), 5) == {"op": "ping"}
            assert await asyncio.wait_for(conn.request("tools.list"), 5) == {"op": "tools.list"}
            await conn.close()
            assert conn.closed.is_set()

    asyncio.run(flow())
