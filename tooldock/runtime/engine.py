"""One execution path for every front end: find the namespace and tool, apply limits, call the worker.

Limits (seed 000): a per-call timeout and a per-namespace concurrency limit, both enforced here in the
gateway, from the namespace's `tooldock.yaml` or the gateway defaults.

Scopes (seed 002): a caller with an API key (`key`, from the HTTP edge or the relay socket) sees and calls
only what its scope allows; `key=None` is the bearer token. Refusals are `NotInScope` (403), and what a
refused caller is told exists (the "available" lists) is narrowed to its scope too.
"""

from __future__ import annotations

import asyncio
import re
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, cast

from tooldock.errors import (
    ExecutionTimeout,
    InvalidApiKey,
    InvalidArguments,
    MissingNamespace,
    NamespaceNotFound,
    NamespaceUnavailable,
    NotFound,
    ToolDockError,
    ToolNotFound,
    WorkerRetired,
)
from tooldock.keys import ApiKey
from tooldock.namespace.models import exposes
from tooldock.namespace.names import NamespaceNameError, validate_namespace_name
from tooldock.runtime import jsonin, requestid
from tooldock.runtime.access import restricted
from tooldock.runtime.admission import Admission, Slots
from tooldock.runtime.backend import SessionViews
from tooldock.runtime.keyguard import KeyGuard
from tooldock.runtime.observe import AuditLog, Metrics, current_call, tracing
from tooldock.runtime.registry import NamespaceEntry, Registry
from tooldock.runtime.settings import Settings
from tooldock.runtime.workerclient import round_relay
from tooldock.state import MemoryStore
from tooldock.upstream.catalog import ACTIVATE

_VIEWS: dict[type, bool] = {}


def session_views(worker: Any) -> SessionViews | None:
    """The worker as SessionViews (upstream namespaces), else None. A runtime-checkable Protocol's isinstance
    inspects every member on each call (a few percent of a REST call); the answer is the same per class."""
    kind = type(worker)
    found = _VIEWS.get(kind)
    if found is None:
        found = _VIEWS[kind] = isinstance(worker, SessionViews)
    return cast(SessionViews, worker) if found else None


