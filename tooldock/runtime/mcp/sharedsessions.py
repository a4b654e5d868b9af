"""2025-era MCP sessions that any replica serves (issue 56): initialize on replica A, call on B, DELETE on C.

What never changes in a session (its namespace, negotiated protocol version, the client's capabilities and
info, the API key it belongs to) is written to the shared state store when the session opens, before the
`initialize` answer names its id. A replica that gets a request for a session it does not hold looks the
facts up and *adopts* the session: it opens the SDK's transport for that id with a born-ready connection
(as the SDK builds one for a 2026-07-28 request, here with the session's own facts) and serves the request
as if it had opened it. Later requests to that replica need no store round trip. A DELETE forgets the facts
and tells the other replicas (a store channel), which drop their copy: the id then answers 404 everywhere.

With the state in the process (no TOOLDOCK_STATE_URL) nothing here runs: an unknown id is 404, as before.

What changes during a session (its log level, subscriptions, visibility rules, `ctx.set_state` values) is
`SessionSharing`'s: a change is written to the store and sent to the other replicas on a channel, and the
ones that hold the session take it at once (no store round trip on a request); a replica adopting a session
reads it with the facts. The last change wins.

A session's SSE events are in the store too (sharedevents.py): a stream resumes on any replica, and what
any replica raises for the session reaches its standalone GET stream wherever it is held (sharednotices.py),
a reload's list changes too (sharedreloads.py). A session's idle countdown runs on each replica that holds
it; its facts expire MCP_SESSION_TTL_HOURS after it opened (or after the last adoption), after which other
replicas no longer adopt it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    LAST_EVENT_ID_HEADER,
    MCP_SESSION_ID_HEADER,
    EventStore,
    StreamableHTTPServerTransport,
)
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import ClientCapabilities, Implementation, InitializeRequestParams
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from tooldock.errors import StateUnavailable
from tooldock.runtime.access import key_of
from tooldock.runtime.mcp.compat import Body
from tooldock.runtime.mcp.events import ScopedSessionManager, SessionEvents
from tooldock.runtime.mcp.results import error_object, state_error
from tooldock.runtime.mcp.sessionids import SessionIds
from tooldock.runtime.mcp.sessionsharing import SessionSharing, follow_changes
from tooldock.runtime.mcp.sharedevents import TAIL_MARGIN, SharedEvents, session_events_key, stream_key
from tooldock.runtime.mcp.sharednotices import GetStreams
from tooldock.runtime.mcp.sharedreloads import ReloadNotices, digest, tell
from tooldock.state import RESYNC, Store, replica_name

log = logging.getLogger("tooldock.mcp")
ENDED = "mcp-sessions-ended"  # the store channel on which a DELETE is announced: "namespace session-id"
# The id an `initialize` being served here gets (its facts are stored under it first): per request, as
# several may open sessions at once.
NEXT_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("tooldock_next_session_id", default=None)


@dataclass(frozen=True)
class Facts:
    """What never changes in a session, as the store keeps it."""

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any]
    key: str | None  # the API key the session belongs to (None: the bearer token)

    def dump(self) -> str:
        return json.dumps({"v": self.version, "caps": self.capabilities, "info": self.client_info, "key": self.key})

    @classmethod
    def load(cls, raw: str) -> Facts | None:
        try:
            data = json.loads(raw)
            return cls(str(data["v"]), dict(data["caps"]), dict(data["info"]), data.get("key"))
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def of_initialize(cls, body: bytes, key: str | None) -> Facts | None:
        """The facts of the `initialize` request in `body` (one message, or the first of a 2025-03-26 batch);
        None when the body is not one. The version is the one the SDK negotiates: the client's, when
        supported, else the newest."""
        try:
            message = json.loads(body)
        except ValueError:
            return None
        if isinstance(message, list):
            message = next((m for m in message if isinstance(m, dict) and m.get("method") == "initialize"), None)
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return None
        params = message.get("params")
        if not isinstance(params, dict):
            return None
        asked = params.get("protocolVersion")
        version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        caps, info = params.get("capabilities"), params.get("clientInfo")
        return cls(str(version), caps if isinstance(caps, dict) else {}, info if isinstance(info, dict) else {}, key)

    def params(self) -> InitializeRequestParams:
        info = self.client_info or {"name": "unknown", "version": "0"}
        return InitializeRequestParams(
            protocol_version=self.version,
            capabilities=ClientCapabilities.model_validate(self.capabilities),
            client_info=Implementation.model_validate(info),
        )


def _key_id(scope: Scope) -> str | None:
    key = key_of(scope)
    return key.id if key is not None else None


def _unavailable(err: StateUnavailable) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": None, "error": error_object(state_error(err))}
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


class SharedSessionManager(ScopedSessionManager):
    """The namespace's session manager, with its sessions' facts and events in a shared store (see the module
    and sharedevents.py)."""

    def __init__(
        self,
        app: Any,
        *,
        sharing: SessionSharing,
        tail_for: Callable[[], float],
        keep: int,
        get_streams: GetStreams,
        ids: SessionIds,
        reloads: ReloadNotices,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self.sharing, self.tail_for, self.keep, self.get_streams = sharing, tail_for, keep, get_streams
        self.ids, self.reloads = ids, reloads
        self.store, self.namespace, self.ttl = sharing.store, sharing.namespace, sharing.ttl

    def events_of(self, sid: str) -> EventStore | None:
        """Session `sid`'s events: in the shared store, this replica's buffer as the fallback."""
        local = super().event_store
        if not isinstance(local, SessionEvents):  # no event store at all: not resumable
            return local
        key = session_events_key(self.namespace, sid)

        def follow(after: str) -> None:  # a replay of its GET stream ended there: live from here on
            self.get_streams.follow(self, sid, stream_key(key, GET_STREAM_KEY), after, replay=True)

        replica = self.get_streams.replica
        return SharedEvents(self.store, key, self.keep, local, self.tail_for, replica, follow)

    async def _follow_get(self, sid: str) -> None:
        """A fresh GET stream of a session held here: what other replicas raise for it from now on is sent on it,
        and the namespace's reloads are stored for it (sharedreloads.py)."""
        stream = stream_key(session_events_key(self.namespace, sid), GET_STREAM_KEY)
        try:
            await self.reloads.opened(self.namespace, sid)
            after = await self.store.last_entry(stream)
        except StateUnavailable as err:
            log.warning("MCP session %s: its GET stream hears this replica only (%s)", sid[:12], err)
            return
        self.get_streams.follow(self, sid, stream, after, replay=False)

    @property
    def event_store(self) -> EventStore | None:
        sid = NEXT_ID.get()  # read by the SDK as it makes a new session's transport, under the id it will have
        return self.events_of(sid) if sid is not None else super().event_store

    @event_store.setter
    def event_store(self, value: EventStore | None) -> None:
        ScopedSessionManager.event_store.fset(self, value)  # type: ignore[attr-defined]

    def _facts_key(self, sid: str) -> str:
        return f"mcp-session:{self.namespace}:{sid}"

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid = Request(scope).headers.get(MCP_SESSION_ID_HEADER)
        try:
            if sid is None and scope.get("method") == "POST":
                await self._open(scope, receive, send)
                return
            if sid is not None and sid not in self._server_instances:
                await self._adopt_if_shared(sid, scope)
            headers = Request(scope).headers
            if sid in self._server_instances and scope.get("method") == "GET" and LAST_EVENT_ID_HEADER not in headers:
                await self._follow_get(sid)
        except StateUnavailable as err:
            await _unavailable(err)(scope, receive, send)
            return
        await super()._handle_stateful_request(scope, receive, send)
        if sid is not None and scope.get("method") == "DELETE" and sid not in self._server_instances:
            await self._forget(sid)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session id: when it is an `initialize`, its facts are stored under a new id
        before the SDK serves it with that id; if the SDK refuses it, the facts go again."""
        body = Body(receive)
        while await body.pull():
            pass
        facts = Facts.of_initialize(bytes(body.data), _key_id(scope))
        if facts is None or body.disconnected:
            await super()._handle_stateful_request(scope, body.replay(), send)
            return
        sid = self.ids.new()
        await self.store.put(self._facts_key(sid), facts.dump(), self.ttl)
        token = NEXT_ID.set(sid)
        try:
            await super()._handle_stateful_request(scope, body.replay(), send)
        finally:
            NEXT_ID.reset(token)
        if sid not in self._server_instances:  # refused (or the session limit): nothing to adopt
            with contextlib.suppress(StateUnavailable):
                await self.store.delete(self._facts_key(sid))

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        sid = NEXT_ID.get()
        if transport is not None and sid is not None:  # the id whose facts were stored
            old, transport.mcp_session_id = transport.mcp_session_id, sid
            assert old is not None
            self._server_instances[sid] = self._server_instances.pop(old)
            if old in self._session_owners:
                self._session_owners[sid] = self._session_owners.pop(old)
        return transport

    async def _adopt_if_shared(self, sid: str, scope: Scope) -> None:
        """A session this replica does not hold: open it here when the store has its facts and the caller
        is the one it belongs to (else the SDK answers 404, as for any unknown session)."""
        if not self.ids.genuine(sid):  # minted by a gateway without our keys: unknown here, as anywhere
            return
        raw = await self.store.get(self._facts_key(sid))
        facts = Facts.load(raw) if raw is not None else None
        if facts is None or facts.key != _key_id(scope):
            return
        await self.sharing.load(sid)
        async with self._session_creation_lock:
            if sid in self._server_instances:  # adopted meanwhile by a concurrent request
                return
            user = scope.get("user")
            requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
            transport = StreamableHTTPServerTransport(
                mcp_session_id=sid,
                is_json_response_enabled=self.json_response,
                event_store=self.events_of(sid),
                security_settings=self.security_settings,
                retry_interval=self.retry_interval,
                idle_timeout=self.session_idle_timeout,
            )
            assert self._task_group is not None
            # Served (connected) before it is listed: a concurrent request of the session that finds it
            # listed must find it ready ("No read stream writer available" otherwise)
            await self._task_group.start(self._serve_adopted, sid, transport, facts)
            if requestor is not None:
                self._session_owners[sid] = requestor
            self._server_instances[sid] = transport
        with contextlib.suppress(StateUnavailable):
            await self.store.put(self._facts_key(sid), facts.dump(), self.ttl)  # its lifetime starts again
        log.info("MCP session %s of %s adopted from another replica", sid[:12], self.namespace)

    async def _serve_adopted(
        self,
        sid: str,
        transport: StreamableHTTPServerTransport,
        facts: Facts,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The SDK's `serve_loop` for a session, with a connection born initialized with its facts."""
        async with transport.connect() as (read_stream, write_stream):
            task_status.started()
            try:
                idle_scope = transport.idle_scope or anyio.CancelScope()
                with idle_scope:
                    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(
                        read_stream, write_stream, inline_methods=frozenset({"initialize"})
                    )
                    connection = Connection(
                        dispatcher, protocol_version=facts.version, session_id=sid, client_params=facts.params()
                    )
                    connection.initialized.set()
                    await serve_connection(
                        self.app, dispatcher, connection=connection, lifespan_state=self._lifespan_state
                    )
            except Exception:
                log.exception("adopted MCP session %s crashed", sid[:12])
            finally:
                await self._discard_session(sid, transport)

    async def _forget(self, sid: str) -> None:
        """The client ended the session here: every replica forgets it."""
        try:
            await self.store.delete(self._facts_key(sid))
            await self.sharing.forget(sid)
            await self.reloads.ended(self.namespace, sid)
            await self.store.publish(ENDED, f"{self.namespace} {sid}")
        except StateUnavailable as err:
            log.warning("MCP session %s ended here, but other replicas were not told: %s", sid[:12], err)

    async def ended_elsewhere(self, sid: str) -> None:
        transport = self._server_instances.get(sid)
        if transport is not None:
            await self._discard_session(sid, transport)

    async def resync(self) -> None:
        """The store was lost and is back: drop the sessions whose facts are gone (ended meanwhile)."""
        for sid in list(self._server_instances):
            with contextlib.suppress(StateUnavailable):
                if await self.store.get(self._facts_key(sid)) is None:
                    await self.ended_elsewhere(sid)


