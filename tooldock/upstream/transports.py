"""Open the transport of one upstream server: a stdio subprocess, streamable HTTP or legacy SSE.

The SDK's transports do the protocol work (and the stdio one stops the whole process tree on close, in its
own process group). What ToolDock adds is `watched`: the read side is relayed through one more stream so
the moment an upstream goes away (its process exits, its HTTP stream ends) is known at once, not at the
next call.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from tooldock.namespace.toolsfile import UpstreamServer, expand_secrets

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# What a stdio upstream inherits from the gateway: enough to find its interpreter and caches, never the
# gateway's own secrets (TOOLDOCK_BEARER_TOKEN, MANAGER_INTERNAL_TOKEN, ...).
INHERITED = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "UV_CACHE_DIR",
    "npm_config_cache",
    "NODE_PATH",
    # package mirrors, for servers npx / uvx fetch at start (install_from_repo / install_from_registry)
    "npm_config_registry",
    "npm_config_update_notifier",
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
)


def stdio_parameters(spec: UpstreamServer, folder: Path, secrets: Mapping[str, str]) -> StdioServerParameters:
    argv = spec.argv
    cwd = Path(spec.cwd) if spec.cwd else folder
    env = {k: os.environ[k] for k in INHERITED if k in os.environ}
    env.update({k: expand_secrets(v, dict(secrets)) for k, v in spec.env})
    return StdioServerParameters(
        command=argv[0], args=argv[1:], env=env, cwd=str(cwd if cwd.is_absolute() else folder / cwd)
    )


@contextlib.asynccontextmanager
async def open_transport(
    spec: UpstreamServer,
    folder: Path,
    secrets: Mapping[str, str],
    errlog: TextIO | None = None,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams of one upstream, for `mcp.Client`. Raises OSError when a command is missing.
    `errlog`: where a stdio server's stderr goes (output.py masks it; the gateway's stderr when None); `auth`:
    the server's own OAuth token (clientcreds.py), for a url server with `oauth`."""
    assert not spec.registry, "resolve a registry server first (upstream/resolve.py)"
    if spec.transport == "stdio":
        params = stdio_parameters(spec, folder, secrets)
        async with stdio_client(params, errlog=errlog or sys.stderr) as streams:
            yield streams
        return
    headers = {k: expand_secrets(v, dict(secrets)) for k, v in spec.headers}
    if spec.transport == "sse":
        async with sse_client(spec.url, headers=headers, timeout=HTTP_TIMEOUT.connect or 30.0, auth=auth) as streams:
            yield streams
        return
    async with httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT, auth=auth) as http:
        async with streamable_http_client(spec.url, http_client=http) as streams:
            yield streams[0], streams[1]


@contextlib.asynccontextmanager
async def watched(
    streams: contextlib.AbstractAsyncContextManager[tuple[Any, Any]], on_close: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """The same streams, with `on_close` called once when the upstream's side ends by itself."""
    async with streams as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async with send:
                    async for message in read:
                        await send.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                on_close()

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            try:
                yield receive, write
            finally:
                tg.cancel_scope.cancel()


async def http_status(spec: UpstreamServer, secrets: Mapping[str, str], auth: httpx2.Auth | None = None) -> str:
    """Why an HTTP upstream refused us, as the status line says it: the SDK's transports only report
    "an error response" (a wrong token should read as 401, not as a server error)."""
    headers = {k: expand_secrets(v, dict(secrets)) for k, v in spec.headers}
    headers.setdefault("Accept", "application/json, text/event-stream")
    body = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=10, auth=auth) as http:
            if spec.transport == "sse":
                async with http.stream("GET", spec.url) as response:
                    status, reason = response.status_code, response.reason_phrase
            else:
                response = await http.post(spec.url, json=body)
                status, reason = response.status_code, response.reason_phrase
    except httpx2.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return f"HTTP {status} {reason}" if status >= 400 else ""
