"""`GET /metrics`: the gateway's Prometheus metrics (runtime.observe.Metrics), for the bearer token or for
`METRICS_TOKEN` (a token that opens nothing else, for a scraper). Plain ASGI outside the bearer check, so
that it can take its own token; everything else passes through untouched."""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tooldock.errors import Unauthorized
from tooldock.runtime.http.auth import CHALLENGE, token_matches
from tooldock.runtime.http.responses import error_response
from tooldock.runtime.observe import Metrics
from tooldock.runtime.observe.metrics import CONTENT_TYPE

PATH = "/metrics"


class MetricsEndpoint:
    def __init__(self, app: ASGIApp, metrics: Metrics, token: str, metrics_token: str | None = None) -> None:
        self.app, self.metrics, self.tokens = app, metrics, [t for t in (token, metrics_token) if t]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not any(token_matches(presented.strip(), t) for t in self.tokens):
            err = Unauthorized("GET /metrics takes 'Authorization: Bearer <token>': the bearer token or METRICS_TOKEN")
            await error_response(err, CHALLENGE)(scope, receive, send)
            return
        await Response(self.metrics.render(), media_type=CONTENT_TYPE)(scope, receive, send)
