"""The web dashboard at `/ui/` (issue 60): a page of plain ES modules and CSS shipped in this package (no CDN,
no build step, no Node.js at run time), and the JSON endpoints it needs that the gateway had not.

    front = DashboardPages(front)                       # /ui and /ui/...: the app, its files; CSP on each
    app.include_router(keys_router(store, key_of, audit.record, requestid.of_scope))

Modules, one job each: `pages` (serves the files: every `/ui/...` path answers the app, deep links
included), `keysapi` (`GET /whoami`; `GET /keys`, `POST /keys`, `DELETE /keys/{key_id}` for admins, over
`tooldock.keys`, audited). The browser side is in `static/`. This package sits below the gateway
(`tooldock.runtime` wires it in and hands it what it needs), so it imports nothing of the gateway.
"""

from tooldock.dashboard.keysapi import keys_router
from tooldock.dashboard.pages import CSP, DashboardPages

__all__ = ["CSP", "DashboardPages", "keys_router"]
