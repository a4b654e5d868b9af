"""One upstream MCP server: its client session (official SDK), what it lists, and its life.

A connection spawns or dials its server, lists tools, resources, templates and prompts (every page), then
stays up until the server goes away or the namespace is stopped. A server that goes away is reported to
the owner (`on_down`), which takes its items out of the catalog; with restarts on, it is started again
after a backoff (1 s doubling to 30 s, reset after a minute of good health) and its items come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter, ValidationError

import tooldock
from tooldock.errors import RegistryError, UpstreamError, UpstreamUnavailable
from tooldock.namespace.toolsfile import UpstreamServer
from tooldock.upstream.clientcreds import ClientCredentials, client_credentials
from tooldock.upstream.output import ServerOutput
from tooldock.upstream.resolve import Resolver
from tooldock.upstream.transports import http_status, open_transport, watched
from tooldock.worker.secretenv import Masker

ConnectionState = Literal["starting", "ready", "down", "failed", "stopped"]
MAX_PAGES = 100  # a paginator that never ends cannot hang a listing
MAX_RESULT_BYTES = 16 * 1024 * 1024  # like a worker's largest message
BACKOFF_FIRST, BACKOFF_MAX, HEALTHY_AFTER = 1.0, 30.0, 60.0
CLIENT_INFO = types.Implementation(name="tooldock-gateway", version=tooldock.__version__)
# The requests a 2026-07-28 server may answer `input_required`: request and params models, and the result as
# the SDK client reads it.
ROUNDS: dict[str, tuple[Any, Any, Any]] = {
    "tools/call": (
        types.CallToolRequest,
        types.CallToolRequestParams,
        TypeAdapter(types.CallToolResult | types.InputRequiredResult),
    ),
    "prompts/get": (
        types.GetPromptRequest,
        types.GetPromptRequestParams,
        TypeAdapter(types.GetPromptResult | types.InputRequiredResult),
    ),
    "resources/read": (
        types.ReadResourceRequest,
        types.ReadResourceRequestParams,
        TypeAdapter(types.ReadResourceResult | types.InputRequiredResult),
    ),
}
CONNECTION_CLOSED = -32000  # the SDK's code for a request whose connection ended


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class Listing:
    """What one server offers, as the JSON it sent (unprefixed)."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("tools", "resources", "templates", "prompts")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Listing:
        return cls(**{k: [x for x in data.get(k) or [] if isinstance(x, dict)] for k in cls().to_dict()})