class Engine:
    def __init__(self, registry: Registry, settings: Settings, guard: KeyGuard | None = None) -> None:
        """`guard`: stops a call whose API key is revoked or expires while it runs (None: calls run on)."""
        self.registry, self.settings, self.guard = registry, settings, guard
        # One semaphore per worker generation: a replaced worker's limit goes away with it.
        self._limits: weakref.WeakKeyDictionary[Any, Slots] = weakref.WeakKeyDictionary()
        self.admission = Admission(MemoryStore())  # the app gives it the shared state store, when there is one
        self.audit: AuditLog | None = None  # set by the app: one line per call
        self.metrics: Metrics | None = None

    def namespace(self, name: str | None, key: ApiKey | None = None) -> NamespaceEntry:
        if not name:
            available = self.namespaces(key)
            example = available[0] if available else "NAME"
            raise MissingNamespace(
                f"missing X-Namespace header: say which namespace to use, e.g. 'X-Namespace: {example}', or use "
                f"the path /ns/{example}/...; available: {', '.join(available) or 'none'}",
                {"available": available},
            )
        entry = self.registry.snapshot.entries.get(name)
        if entry is None:  # a name the snapshot holds is valid; any other is checked, to say what is wrong
            try:
                validate_namespace_name(name)
            except NamespaceNameError as exc:
                raise NamespaceNotFound(str(exc), {"namespace": name}) from None
        key = restricted(key)
        if key is not None and not key.allows_namespace(name):
            raise key.refusal(name, {})
        if entry is None:
            available = self.namespaces(key)
            raise NamespaceNotFound(
                f"unknown namespace {name!r}; available: {', '.join(available) or 'none'}",
                {"namespace": name, "available": available},
            )
        return entry

    def namespaces(self, key: ApiKey | None = None) -> list[str]:
        """The names of the namespaces a caller may use, sorted."""
        key = restricted(key)
        return sorted(n for n in self.registry.snapshot.entries if key is None or key.allows_namespace(n))

    def upstream(self, namespace: str) -> bool:
        """Whether `namespace` fronts upstream MCP servers (whose tools each caller may activate)."""
        entry = self.registry.snapshot.entries.get(namespace)
        return entry is not None and entry.source.is_upstream

    def plain_tool(self, namespace: str, tool: str) -> bool:
        """Whether the namespace's worker said `tool` takes no Context (sends no progress, logs or requests)."""
        entry = self.registry.snapshot.entries.get(namespace)
        return entry is not None and tool in getattr(entry.worker, "plain_tools", ())

    def may_ask(self, namespace: str, tool: str) -> bool:
        """Whether `tool` may ask the client something (elicitation, sampling, roots): a Context tool whose
        worker did not say it never asks (namespace/asks.py)."""
        entry = self.registry.snapshot.entries.get(namespace)
        if entry is None or tool in getattr(entry.worker, "plain_tools", ()):
            return False
        asking = getattr(entry.worker, "asking_tools", None)
        return asking is None or tool in asking

    def context_tool(self, namespace: str, tool: str) -> bool:
        """Whether `tool` is one of the namespace's worker tools that take a fastmcp Context."""
        entry = self.registry.snapshot.entries.get(namespace)
        if entry is None or entry.worker is None or tool in getattr(entry.worker, "plain_tools", (tool,)):
            return False
        return any(t["name"] == tool for t in entry.tools)

    def visible(self, namespace: str, tools: list[dict[str, Any]], key: ApiKey | None) -> list[dict[str, Any]]:
        """`tools` of `namespace` narrowed to what its `tools: {allow, deny}` exposes and `key` may see."""
        entry = self.registry.snapshot.entries.get(namespace)
        config = entry.source.config if entry is not None else None
        if config is not None and (config.tools_allow or config.tools_deny):
            tools = [t for t in tools if t["name"] == ACTIVATE or exposes(config, str(t["name"]))]
        key = restricted(key)
        return tools if key is None else key.visible(namespace, tools)

    def list_tools(self, namespace: str | None, session: Any = None, key: ApiKey | None = None) -> list[dict[str, Any]]:
        """The tools a caller sees. `session` (an MCP session, or None) matters for upstream namespaces only."""
        entry = self.namespace(namespace, key)
        if (views := session_views(entry.worker)) is not None:
            return self.visible(entry.source.name, views.tools_for(session), key)
        return self.visible(entry.source.name, entry.listed(self.settings.inline_schema_refs), key)

    def surface(self, namespace: str | None, kind: str, session: Any = None) -> list[dict[str, Any]]:
        entry = self.namespace(namespace)
        if (views := session_views(entry.worker)) is not None:
            return views.surface_view(session).get(kind, [])
        return entry.surface(kind)

    def get_tool(
        self, namespace: str | None, tool: str, session: Any = None, key: ApiKey | None = None
    ) -> dict[str, Any]:
        entry = self.namespace(namespace, key)
        name, key = entry.source.name, restricted(key)
        if (views := session_views(entry.worker)) is not None:
            try:
                found = views.tool_for(tool, session)
            except ToolNotFound:
                if key is None:
                    raise
                found = None  # said again below, with only the tools this key may see as available
        else:
            found = next((t for t in entry.tools if t["name"] == tool), None)
        if found is not None and tool != ACTIVATE and not exposes(entry.source.config, tool):
            found = None  # hidden by the namespace's tools.deny / tools.allow: as if it did not exist
        if found is None and entry.state in ("failed", "crash_loop") and entry.worker is not None:
            # It never got to list its tools (an install that failed, a crash loop from the start): the
            # tool may well be there once it runs, so this is 503 and retryable, not 404.
            why = entry.worker.status().get("last_error") or entry.state
            raise NamespaceUnavailable(
                f"namespace {name!r} is not running ({entry.state}): {why}", {"state": entry.state}
            )
        if found is None:
            listed = self.visible(name, entry.tools, key)
            raise ToolNotFound(
                f"no tool named {tool!r} in namespace {name!r}; "
                f"available: {', '.join(sorted(t['name'] for t in listed)) or 'none'}",
                {"namespace": name, "tool": tool},
            )
        if key is not None and not key.allows_tool(name, found):
            raise key.refusal(name, found)
        return found

    def limited(self, entry: NamespaceEntry, key: ApiKey | None) -> bool:  # else `admit` is not awaited
        return self.admission.limited(entry.source.config.limits.rate, key.rate if key is not None else None)

    async def admit(self, entry: NamespaceEntry, key: ApiKey | None) -> None:
        """Take the call's tokens (RateLimited; StateUnavailable when a shared store does not answer). Done by
        `call_tool` itself, unless a front end admitted the call earlier (a task, admitted at `tools/call`)."""
        limits = entry.source.config.limits
        await self.admission.admit_call(entry.source.name, limits.rate, limits.burst, key)

    def call_timeout(self, namespace: str) -> float:
        """How long a call in `namespace` may run: its own limit, else the gateway's."""
        entry = self.registry.snapshot.entries.get(namespace)
        return (entry.source.config.limits.timeout if entry is not None else None) or self.settings.call_timeout

    def _semaphore(self, entry: NamespaceEntry) -> Slots:
        semaphore = self._limits.get(entry.worker)
        if semaphore is None:
            limit = entry.source.config.limits.concurrency or self.settings.max_concurrency
            semaphore = self._limits[entry.worker] = Slots(limit)
        return semaphore

    async def call_tool(
        self,
        namespace: str | None,
        tool: str,
        arguments: Any,
        relay: Any = None,
        traceback: bool = False,
        session: Any = None,
        key: ApiKey | None = None,
        admitted: bool = False,
    ) -> dict[str, Any]:
        """The worker's result: `{"content": [...], "structuredContent": ..., "isError": false}`.
        `relay` carries a Context tool's progress, log and client requests to the MCP caller. A failed call's
        traceback (secret values masked) stays in the error's details only when `traceback` is asked for.
        `key`: the caller's API key; a tool outside its scope is refused (NotInScope) before any work."""

        async def work() -> dict[str, Any]:
            entry = self.namespace(namespace, key)
            self.get_tool(entry.source.name, tool, session, key)
            if not isinstance(arguments, dict):
                raise InvalidArguments(
                    f"arguments must be a JSON object of parameter names to values, got {jsonin.kind(arguments)}"
                )
            if not admitted and self.limited(entry, key):
                await self.admit(entry, key)
            try:
                return await self._run(entry, f"tool {tool!r}", lambda worker: worker.call(tool, arguments, relay), key)
            except ToolDockError as err:
                if not traceback:
                    err.details.pop("traceback", None)
                raise

        result: dict[str, Any] = await self._observed(namespace, "tools/call", tool, arguments, work(), key)
        return result

    async def worker_request(
        self, namespace: str | None, op: str, session: Any = None, key: ApiKey | None = None, **fields: Any
    ) -> dict[str, Any]:
        """resources.read, prompts.get, completion.complete: same limits and hand-over as a tool call.
        Upstream namespaces also take resources.subscribe / resources.unsubscribe, and the caller's session."""

        async def work() -> Any:
            entry = self.namespace(namespace, key)
            if entry.worker is None:
                raise NotFound(f"namespace {entry.source.name!r} has no tools, resources or prompts")
            if session_views(entry.worker) is not None:
                # an upstream namespace: the caller's view, and who answers its server's questions (for a
                # worker namespace the worker client takes the relay from the same variable itself)
                fields["session"] = session
                if op in ("prompts.get", "resources.read"):
                    fields["relay"] = round_relay.get()
            if self.limited(entry, key):
                await self.admit(entry, key)
            return await self._run(entry, op, lambda worker: worker.request(op, **fields), key)

        subject = fields.get("uri") or fields.get("name") or ""
        method = {"resources.read": "resources/read", "prompts.get": "prompts/get"}.get(op, op)
        return await self._observed(namespace, method, str(subject), None, work(), key)

    def refused(self, namespace: str | None, tool: str, err: ToolDockError, key: ApiKey | None = None) -> None:
        """Record a call a front end refused before it reached `call_tool` (an unknown tool, say)."""
        if self.audit is not None or self.metrics is not None:
            entry = self.registry.snapshot.entries.get(namespace or "")
            ns = namespace if entry is not None and namespace else "-"
            if self.metrics is not None:
                self.metrics.started(ns)  # _record takes it off again
            self._record(entry, ns, "tools/call", tool, err.code, 0.0, None, key)

    async def _observed(
        self, namespace: str | None, method: str, name: str, arguments: Any, work: Any, key: ApiKey | None = None
    ) -> Any:
        """Run `work`, then count it and write its audit line (never failing or delaying the call); its span
        when tracing is on."""
        if self.audit is None and self.metrics is None and not tracing.enabled():
            return await work
        entry = self.registry.snapshot.entries.get(namespace or "")
        ns = namespace if entry is not None and namespace else "-"
        started, status = time.perf_counter(), "error"
        if self.metrics is not None:
            self.metrics.started(ns)
        with tracing.call_span(method, name, ns, current_call().front_end) as span:
            try:
                result = await work
                status = "tool_error" if isinstance(result, dict) and result.get("isError") else "ok"
                return result
            except ToolDockError as err:
                status = err.code
                raise
            except asyncio.CancelledError:
                status = "cancelled"
                raise
            finally:
                tracing.finish(span, status)
                self._record(entry, ns, method, name, status, time.perf_counter() - started, arguments, key)

    def _record(
        self,
        entry: NamespaceEntry | None,
        ns: str,
        method: str,
        name: str,
        status: str,
        elapsed: float,
        args: Any,
        key: ApiKey | None,
    ) -> None:
        info = current_call()
        known = name if ns != "-" and status not in ("tool_not_found", "not_found") else "-"
        if self.metrics is not None:
            self.metrics.finished(ns, known[:200], info.front_end, status, elapsed)
        if self.audit is None:
            return
        shown = None
        if entry is not None and entry.source.config.audit_arguments and args is not None:
            secrets = self.registry.secrets
            shown = secrets.mask.scrub(args) if secrets is not None else args
        generation = self.registry.snapshot.generation
        rid = requestid.current.get()  # audit.call_line's values: the writer thread builds the line
        self.audit.record((time.time(), info, rid, key, ns, method, name, status, elapsed, generation, shown))

    async def _run(
        self, entry: NamespaceEntry, what: str, work: Callable[[Any], Awaitable[Any]], key: ApiKey | None = None
    ) -> Any:
        assert entry.worker is not None  # a namespace with tools has a worker
        timeout = entry.source.config.limits.timeout or self.settings.call_timeout
        held = None
        try:
            async with asyncio.timeout(timeout) as deadline:
                if key is not None and self.guard is not None:
                    held = self.guard.hold(key, _ending(deadline))
                try:
                    async with self._semaphore(entry):
                        with tracing.worker_span(what, entry.source.name, self.registry.snapshot.generation):
                            return await work(entry.worker)
                except WorkerRetired:
                    # Swapped between our lookup and the call: the snapshot now has the new worker.
                    fresh = self.namespace(entry.source.name)
                    if fresh.worker is entry.worker or fresh.worker is None:
                        raise
                    async with self._semaphore(fresh):
                        return await work(fresh.worker)
                finally:
                    if held is not None:
                        held.release()
        except TimeoutError:
            if held is not None and held.ended:
                raise InvalidApiKey(
                    f"{what} was stopped: API key {held.key.id} was revoked or expired while it ran",
                    {"key_id": held.key.id},
                ) from None
            raise ExecutionTimeout(
                f"{what} in namespace {entry.source.name!r} did not finish within {timeout:g}s",
                {"timeout_seconds": timeout},
            ) from None
        except ToolDockError as err:
            self._explain(err, entry)
            raise

    def _explain(self, err: ToolDockError, entry: NamespaceEntry) -> None:
        """Mask every secret value the gateway knows; name the secret (and the command that sets it) when a
        tool failed on a declared secret that is missing or still a placeholder."""
        secrets = self.registry.secrets
        if secrets is not None and secrets.mask.values:
            err.message = secrets.mask(err.message)
            err.args = (err.message,)
            err.details = secrets.mask.scrub(err.details)
        name = _missing_variable(err)
        if name is not None and entry.secrets.unset(name):
            ns = entry.source.name
            state = "is still a placeholder" if name in entry.secrets.placeholders else "is not set"
            err.message = (
                f"secret {name} {state} for namespace {ns!r}: a person with access to the secrets store runs "
                f"`tooldock secrets set {name} --namespace {ns}` (the value is typed there, never sent here), "
                f"then reloads the gateway. The tool said: {err.message}"
            )
            err.args = (err.message,)
            err.details = {**err.details, "secret": name, "secrets_status": entry.secrets.status}


def _ending(deadline: asyncio.Timeout) -> Callable[[], Awaitable[None]]:
    """What stops a call whose key is found invalid: its time limit, moved to now (the worker is told to stop
    as on a timeout; `_run` tells the two apart)."""

    async def end() -> None:
        deadline.reschedule(asyncio.get_running_loop().time())

    return end


def _missing_variable(err: ToolDockError) -> str | None:
    """The variable of a `KeyError: 'NAME'` (os.environ["NAME"]) the tool raised, if that is what it was."""
    if err.details.get("exception") != "KeyError":
        return None
    found = re.search(r"KeyError: '([A-Za-z_][A-Za-z0-9_]*)'", err.message)
    return found.group(1) if found else None
