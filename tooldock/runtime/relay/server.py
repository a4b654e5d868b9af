"""The relay socket's listener: accepts connections (at most TOOLDOCK_RELAY_MAX_CONNECTIONS), reads one
JSON-RPC message per line (at most TOOLDOCK_MAX_BODY_BYTES; a longer line is skipped and answered with an
error, and the connection goes on), runs each request as its own task so answers come back in any order
(at most MAX_IN_FLIGHT per connection: then reading waits), and writes answers under one lock.
A connection whose key asked `tooldock_watch_tools` is told when the key's tools change (watchers.py).

The socket is made with TOOLDOCK_RELAY_SOCKET_MODE and TOOLDOCK_RELAY_SOCKET_GROUP in a directory of its
own (mount that directory into a sandbox). A lock file beside it says whether another gateway serves it:
then this one serves no relay and says why; a socket left by a gateway that died is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import select
import sys
from typing import Any

from tooldock.runtime.keyguard import KeyGuard
from tooldock.runtime.relay.asks import Questions
from tooldock.runtime.relay.config import RelayConfig
from tooldock.runtime.relay.methods import RelayMethods
from tooldock.runtime.relay.protocol import (
    CALL,
    INVALID_REQUEST,
    SERVER_ERROR,
    WATCH,
    RpcError,
    Send,
    decode,
    error,
    parse_request,
    request_id,
    result,
)
from tooldock.runtime.relay.watchers import Watchers

MAX_IN_FLIGHT = 64  # requests one connection may have running at once
HANGUP_POLL = 0.2  # seconds between checks, after a client's EOF, that it is still there to read answers


class LineTooLong(Exception):
    pass


async def read_line(reader: asyncio.StreamReader) -> bytes | None:
    """The next line (None at the end); LineTooLong when it is over the reader's limit, after skipping it."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:  # the end: a last line without its newline still counts
        return exc.partial or None
    except asyncio.LimitOverrunError as exc:
        consumed = exc.consumed
    while True:  # drop the rest of the long line, never holding more than the limit
        try:
            await reader.readexactly(consumed)
            await reader.readuntil(b"\n")
            break
        except asyncio.LimitOverrunError as exc:
            consumed = exc.consumed
        except asyncio.IncompleteReadError:
            break
    raise LineTooLong


