"""What ToolDock keeps per MCP connection (a session of one namespace's `/mcp`, or a legacy SSE stream)."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tooldock.runtime.mcp.caller import connection_of
from tooldock.runtime.mcp.visibility import SessionRules
from tooldock.upstream.catalog import Activation
from tooldock.worker.protocol import state_refusal

# 2026-07-28 callers of an upstream namespace share one `toolman_activate` view (no sessions; not REST's).
STATELESS_SESSION = "mcp-stateless"


class SessionValues:
    """A session's `ctx.set_state()` values, kept here so they outlive the worker that set them (a reload,
    a crash, scale to zero): handed to the worker with each of the session's calls, changed by what its
    tools write (`state` events; worker/sessionvalues.py)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: dict[str, dict[str, Any]] = {}

    def fields(self) -> dict[str, Any]:
        """What a request to the worker carries for this session: its values, when it has any."""
        return {"state": self.values} if self.values else {}

    def keep(self, data: Any) -> None:
        """A tool's write (a `state` event): `{"key", "value"}`, a null value for a delete. A worker runs the
        namespace's code: anything else, or values over the limit, is refused (ValueError; the relay drops it)."""
        data = data if isinstance(data, dict) else {}
        name, value = data.get("key"), data.get("value")
        if not isinstance(name, str):
            raise ValueError("a session value's name is a string")
        if value is None:
            self.values.pop(name, None)
            return
        if not isinstance(value, dict):
            raise ValueError("a session value is a JSON object (fastmcp's stored value)")
        if (refusal := state_refusal(self.values, name, value)) is not None:
            raise ValueError(refusal)
        self.values[name] = value


class SessionState:
    """The log level the session asked for, its resource subscriptions, its visibility rules, its values,
    what `toolman_activate` turned on or off in it (an upstream namespace's view: upstream/catalog.py), and
    its streamable HTTP session id (None on legacy SSE), by which the metrics tell an open session.
    `now`: the registry's generation, by which the rules' effect is kept up to date (visibility.py)."""

    def __init__(self, sid: str | None, now: Callable[[], int]) -> None:
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.sid = sid
        self.visibility = SessionRules(now)
        self.values = SessionValues()
        self.activation = Activation()  # changed in place by toolman_activate (upstream/worker.py)
        # replicas: sessionsharing.SessionSharing.changed
        self.on_change: Callable[[SessionState], Awaitable[None] | None] | None = None

    def subscribe(self, uri: str) -> None:
        self.subscriptions.add(uri)
        self.changed()

    def unsubscribe(self, uri: str) -> None:
        self.subscriptions.discard(uri)
        self.changed()

    def set_log_level(self, level: str) -> None:
        self.log_level = level
        self.changed()

    def changed(self) -> Awaitable[None] | None:
        """Say the state changed (after a change): replicas sharing sessions hear of it. What it returns, if
        anything, is done once they can (the store has the change and it is announced)."""
        return self.on_change(self) if self.on_change is not None else None

    def snapshot(self) -> dict[str, Any]:
        """What changes in a session, as JSON (for the replicas that share it)."""
        return {
            "log_level": self.log_level,
            "subscriptions": sorted(self.subscriptions),
            "visibility": self.visibility.rules,
            "values": self.values.values,
            "activation": {"tools": self.activation.tools, "resources": self.activation.resources},
        }

    def restore(self, snapshot: Any) -> None:
        """Take another replica's snapshot of this session (what it changed last wins)."""
        if not isinstance(snapshot, dict):
            return
        level = snapshot.get("log_level")
        self.log_level = level if isinstance(level, str) else None
        subscriptions = snapshot.get("subscriptions")
        self.subscriptions = {str(u) for u in subscriptions} if isinstance(subscriptions, list) else set()
        rules = snapshot.get("visibility")
        # What they hide is asked of this replica's worker again (visibility.hidden_for: a new generation)
        self.visibility.rules = [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []
        self.visibility.generation = -1
        values = snapshot.get("values")
        self.values.values = (
            {k: v for k, v in values.items() if isinstance(v, dict)} if isinstance(values, dict) else {}
        )
        activation = snapshot.get("activation")
        for kind in ("tools", "resources"):  # in place: requests in flight hold this session's Activation
            found = activation.get(kind) if isinstance(activation, dict) else None
            changed = getattr(self.activation, kind)
            changed.clear()
            if isinstance(found, dict):
                changed.update({str(k): v for k, v in found.items() if isinstance(v, bool)})

    def fields(self) -> dict[str, Any]:
        """What a request to the worker carries for this session: its visibility rules and its values."""
        return {**self.visibility.fields(), **self.values.fields()}


def session_states(
    sessions: weakref.WeakKeyDictionary,
    now: Callable[[], int],
    seen: Callable[[Any, SessionState], None],
    made: Callable[[SessionState], None] | None = None,
) -> Callable[[Any], SessionState]:
    """The state of the session a request belongs to (by its connection, so a session's requests share it),
    made on its first request; `seen` hears of each new one (the lean path may take its next requests), and
    `made` too, before (replicas sharing sessions: it restores what another replica knew of it)."""

    def state(ctx: Any) -> SessionState:
        conn = connection_of(ctx)
        found = sessions.get(conn)
        if found is None:
            request = getattr(ctx, "request", None)
            sid = request.headers.get("mcp-session-id") if request else None
            found = sessions[conn] = SessionState(sid, now)
            if made is not None:
                made(found)
            seen(ctx, found)
        return found

    return state


def views(state: Callable[[Any], SessionState]) -> Callable[[Any], Any]:
    """Whose `toolman_activate` view a request sees in an upstream namespace: its session's (in its state,
    which replicas share), or the one view of 2026-07-28 callers."""

    def view(ctx: Any) -> Any:
        modern = getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS
        return STATELESS_SESSION if modern else state(ctx).activation

    return view
