"""CORS for browser clients (seed 000's `CORS_ORIGINS`): Starlette's CORSMiddleware, outside bearer auth.

Outside, because a browser's preflight (`OPTIONS` with `Access-Control-Request-Method`) never carries the
`Authorization` header: CORSMiddleware answers it before auth is asked, and adds the CORS headers to every
answer, a 401 included, so a page can read why it was refused. Unset (the default) adds nothing.

It covers every route. On `/mcp`, `/sse` and `/messages` a browser's `Origin` must also pass the MCP
transport's own check (MCP_ALLOWED_ORIGINS, or loopback origins on a loopback bind): CORS decides what a
page may read, that check decides what it may do.
"""

from __future__ import annotations

import re

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

METHODS = ("GET", "POST", "DELETE", "OPTIONS")
# Answer headers a page may read: the request id, MCP's session and version, and why a call was refused.
EXPOSED = ("X-Request-Id", "Mcp-Session-Id", "MCP-Protocol-Version", "WWW-Authenticate", "Retry-After")


def with_cors(app: ASGIApp, origins: tuple[str, ...]) -> ASGIApp:
    """`app` behind CORS for `origins` (exact origins, `scheme://host:*` for any port, or `*`)."""
    if not origins:
        return app
    exact = [o for o in origins if not o.endswith(":*")]
    ports = [re.escape(o[:-2]) + r":\d+" for o in origins if o.endswith(":*")]
    return CORSMiddleware(
        app,
        allow_origins=exact,
        allow_origin_regex="|".join(ports) or None,
        allow_methods=METHODS,
        allow_headers=["*"],
        expose_headers=EXPOSED,
        max_age=600,
    )
