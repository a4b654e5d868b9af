"""The gateway's HTTP connections (runtime/http/wire.py): a turn's writes reach the socket as one write, a
whole answer as soon as it is complete, a stream still goes out as it is produced, closing sends what is
pending, and uvicorn serves through it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import uvicorn

from tooldock.runtime.http.wire import CoalescingTransport, GatewayHttpProtocol


class Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 1234) if name == "peername" else default


def test_writes_of_one_turn_are_one_write_and_turns_stay_apart():
    async def main() -> Recorder:
        real = Recorder()
        transport = CoalescingTransport(real, asyncio.get_running_loop())
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"")
        transport.write(memoryview(b"body"))
        assert real.writes == [] and transport.get_write_buffer_size() == 23
        await asyncio.sleep(0)
        transport.write(b"later")
        await asyncio.sleep(0)
        assert transport.get_extra_info("peername") == ("127.0.0.1", 1234)  # the rest is the real transport's
        return real

    assert asyncio.run(main()).writes == [b"HTTP/1.1 200 OK\r\n\r\nbody", b"later"]


def test_close_sends_what_is_pending_and_abort_drops_it():
    async def main() -> tuple[Recorder, Recorder]:
        loop = asyncio.get_running_loop()
        closing, aborting = Recorder(), Recorder()
        first, second = CoalescingTransport(closing, loop), CoalescingTransport(aborting, loop)
        first.write(b"last words")
        first.close()
        second.write(b"never sent")
        second.abort()
        await asyncio.sleep(0)
        return closing, aborting

    closing, aborting = asyncio.run(main())
    assert closing.writes == [b"last words"] and closing.closed
    assert aborting.writes == [] and aborting.aborted


class Counting(GatewayHttpProtocol):
    """Records the writes that reach the real socket transport."""

    sent: list[bytes] = []

    def connection_made(self, transport):
        counting = self

        class Spy:
            def write(self, data):
                counting.sent.append(bytes(data))
                transport.write(data)

            def __getattr__(self, name):
                return getattr(transport, name)

        super().connection_made(Spy())


SEEN_AT_ONCE: list[bool] = []  # /now: whether the answer had reached the socket when its last send returned


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":  # keeps a second request in flight
        await asyncio.sleep(0.5)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["path"] == "/now":
        Counting.sent.clear()
        body = b'{"now":1}'
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"9")]})
        await send({"type": "http.response.body", "body": body})
        SEEN_AT_ONCE.append(len(Counting.sent) == 1 and Counting.sent[0].endswith(body))
        return
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for part in (b"one\n", b"two\n"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0.05)
        await send({"type": "http.response.body", "body": b""})
        return
    body = b'{"result":7}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def test_uvicorn_answers_in_one_write_and_streams_as_it_goes():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, http=Counting, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with httpx.Client(timeout=10) as client:
            for _ in range(3):
                Counting.sent.clear()
                answer = client.get(f"{url}/plain")
                assert answer.json() == {"result": 7}
                assert len(Counting.sent) == 1 and Counting.sent[0].endswith(b'\r\n\r\n{"result":7}')
            # a whole answer to the only request in flight is written in the turn that completes it, not a
            # pass of the loop later; with another request in flight, at the end of the turn as before
            assert client.get(f"{url}/now").json() == {"now": 1} and SEEN_AT_ONCE == [True]
            slow = threading.Thread(target=httpx.get, args=(f"{url}/slow",), kwargs={"timeout": 10})
            slow.start()
            time.sleep(0.2)
            assert client.get(f"{url}/now").json() == {"now": 1}
            slow.join(10)
            assert SEEN_AT_ONCE == [True, False]
            Counting.sent.clear()
            assert client.get(f"{url}/stream").text == "one\ntwo\n"
            assert len(Counting.sent) >= 2  # each part in the turn that produced it
            assert Counting.sent[0].startswith(b"HTTP/1.1 200") and b"one\n" in Counting.sent[0]
            assert not any(b"two\n" in part for part in Counting.sent[:1])
    finally:
        server.should_exit = True
        thread.join(10)
