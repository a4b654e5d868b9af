"""What every backend provides: turn a scanned namespace into a supervised worker the gateway can call.

`backends.process` runs workers as local processes, `backends.docker` as containers. The registry and the
front ends only ever see these protocols.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

from tooldock.namespace.models import NamespaceSource, ScanResult
from tooldock.runtime.workerclient import SecretEnv

# "degraded": an upstream namespace with some of its servers down (the others serve).
WorkerState = Literal["starting", "ready", "sleeping", "restarting", "crash_loop", "failed", "stopped", "degraded"]


class Worker(Protocol):
    namespace: str
    failed_files: list[dict[str, Any]]  # files the worker could not import
    deps_synced: bool  # whether starting it installed dependencies

    @property
    def state(self) -> WorkerState: ...

    @property
    def tools(self) -> list[dict[str, Any]]:
        """MCP tool descriptors, from the worker's handshake."""

    @property
    def surface(self) -> dict[str, list[dict[str, Any]]]:
        """MCP resources, resourceTemplates and prompts."""

    async def start(self, timeout: float) -> None:
        """Begin supervising; return once the worker is ready or has failed (never raises for that)."""

    async def call(self, tool: str, arguments: dict[str, Any], relay: Any = None) -> dict[str, Any]:
        """Run one tool; raises a `tooldock.errors` error on failure."""

    async def request(self, op: str, **fields: Any) -> Any:
        """Any other worker-protocol request (resources.read, prompts.get, completion.complete)."""

    async def stop(self, drain_timeout: float) -> None:
        """Let in-flight calls finish (bounded), then stop the worker for good."""

    async def release(self) -> None:
        """The gateway is shutting down: stop what only lives with the gateway, leave the rest running."""

    def status(self) -> dict[str, Any]:
        """State, restarts, last error: what `/namespaces` and `/health` report."""


class Backend(Protocol):
    name: str

    async def discover(self) -> ScanResult:
        """The namespaces that exist now; a source's fingerprint changes whenever its worker must change."""

    def create(self, source: NamespaceSource, secrets: SecretEnv) -> Worker:
        """A worker for the namespace that will run with these secret values (and no others)."""

    async def close(self) -> None: ...


@runtime_checkable
class Replaceable(Protocol):
    """A worker that tells when it is stuck (a call runs on after its caller gave up: backends/stuck.py).
    When `replaceable`, it calls `on_stuck` and the registry swaps in a fresh worker of the same namespace;
    else, or when no fresh one starts, it is restarted in place."""

    replaceable: bool
    on_stuck: Callable[[Any, str], None] | None
    restarts: int
    last_error: str | None

    async def restart_in_place(self, reason: str) -> None: ...


@runtime_checkable
class Announcing(Protocol):
    """A worker whose lists change by themselves (an upstream namespace's servers; a network namespace whose
    workers, found by DNS, now run another image): it calls `on_change`, and the registry tells the front ends."""

    on_change: Callable[[], None] | None


@runtime_checkable
class Watching(Protocol):
    """A backend that can tell when its namespaces change by themselves (Docker events)."""

    def watch(self, on_change: Callable[[], None]) -> None: ...


@runtime_checkable
class Delegating(Protocol):
    """A backend whose workers another process runs (a replica of `serve --replicas N` on the process
    backend: backends/attached.py). A reload that starts here asks that process to reload first; its answer
    (what failed there) is this reload's too. A reload the backend itself calls for (`Watching`, the other
    process changed its workers) must not ask it again."""

    async def reload_owner(self, retry_failed: bool) -> dict[str, Any]:
        """Raises ReloadFailed when the owner cannot reload."""


@runtime_checkable
class SessionViews(Protocol):
    """A worker whose lists depend on who asks: an upstream namespace, where each MCP session activates its
    own tools (`toolman_activate`). `session` None is a caller without one (REST, the relay socket)."""

    def tools_for(self, session: Any) -> list[dict[str, Any]]: ...

    def surface_view(self, session: Any) -> dict[str, list[dict[str, Any]]]: ...

    def tool_for(self, name: str, session: Any) -> dict[str, Any]:
        """The descriptor of a tool this caller may call; raises ToolNotFound or ToolInactive."""