async def follow_ended(store: Store, managers: Mapping[str, Any]) -> None:
    """Drop the sessions other replicas' clients ended (DELETE): `managers` holds each namespace's manager."""
    messages: AsyncIterator[str] = store.subscribe(ENDED)
    async for message in messages:
        if message == RESYNC:
            for manager in list(managers.values()):
                if isinstance(manager, SharedSessionManager):
                    await manager.resync()
            continue
        namespace, _, sid = message.partition(" ")
        manager = managers.get(namespace)
        if isinstance(manager, SharedSessionManager) and sid:
            await manager.ended_elsewhere(sid)


class Replication:
    """What the MCP hub does differently when replicas share a state store: each namespace's sessions are a
    SharedSessionManager's, their changing state a SessionSharing's, and two followers take what the other
    replicas' clients ended or changed."""

    def __init__(
        self, store: Store, ttl: float, replica: str, keys: Sequence[str], engine: Any = None, keep: int = 100
    ) -> None:
        self.store, self.ttl, self.replica, self.engine, self.keep = store, ttl, replica, engine, keep
        self.keys = tuple(keys)
        self._sharing: dict[str, SessionSharing] = {}
        self.get_streams, self.reloads = GetStreams(store, replica), ReloadNotices(store, ttl, keep)
        self._managers: Mapping[str, Any] = {}

    @classmethod
    def of(cls, engine: Any, settings: Any) -> Replication | None:
        """The hub's replication through the engine's state store; None when it is this process's alone."""
        store: Store = engine.admission.store
        if not store.shared:
            return None
        return cls(store, settings.session_ttl, replica_name(), settings.state_keys, engine, settings.event_buffer)

    def sharing_of(self, namespace: str) -> SessionSharing:
        if namespace not in self._sharing:
            self._sharing[namespace] = SessionSharing(self.store, namespace, self.replica, self.ttl)
        return self._sharing[namespace]

    def manager(self, namespace: str, **options: Any) -> SharedSessionManager:
        def tail_for() -> float:  # the longest a call of the namespace may run, and a margin
            return float(self.engine.call_timeout(namespace) if self.engine is not None else 30.0) + TAIL_MARGIN

        sharing = self.sharing_of(namespace)
        return SharedSessionManager(
            sharing=sharing,
            tail_for=tail_for,
            keep=self.keep,
            get_streams=self.get_streams,
            reloads=self.reloads,
            ids=SessionIds(self.keys, namespace),
            **options,
        )

    async def reloaded(self, namespace: str) -> None:
        """A reload changed `namespace` here: one replica stores the notices in the GET stream of each of its
        sessions that has one (sharedreloads.py); the hub tells no shared session itself."""
        manager, subscriptions = self._managers.get(namespace), self.sharing_of(namespace).subscriptions
        entry = self.engine.registry.snapshot.entries.get(namespace) if self.engine is not None else None
        await tell(self.reloads, namespace, digest(entry), subscriptions, self.get_streams, manager)

    async def follow(self, managers: dict[str, Any]) -> None:
        self._managers = managers
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow_ended, self.store, managers)
            tg.start_soon(follow_changes, self.store, self._sharing)
            tg.start_soon(self.get_streams.run)
