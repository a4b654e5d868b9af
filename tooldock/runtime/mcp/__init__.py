"""The MCP front end: one SDK server and session manager per namespace (`server`), the request rules the SDK
does not check (`rules`), the 2025-03-26 JSON / batch fallback (`compat`), the per-session event store
(`events`), the relay of Context events from workers to the caller's session (`relay`) and the legacy
HTTP+SSE transport (`legacy`). It reaches workers only through the engine.
"""