def describe(exc: BaseException) -> str:
    """A one-line reason for a failed connection, for status and logs."""
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}; install it or fix the command in tools.toml"
    if isinstance(exc, RegistryError):
        return str(exc)
    if isinstance(exc, MCPError):
        return f"the server answered with error {exc.error.code}: {exc.error.message}"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Connection:
    def __init__(
        self,
        spec: UpstreamServer,
        folder: Path,
        secrets: Mapping[str, str],
        *,
        startup_timeout: float,
        restart: bool,
        on_up: Callable[[Connection], None],
        on_down: Callable[[Connection], None],
        on_notification: Callable[[Connection, Any], Awaitable[None]],
        resolver: Resolver | None = None,
        owner: str = "",
    ) -> None:
        self.spec, self.folder, self.secrets = spec, folder, secrets
        # The values this server is given are masked in everything it sends on: results, listings, log
        # messages, questions, progress, errors and its stderr (a worker masks its own the same way).
        self.mask = Masker(list(secrets.values()))
        self.owner = owner  # the gateway namespace, for log lines
        self._output: ServerOutput | None = None
        self.target = spec  # what runs: `spec` itself, or what its registry entry resolved to
        self._credentials: ClientCredentials | None = None  # its own OAuth token, with `oauth` (clientcreds.py)
        self.resolver = resolver or Resolver("", None)
        self.startup_timeout, self.restart = startup_timeout, restart
        self._on_up, self._on_down, self._on_notification = on_up, on_down, on_notification
        self.state: ConnectionState = "starting"
        self.listing = Listing()
        self.last_error = ""
        self.restarts = 0
        self.client: Client | None = None
        self.capabilities: types.ServerCapabilities | None = None
        self.first_attempt = asyncio.Event()  # set once the first connection attempt succeeded or failed
        self.log_sink: Callable[[types.LoggingMessageNotificationParams], Awaitable[None]] | None = None
        # Set by the owner: the server's sampling / elicitation request, asked of the caller whose call it
        # belongs to; the caller's result as JSON, or MCPError (refused).
        self.ask_sink: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
        self._stopping = False
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[None] | None = None

    # -- life -------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"upstream {self.spec.label}")

    async def stop(self) -> None:
        """Close the session and stop the server (the SDK kills a stdio server's whole process group)."""
        self._stopping = True
        self.first_attempt.set()  # a call waiting for the first start is answered now (unavailable), not at its timeout
        if self._scope is not None:
            self._scope.cancel()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._task), 15)
        self.state = "stopped"

    async def _run(self) -> None:
        delay = BACKOFF_FIRST
        while not self._stopping:
            began = time.monotonic()
            # The reason is composed first and set once: a status read meanwhile (GET /namespaces) must not
            # see the SDK's bare "error response" before the HTTP status and the server's output are added.
            try:
                await self._attempt()
                reason = self.last_error  # the server closed its connection
            except Exception as exc:  # every way a server can fail to start is reported, none stops the gateway
                reason = self.mask(describe(exc))
                if self.target.transport != "stdio" and self.state != "ready":
                    with contextlib.suppress(Exception):
                        refused = await http_status(self.target, self.secrets, self._auth())
                        reason += f" ({self.target.url} answered {refused})" if refused else ""
            said = await self._output.said() if self._output is not None and not self._stopping else ""
            self.last_error = f"{reason}; its last output: {said}" if said and reason else reason
            was_up, self.client, self.capabilities = self.state == "ready", None, None
            if self._stopping:
                break
            self.state = "down" if was_up else "failed"
            print(
                f"tooldock: upstream {self.spec.label} {'went away' if was_up else 'failed to start'}: "
                f"{self.last_error}",
                file=sys.stderr,
                flush=True,
            )
            first = not self.first_attempt.is_set()
            self.first_attempt.set()
            if was_up or first:  # first: what was listed from the schema cache meanwhile goes too
                self._on_down(self)
            if not self.restart:
                return
            if time.monotonic() - began > HEALTHY_AFTER:
                delay = BACKOFF_FIRST
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)
            self.restarts += 1
            self.state = "starting"

    async def _attempt(self) -> None:
        closed = asyncio.Event()
        with anyio.CancelScope(deadline=anyio.current_time() + self.startup_timeout) as scope:
            self._scope = scope
            if self._stopping:
                scope.cancel()
            self._output = None
            self.target = await self.resolver.resolve(self.spec, self.secrets)
            if self.target.transport == "stdio":
                self._output = ServerOutput(f"[{self.owner}] {self.spec.namespace or '-'}:", self.mask)
            transport = watched(self._transport(), closed.set)
            client = Client(
                transport,
                mode="auto",
                client_info=CLIENT_INFO,
                logging_callback=self._log,
                # 2026-07-28 servers log only for requests that opt in; the caller's own level filters later
                log_level="debug",
                message_handler=self._message,
                sampling_callback=self._sample,
                elicitation_callback=self._elicit,
                cache=None,
            )
            async with client:
                self.capabilities = client.server_capabilities
                listing = await self._list_all(client)
                scope.deadline = math.inf  # up: no more start-up deadline
                self.client, self.listing, self.state = client, listing, "ready"
                self.last_error = ""  # kept until now: a server being retried still shows why it failed
                self.first_attempt.set()
                self._on_up(self)
                await closed.wait()
                self.last_error = "the server closed its connection (process exited or stream ended)"
        if scope.cancelled_caught and not self._stopping and self.state != "ready":
            raise TimeoutError(
                f"no answer to initialize and listing within {self.startup_timeout:g}s (startup_timeout in tools.toml)"
            )

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self._output is None:
            async with open_transport(self.target, self.folder, self.secrets, auth=self._auth()) as streams:
                yield streams
            return
        with self._output as errlog:
            async with open_transport(self.target, self.folder, self.secrets, errlog, self._auth()) as streams:
                yield streams

    def _auth(self) -> ClientCredentials | None:
        """The server's own OAuth token source (its tools.toml `oauth`), kept across reconnections."""
        if self._credentials is None and self.target.oauth:
            self._credentials = client_credentials(self.target, self.secrets)
        return self._credentials

    async def _list_all(self, client: Client) -> Listing:
        caps = client.server_capabilities
        session = client.session
        listing = Listing()
        if caps.tools is not None:
            listing.tools = await _pages(session.list_tools, "tools")
        if caps.resources is not None:
            listing.resources = await _pages(session.list_resources, "resources")
            listing.templates = await _pages(session.list_resource_templates, "resource_templates")
        if caps.prompts is not None:
            listing.prompts = await _pages(session.list_prompts, "prompts")
        return listing

    async def relist(self) -> None:
        """The server said a list changed: read everything again."""
        if self.client is not None:
            self.listing = await self._list_all(self.client)

    # -- notifications from the server --------------------------------------------------------------

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self.log_sink is not None:
            if self.mask.values:
                params = types.LoggingMessageNotificationParams.model_validate(self.mask.scrub(dump(params)))
            await self.log_sink(params)

    async def _message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a line that is not JSON-RPC: logged, the session goes on
            print(
                self.mask(f"tooldock: upstream {self.spec.label} sent an invalid message: {message}"[:500]),
                file=sys.stderr,
                flush=True,
            )
            return
        if isinstance(message, types.ServerNotification):
            await self._on_notification(self, message)

    # -- the server's requests to its client (relayed to the caller) --------------------------------------
    # Roots are not declared: a server keeps the roots it is given for its whole session (server-filesystem
    # narrows its allowed directories to them), and this one session serves every caller.

    async def _sample(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        answer = await self._ask("sampling/createMessage", params)
        if isinstance(answer, types.ErrorData):
            return answer
        model = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        return _answer(model, answer)

    async def _elicit(self, context: Any, params: types.ElicitRequestParams) -> Any:
        answer = await self._ask("elicitation/create", params)
        return answer if isinstance(answer, types.ErrorData) else _answer(types.ElicitResult, answer)

    async def _ask(self, method: str, params: Any) -> dict[str, Any] | types.ErrorData:
        if self.ask_sink is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{method} is not relayed here")
        try:
            return await self.ask_sink(method, self.mask.scrub(dump(params)))
        except MCPError as err:
            return err.error

    # -- requests -------------------------------------------------------------------------------------

    def _client(self) -> Client:
        if self.client is None or self.state != "ready":
            why = f": {self.last_error}" if self.last_error else ""
            raise UpstreamUnavailable(
                f"upstream server {self.spec.label} is {self.state}{why}",
                {"server": self.spec.namespace, "state": self.state},
            )
        return self.client

    async def send_round(
        self,
        method: str,
        params: dict[str, Any],
        answers: dict[str, Any] | None,
        state: str | None,
        progress: Any = None,
    ) -> dict[str, Any]:
        """One round of a tools/call, prompts/get or resources/read: its result, or a 2026-07-28 server's
        `input_required` (asking.py drives the rounds)."""
        request_model, params_model, result_type = ROUNDS[method]
        params = dict(params)
        if answers is not None:
            params["inputResponses"] = answers
        if state is not None:
            params["requestState"] = state
        return await self.request(request_model(params=params_model.model_validate(params)), result_type, progress)

    async def request(self, request: Any, result_type: Any, progress: Any = None) -> dict[str, Any]:
        """Send one request; the result as JSON. Upstream JSON-RPC errors become `UpstreamError`."""
        client = self._client()
        if progress is not None and self.mask.values:
            told = progress

            async def progress(value: float, total: float | None, message: str | None) -> None:
                await told(value, total, self.mask(message) if message else message)

        try:
            result = await client.session.send_request(request, result_type, progress_callback=progress)
        except MCPError as err:
            if err.error.code == CONNECTION_CLOSED or self.state != "ready":
                raise UpstreamUnavailable(
                    f"upstream server {self.spec.label} went away during the request: {err.error.message}",
                    {"server": self.spec.namespace},
                ) from None
            raise UpstreamError(
                err.error.message,
                {"rpc_code": err.error.code, "rpc_message": err.error.message, "rpc_data": err.error.data},
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise UpstreamUnavailable(f"upstream server {self.spec.label} went away: {exc!r}") from None
        data = dump(result)
        size = len(json.dumps(data))
        if size > MAX_RESULT_BYTES:
            raise UpstreamError(
                f"upstream server {self.spec.label} returned {size} bytes, more than the {MAX_RESULT_BYTES} allowed",
                {"rpc_code": types.INTERNAL_ERROR, "rpc_message": "result too large", "size": size},
            )
        return self.mask.scrub(data)


def _answer(model: Any, answer: dict[str, Any]) -> Any:
    """The caller's answer as the SDK's result model (checked by the relay already; this is the last guard)."""
    try:
        return model.model_validate(answer, by_name=False)
    except ValidationError as err:
        reason = err.errors()[0]["msg"]
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the caller's answer is not valid: {reason}")


async def _pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        items += [dump(item) for item in getattr(page, attr)]
        cursor = page.next_cursor
        if not cursor:
            break
    return items
