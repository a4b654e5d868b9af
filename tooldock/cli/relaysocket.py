"""The relay client's connection to the relay socket (`tooldock relay`): requests multiplexed by id over
one connection, made again after a drop; the socket's notifications about the key's tools go to `events`,
a call's progress and log messages to the call that asked for them, and a call's questions (requests from
the socket naming the call) to that call's `asker`, whose answer is sent back. Light on imports: it runs in
sandbox images.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tooldock.runtime.relay.protocol import MESSAGE, PROGRESS, REQUEST_OF, decode, encode
from tooldock.worker.protocol import refusal

LINE_LIMIT = 64 * 1024 * 1024  # answers can be large (a tool's whole result on one line)
Notice = Callable[[str, dict[str, Any]], Awaitable[None]]  # a call's progress or log message: method, params
Asker = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]  # a call's question: method, params -> result


class RelayError(Exception):
    """The socket answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def __str__(self) -> str:
        reason = self.data.get("reason") if isinstance(self.data, dict) else None
        if isinstance(reason, str) and reason.startswith(f"{self.message}: "):
            reason = reason[len(self.message) + 2 :]  # the gateway's reason repeats its message: said once
        return f"{self.message} ({self.code}){f': {reason}' if reason else ''}"


class SocketClient:
    """One connection to the relay socket, requests multiplexed by id; it reconnects after a drop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._notices: dict[int, Notice] = {}  # calls that asked for their progress and log messages
        self._askers: dict[int, Asker] = {}  # calls that answer their tools' questions
        self._asking: set[asyncio.Task[None]] = set()
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.connects = 0  # connections made so far (a watch lasts as long as its connection)
        self.events: asyncio.Queue[str] = asyncio.Queue()  # the socket's notifications, and "closed"

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        notices: Notice | None = None,
        meta: dict[str, Any] | None = None,
        asker: Asker | None = None,
    ) -> Any:
        """Send one request and wait for its answer. `meta`: the call's `_meta` (what it asks to be told, and
        which questions it answers); its progress token is this request's id, which its log messages and
        questions name too; `notices` gets the messages, `asker` the questions."""
        async with self._lock:
            writer = await self._open()
            rid = next(self._ids)
            answer = self._pending[rid] = asyncio.get_running_loop().create_future()
            if meta is not None:
                params = {**params, "_meta": {**meta, **({"progressToken": rid} if "progressToken" in meta else {})}}
                if notices is not None:
                    self._notices[rid] = notices
                if asker is not None:
                    self._askers[rid] = asker
            writer.write(encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
            await writer.drain()
        try:
            return await answer
        finally:
            self._pending.pop(rid, None)
            self._notices.pop(rid, None)
            self._askers.pop(rid, None)

    async def connect(self) -> int:
        """Connect if not connected; the connection's number (`connects`)."""
        async with self._lock:
            await self._open()
            return self.connects

    async def _open(self) -> asyncio.StreamWriter:
        if self._writer is None or self._writer.is_closing():
            reader, self._writer = await asyncio.open_unix_connection(str(self.path), limit=LINE_LIMIT)
            self._reading = asyncio.ensure_future(self._read(reader))
            self.connects += 1
        return self._writer

    async def _notice(self, method: str, params: Any) -> None:
        """A call's progress or log message, to that call's `notices` (in order: reading waits for it)."""
        if not isinstance(params, dict):
            return
        meta = params.get("_meta")
        if method == PROGRESS:
            rid = params.get("progressToken")
        else:  # a log message names its call in _meta
            rid = meta.get(REQUEST_OF) if isinstance(meta, dict) else None
        notices = self._notices.get(rid) if isinstance(rid, int) else None
        if notices is not None:
            with contextlib.suppress(Exception):  # the client went away: the call's answer still comes
                await notices(method, params)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        failure: Exception = ConnectionError(f"the relay socket {self.path} closed the connection")
        try:
            while line := await reader.readline():
                try:
                    message = decode(line)
                except Exception:
                    continue  # not JSON: nothing to match it to
                rid = message.get("id") if isinstance(message, dict) else None
                if rid is not None and isinstance(message.get("method"), str):  # a call's question
                    task = asyncio.ensure_future(self._answer(rid, message["method"], message.get("params")))
                    self._asking.add(task)
                    task.add_done_callback(self._asking.discard)
                    continue
                if rid is None and isinstance(message, dict) and isinstance(message.get("method"), str):
                    if message["method"] in (PROGRESS, MESSAGE):
                        await self._notice(message["method"], message.get("params"))
                    else:
                        self.events.put_nowait(message["method"])  # about the key's tools
                    continue
                answer = self._pending.get(rid) if isinstance(rid, int) else None
                if answer is None or answer.done():
                    continue
                if isinstance(message.get("error"), dict):
                    error = message["error"]
                    answer.set_exception(RelayError(error.get("code", 0), str(error.get("message")), error.get("data")))
                else:
                    answer.set_result(message.get("result"))
        except (OSError, ValueError) as exc:
            failure = ConnectionError(f"the relay socket {self.path} failed: {exc}")
        finally:
            self.events.put_nowait("closed")
            if self._writer is not None:
                self._writer.close()
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(failure)

    async def _answer(self, qid: Any, method: str, params: Any) -> None:
        """Ask the question of the call it names (its asker) and send the answer back; a call that answers
        nothing, or an asker that fails, is an error answer (the tool gets it as an MCP error)."""
        params = params if isinstance(params, dict) else {}
        meta = params.get("_meta")
        rid = meta.get(REQUEST_OF) if isinstance(meta, dict) else None
        asker = self._askers.get(rid) if isinstance(rid, int) else None
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": qid}
        try:
            if asker is None:
                raise LookupError(f"no call here answers {method!r}")
            asked = {k: v for k, v in params.items() if k != "_meta"}
            rest = {k: v for k, v in meta.items() if k != REQUEST_OF} if isinstance(meta, dict) else {}
            answer["result"] = await asker(method, {**asked, "_meta": rest} if rest else asked)
        except Exception as exc:
            answer["error"] = refusal(exc)
        with contextlib.suppress(OSError):
            async with self._lock:
                if self._writer is not None and not self._writer.is_closing():
                    self._writer.write(encode(answer))
                    await self._writer.drain()

    async def close(self) -> None:
        for task in list(self._asking):
            task.cancel()
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reading