class RelayServer:
    def __init__(self, config: RelayConfig, methods: RelayMethods, guard: KeyGuard) -> None:
        self.config, self.methods = config, methods
        self.connections = 0
        self._server: asyncio.AbstractServer | None = None
        self._lock_fd: int | None = None
        self._clients: set[asyncio.Task[Any]] = set()
        self.watchers = Watchers(guard)

    async def start(self) -> bool:
        """Listen; False (with the reason on stderr) when the socket is off or another gateway holds it."""
        try:
            return await self._start()
        except OSError as exc:  # a directory it may not write, a group it is not in: the gateway serves on
            print(f"tooldock: no relay socket at {self.config.path}: {exc}", file=sys.stderr, flush=True)
            await self.close()
            return False

    async def _start(self) -> bool:
        path = self.config.path
        if path is None:
            return False
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        lock = path.with_name(f".{path.name}.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            print(
                f"tooldock: relay socket {path} is served by another gateway; this one serves no relay "
                "(set TOOLDOCK_RELAY_SOCKET to another path, or off)",
                file=sys.stderr,
                flush=True,
            )
            return False
        self._lock_fd = fd
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a gateway that is gone (it held the lock while it lived)
        self._server = await asyncio.start_unix_server(self._client, path=str(path), limit=self.config.max_line)
        os.chmod(path, self.config.mode)
        if self.config.gid is not None:
            os.chown(path, -1, self.config.gid)
        print(f"tooldock: relay socket at {path} (mode {self.config.mode:o})", file=sys.stderr, flush=True)
        return True

    async def tools_changed(self, namespaces: list[str]) -> None:
        """A registry listener: tell the watching connections whose keys cover one of `namespaces`."""
        await self.watchers.tools_changed(namespaces)

    async def close(self) -> None:
        self.watchers.close()
        if self._server is not None:
            self._server.close()
            for task in list(self._clients):
                task.cancel()
            await asyncio.gather(*self._clients, return_exceptions=True)
            with contextlib.suppress(OSError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            if self.config.path is not None:
                with contextlib.suppress(FileNotFoundError):
                    self.config.path.unlink()
            self._server = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            if self.connections >= self.config.max_connections:
                refused = RpcError(
                    SERVER_ERROR,
                    f"too many connections to the relay socket ({self.config.max_connections}, "
                    "TOOLDOCK_RELAY_MAX_CONNECTIONS); close one and retry",
                )
                with contextlib.suppress(OSError):
                    writer.write(error(None, refused))
                    await writer.drain()
                return
            self.connections += 1
            try:
                await self._serve(reader, writer)
            finally:
                self.connections -= 1
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock, slots = asyncio.Lock(), asyncio.Semaphore(MAX_IN_FLIGHT)
        running: set[asyncio.Task[None]] = set()

        async def send(data: bytes) -> None:
            async with lock:
                writer.write(data)
                await writer.drain()

        questions = Questions(send)  # its calls' questions to the caller, waiting for its answers
        view = ConnectionView()  # the connection as upstream namespaces know it (its toolman_activate state)

        async def answer(line: bytes) -> None:
            try:
                reply = await self._answer(line, send, questions, view)
                if reply is not None:
                    await send(reply)
            except OSError:  # the client went away; its other requests are cancelled below
                pass
            finally:
                slots.release()

        try:
            while True:
                try:
                    line = await read_line(reader)
                except LineTooLong:
                    too_long = RpcError(
                        INVALID_REQUEST,
                        f"message longer than {self.config.max_line} bytes (TOOLDOCK_MAX_BODY_BYTES); "
                        "it was skipped: send one JSON-RPC message per line",
                    )
                    await send(error(None, too_long))
                    continue
                if line is None:
                    break
                if not line.strip():
                    continue
                if b'"method"' not in line and _taken_as_answer(line, questions):
                    continue  # an answer to a call's question: taken at once, never waiting for a slot
                await slots.acquire()
                task = asyncio.ensure_future(answer(line))
                running.add(task)
                task.add_done_callback(running.discard)
            questions.close()  # the client closed its writing side: it answers nothing more
            # A half-close (`shutdown(SHUT_WR)`, `nc -N`) still reads: finish what it asked, then close. A
            # client gone altogether (closed, killed) is cancelled: nobody would read the answers, and its
            # calls would hold worker slots and a connection slot until they ended.
            while running and not _hung_up(writer):
                await asyncio.wait(running, timeout=HANGUP_POLL)
        finally:
            questions.close()
            self.watchers.remove(send)
            for task in list(running):
                task.cancel()

    async def _answer(self, line: bytes, send: Send, questions: Questions, view: ConnectionView) -> bytes | None:
        rid = None
        try:
            message = decode(line)
            rid = request_id(message)
            method, params = parse_request(message)
            if method == WATCH:  # the connection's, not the methods': it is what gets told
                self.watchers.add(send, await self.methods.watch(params))
                value: Any = {"watching": True}
            else:
                value = await self.methods.handle(method, params, send, rid, questions, view)
                if method == CALL and not value.get("isError") and self.methods.activates(params):
                    await self.watchers.activated(send)
        except RpcError as err:
            return error(rid, err)
        except Exception as exc:  # never a traceback to the client; the gateway's log has the type
            print(f"tooldock: relay request failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return error(
                rid, RpcError(SERVER_ERROR, f"internal error ({type(exc).__name__}); the gateway's log says more")
            )
        if isinstance(message, dict) and "id" not in message:
            return None  # a notification: done, and never answered
        return result(rid, value)


class ConnectionView:
    """A relay connection, as an upstream namespace keeps its callers' views (weakly: gone with it)."""


def _taken_as_answer(line: bytes, questions: Questions) -> bool:
    """Whether a line without "method" is a JSON-RPC answer (taken by `questions`); anything else is
    answered as a request (with the error it deserves)."""
    try:
        return questions.answered(decode(line))
    except RpcError:
        return False


def _hung_up(writer: asyncio.StreamWriter) -> bool:
    """The peer closed both directions (POLLHUP on a unix socket), not only its writing side."""
    sock = writer.get_extra_info("socket")
    if sock is None or writer.is_closing():
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLHUP)
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))
