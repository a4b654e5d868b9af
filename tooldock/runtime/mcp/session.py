"""What ToolDock keeps per MCP connection (a session of one namespace's `/mcp`, or a legacy SSE stream)."""

from __future__ import annotations

from collections.abc import Callable

from tooldock.runtime.mcp.visibility import SessionRules


class SessionState:
    """The log level the session asked for, its resource subscriptions, its visibility rules, and its
    streamable HTTP session id (None on legacy SSE), by which the metrics tell an open session. `now`: the
    registry's generation, by which the rules' effect is kept up to date (visibility.py)."""

    def __init__(self, sid: str | None, now: Callable[[], int]) -> None:
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.sid = sid
        self.visibility = SessionRules(now)
