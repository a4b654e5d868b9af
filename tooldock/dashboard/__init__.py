"""The web dashboard at `/ui/` (issue 60): a page of plain ES modules and CSS shipped in this package (no CDN,
no build step, no Node.js at run time), and the JSON endpoints it needs that the gateway had not.

    front = DashboardPages(front)                       # /ui and /ui/...: the app, its files; CSP on each
    include_dashboard(app, engine, keys, audit, secrets)  # tooldock.runtime.http.dashboard: the JSON endpoints

Modules, one job each: `pages` (serves the files: every `/ui/...` path answers the app, deep links
included), `keysapi` (`GET /whoami`; `GET /keys`, `POST /keys`, `DELETE /keys/{key_id}` for admins, over
`tooldock.keys`, audited), `auditapi` (`GET /audit`, `GET /audit/stats`: the audit log read back by
`auditread`, within the caller's scope), `secretsapi` (`GET /secrets`, `PUT /secrets/{name}`: status, and a
write-only value for admins), `overviewapi` (`GET /overview`, `GET /overview/live`: the overview's state,
once or as an event stream). The browser side is in `static/`. This package sits below the gateway
(`tooldock.runtime` wires it in and hands it what it needs), so it imports nothing of the gateway.
"""

from tooldock.dashboard.auditapi import audit_router
from tooldock.dashboard.keysapi import keys_router
from tooldock.dashboard.overviewapi import overview_router
from tooldock.dashboard.pages import CSP, DashboardPages
from tooldock.dashboard.secretsapi import secrets_router

__all__ = ["CSP", "DashboardPages", "audit_router", "keys_router", "overview_router", "secrets_router"]
