"""The one JSON error shape of the HTTP surface: `{"error": {"code", "message", "details"?}}`."""

from __future__ import annotations

import math

from starlette.responses import JSONResponse

from tooldock.errors import (
    InsufficientScope,
    IssuerUnavailable,
    NamespaceUnavailable,
    RateLimited,
    StateUnavailable,
    ToolDockError,
)


def error_response(err: ToolDockError, headers: dict[str, str] | None = None) -> JSONResponse:
    headers = dict(headers or {})
    if isinstance(err, NamespaceUnavailable | StateUnavailable | IssuerUnavailable):
        headers.setdefault("Retry-After", "1")
    if isinstance(err, InsufficientScope) and err.challenge is not None:  # an OAuth token (RFC 6750 section 3.1)
        headers.setdefault("WWW-Authenticate", err.challenge)
    if isinstance(err, RateLimited):
        headers.setdefault("Retry-After", str(max(1, math.ceil(float(err.details.get("retry_after_seconds", 1))))))
    return JSONResponse({"error": err.to_dict()}, status_code=err.status, headers=headers)
