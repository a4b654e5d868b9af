"""One namespace served by several workers on the network: the addresses its name resolves to (discovery.py).

To the registry a pool is one worker (the `Worker` protocol): ready while at least one of its workers is.
Each member is one connection (network.py's `NetworkWorker`), made again when it ends. Each call goes to a
ready member with the fewest calls in flight (ties in turn), among those whose handshake lists the tool
when some do. A member whose connection is lost gets no new calls (they go to the others) until it is back;
calls in flight on it when it went fail (`WorkerCrashed`: a call that may have run is never sent twice).

Every `interval` seconds the name is resolved again: new addresses become members; a member whose address
is gone is drained (no new calls, those in flight finish, bounded by the drain timeout) and let go. A
failed lookup keeps the members; a name that resolves to nothing leaves none, and calls get a 503 naming
the name. The tools listed are those of the lead, the first member to be ready (the next ready one when it
is not); members whose handshake lists other tools or resources (another image) are logged once and shown
in `/namespaces` under `tools_mismatch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tooldock.errors import NamespaceUnavailable, WorkerRetired
from tooldock.runtime.backend import WorkerState
from tooldock.runtime.backends.calls import READY_WAIT_MAX
from tooldock.runtime.backends.discovery import Lookup
from tooldock.runtime.settings import Settings

POLL = 0.05  # seconds between looks for a ready member while a call waits for one
PING_TIMEOUT = 5.0  # seconds an idle member has to answer a ping before its connection is dropped


class Member(Protocol):
    """What the pool needs of one worker connection (network.py's NetworkWorker)."""

    address: str
    pid: int | str | None
    tools: list[dict[str, Any]]
    inlined_tools: dict[str, dict[str, Any]]
    tool_versions: Any
    surface: dict[str, list[dict[str, Any]]]
    failed_files: list[dict[str, Any]]
    plain_tools: frozenset[str]
    asking_tools: frozenset[str] | None

    @property
    def state(self) -> WorkerState: ...
    @property
    def connected(self) -> bool: ...
    @property
    def inflight(self) -> int: ...
    def has_tool(self, name: str) -> bool: ...
    def listing(self) -> str: ...
    async def check(self, timeout: float) -> None: ...
    async def start(self, timeout: float) -> None: ...
    async def stop(self, drain_timeout: float) -> None: ...
    async def release(self) -> None: ...
    async def call(self, tool: str, arguments: dict[str, Any], relay: Any = None) -> dict[str, Any]: ...
    async def request(self, op: str, **fields: Any) -> Any: ...
    def status(self) -> dict[str, Any]: ...


class WorkerPool:
    deps_synced = False

    def __init__(
        self, namespace: str, settings: Settings, lookup: Lookup, connect: Callable[[str], Member], interval: float
    ) -> None:
        self.namespace, self.settings, self.lookup, self.interval = namespace, settings, lookup, interval
        self._connect = connect
        self._members: dict[str, Member] = {}
        self._draining: dict[str, Member] = {}
        self._lead: Member | None = None
        self._turn = 0
        self._ever_ready = False
        self._stopping = False
        self._mismatch: tuple[str, ...] = ()
        self._listed: str | None = None  # the lead's listing last announced (backend.Announcing)
        self.on_change: Callable[[], None] | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._watch: asyncio.Task[None] | None = None
        self._checking: set[str] = set()
        self.ping_timeout = PING_TIMEOUT

    # -- what the registry and the front ends read -----------------------------------------------------

    @property
    def state(self) -> WorkerState:
        if self._stopping:
            return "stopped"
        if self._ready():
            self._ever_ready = True
            return "ready"
        if self.lookup.known == frozenset():
            return "failed"  # the name resolves to nothing: calls get a 503 naming it
        return "restarting" if self._ever_ready else "starting"

    @property
    def last_error(self) -> str | None:
        if self.lookup.error is not None:
            return self.lookup.error
        if self._ready():
            return None
        errors = [f"{m.address}: {m.status().get('last_error') or m.state}" for m in self._members.values()]
        return "; ".join(errors) or None

    def _source(self) -> Member | None:
        """The lead: the member whose handshake says what the namespace lists."""
        lead = self._lead
        if lead is None or lead.state != "ready" or self._members.get(lead.address) is not lead:
            ready = next((m for m in self._members.values() if m.state == "ready"), None)
            if ready is not None:
                self._lead = lead = ready
        return lead  # the last lead's lists are kept while no member is ready

    def _of_lead(self, name: str, default: Any) -> Any:
        lead = self._source()
        return getattr(lead, name) if lead is not None else default

    # What the namespace lists and how its tools are called: the lead's handshake's
    tools = property(lambda self: self._of_lead("tools", []))
    inlined_tools = property(lambda self: self._of_lead("inlined_tools", {}))
    tool_versions = property(lambda self: self._of_lead("tool_versions", None))
    surface = property(lambda self: self._of_lead("surface", {}))
    plain_tools = property(lambda self: self._of_lead("plain_tools", frozenset()))
    asking_tools = property(lambda self: self._of_lead("asking_tools", None))
    # (settable for the Worker protocol; nothing sets it on a pool)
    failed_files = property(lambda self: self._of_lead("failed_files", []), lambda self, value: None)

    def _ready(self) -> list[Member]:
        return [m for m in self._members.values() if m.state == "ready" and m.connected]

    def mismatched(self) -> tuple[str, ...]:
        """Ready members whose handshake lists other tools or resources than the lead's."""
        lead = self._source()
        if lead is None:
            return ()
        listing = lead.listing()
        return tuple(sorted(m.address for m in self._ready() if m.listing() != listing))

    def status(self) -> dict[str, Any]:
        lead = self._source()
        workers = [{**m.status(), "tools_digest": m.listing()} for m in self._members.values()]
        workers += [{**m.status(), "state": "draining"} for m in self._draining.values()]
        status: dict[str, Any] = {
            "state": self.state,
            "pid": lead.pid if lead is not None and self.state == "ready" else None,
            "restarts": sum(int(w.get("restarts") or 0) for w in workers),
            "last_error": self.last_error,
            "inflight": sum(int(w.get("inflight") or 0) for w in workers),
            "address": self.lookup.target.given,
            "workers": sorted(workers, key=lambda w: str(w.get("address"))),
        }
        if self.lookup.target.is_name:
            status["discovery"] = {"name": self.lookup.target.host, "interval": self.interval}
        if odd := self.mismatched():
            status["tools_mismatch"] = {"listed_from": lead.address if lead else None, "workers": list(odd)}
        return status

    # -- calls ------------------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], relay: Any = None) -> dict[str, Any]:
        member = await self._pick(tool)
        return await member.call(tool, arguments, relay)

    async def request(self, op: str, **fields: Any) -> Any:
        member = await self._pick(None)
        return await member.request(op, **fields)

    def _choose(self, tool: str | None) -> Member | None:
        ready = self._ready()
        if tool is not None:
            ready = [m for m in ready if m.has_tool(tool)] or ready
        if not ready:
            return None
        fewest = min(m.inflight for m in ready)
        tied = [m for m in ready if m.inflight == fewest]
        self._turn += 1
        return tied[self._turn % len(tied)]

    async def _pick(self, tool: str | None) -> Member:
        """A ready member; waits a few seconds for one (a worker reconnecting), then a 503."""
        deadline = time.monotonic() + min(self.settings.call_timeout, READY_WAIT_MAX)
        while True:
            if self._stopping:
                raise WorkerRetired(f"namespace {self.namespace!r}: these workers are being replaced")
            chosen = self._choose(tool)
            if chosen is not None:
                return chosen
            if self.lookup.known == frozenset():
                raise NamespaceUnavailable(
                    f"namespace {self.namespace!r} is unavailable: {self.lookup.error}",
                    {"state": "failed", "name": self.lookup.target.host},
                )
            if time.monotonic() > deadline:
                raise NamespaceUnavailable(
                    f"namespace {self.namespace!r}: none of its workers is ready ({self.last_error}); retry shortly",
                    {"state": self.state},
                )
            await asyncio.sleep(POLL)

    # -- membership -------------------------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        """Resolve, connect to every address; return once one member is ready or every one has settled."""
        starts = [asyncio.ensure_future(s) for s in await self._refresh()]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while starts and not all(s.done() for s in starts) and not self._ready():
                    await asyncio.wait(starts, timeout=POLL)
        for start in starts:
            self._keep(start)
        self._watch = asyncio.create_task(self._watching(), name=f"discovery-{self.namespace}")

    async def _refresh(self) -> list[Awaitable[None]]:
        """Match the members to the name's addresses now; the starts of the new members, to await."""
        found = await self.lookup.addresses()
        if found is None or self._stopping:
            return []
        starts: list[Awaitable[None]] = []
        for address in sorted(found - self._members.keys()):
            member = self._members[address] = self._connect(address)
            starts.append(member.start(self.settings.worker_start_timeout))
        for address in sorted(self._members.keys() - found):
            member = self._draining[address] = self._members.pop(address)
            self._keep(asyncio.ensure_future(self._let_go(member)))
        return starts

    async def _let_go(self, member: Member) -> None:
        try:
            await member.stop(self.settings.drain_timeout)  # new calls go elsewhere; those in flight finish
        finally:
            if self._draining.get(member.address) is member:
                del self._draining[member.address]

    async def _watching(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.interval)
            try:
                for start in await self._refresh():
                    self._keep(asyncio.ensure_future(start))
                self._compare()
                for member in self._ready():
                    if member.address not in self._checking:
                        self._keep(asyncio.ensure_future(self._check(member)))
            except Exception as exc:  # discovery must go on whatever one round met
                log(f"[{self.namespace}] discovery: {type(exc).__name__}: {exc}")

    async def _check(self, member: Member) -> None:
        """A ping on an idle connection: one that does not answer (a host gone without a reset) is dropped,
        so calls go to the others while it is connected again."""
        self._checking.add(member.address)
        try:
            await member.check(self.ping_timeout)
        finally:
            self._checking.discard(member.address)

    def _compare(self) -> None:
        lead = self._source()
        listed = lead.listing() if lead is not None and lead.state == "ready" else self._listed
        if listed != self._listed:  # another lead (a rolling update's end) lists other tools: tell the sessions
            if self._listed is not None and self.on_change is not None:
                self.on_change()
            self._listed = listed
        odd = self.mismatched()
        if odd != self._mismatch:
            lead = self._source()
            if odd and lead is not None:
                log(
                    f"[{self.namespace}] worker(s) {', '.join(odd)} serve other tools than {lead.address} (another "
                    f"image?): the namespace lists {lead.address}'s; a call goes to a worker that has its tool"
                )
            elif not odd:
                log(f"[{self.namespace}] its workers serve the same tools again")
            self._mismatch = odd

    def _keep(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _end(self, how: Callable[[Member], Awaitable[None]]) -> None:
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
        members = [*self._members.values(), *self._draining.values()]
        self._members.clear()
        await asyncio.gather(*(how(m) for m in members), return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()

    async def stop(self, drain_timeout: float) -> None:
        """Let the calls in flight finish (bounded), then let go of every worker: they run on."""
        await self._end(lambda m: m.stop(drain_timeout))

    async def release(self) -> None:
        await self._end(lambda m: m.release())


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
