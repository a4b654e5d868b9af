"""The registry: an immutable snapshot of namespaces, replaced in one assignment on every reload.

A reload asks the backend what namespaces exist (the process backend scans the tools directory, the docker
backend lists worker containers) and starts workers only for namespaces whose fingerprint changed. The new
workers must be ready (or have failed) before the snapshot is swapped; a changed namespace whose new
worker fails keeps its old worker serving. Replaced and removed workers are drained after the swap, so a
call never sees a half-swapped namespace.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, cast

from tooldock.errors import ReloadFailed, SecretsError
from tooldock.namespace.models import NamespaceSource, Problem, problem_text
from tooldock.runtime.backend import Announcing, Backend, Delegating, Replaceable, Worker
from tooldock.runtime.secretmap import NamespaceSecrets, SecretMap
from tooldock.runtime.settings import Settings
from tooldock.upstream.worker import UpstreamWorker

KEEPS_SERVING = "the previous version keeps serving"


@dataclass(frozen=True)
class NamespaceEntry:
    source: NamespaceSource
    worker: Worker | None  # None: no loadable tool files
    reload_error: str | None = None  # a newer version of the folder failed to start; this one still serves
    secrets: NamespaceSecrets = field(default_factory=NamespaceSecrets)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.worker.tools if self.worker is not None else []

    def listed(self, inline_refs: bool) -> list[dict[str, Any]]:
        """The tools as MCP lists them: with their schemas' `$ref`s inlined, as FastMCP's default serves them,
        when `inline_refs` (TOOLDOCK_INLINE_SCHEMA_REFS, for clients that do not follow `$ref`)."""
        flat = getattr(self.worker, "inlined_tools", None) if inline_refs else None
        return [flat.get(t["name"], t) for t in self.tools] if flat else self.tools

    def surface(self, kind: str) -> list[dict[str, Any]]:
        """`resources`, `resourceTemplates` or `prompts`, as the worker last described them."""
        return list(self.worker.surface.get(kind, ())) if self.worker is not None else []

    @property
    def state(self) -> str:
        if self.worker is None:  # no tool files; an upstream namespace whose tools.toml is invalid has failed
            return "failed" if self.source.is_upstream else "empty"
        return self.worker.state

    def status(self) -> dict[str, Any]:
        worker = self.worker.status() if self.worker is not None else {"state": self.state}
        problems = [p.to_dict() for p in self.source.problems]
        if self.worker is not None:
            problems += self.worker.failed_files
        return {
            "name": self.source.name,
            "description": self.source.config.description,
            "version": self.source.config.version,
            "tool_count": len(self.tools),
            "tools": [t["name"] for t in self.tools],
            "has_requirements": self.source.has_requirements,
            "problems": problems,
            **self.secrets.to_dict(),
            **worker,
            **({"reload_error": self.reload_error} if self.reload_error else {}),
        }


def _new_problems(old: NamespaceSource, new: NamespaceSource) -> str:
    """What is wrong with a namespace's files now that was not before ("" if nothing new)."""
    known = {(p.file, p.code) for p in old.problems}
    fresh = [p for p in new.problems if (p.file, p.code) not in known]
    if not fresh:
        return ""
    listed = "; ".join(problem_text(p.to_dict()) for p in fresh)
    return f"invalid files ({listed}); {KEEPS_SERVING}"


def _problems_of_new_versions(
    entries: dict[str, NamespaceEntry], fresh: dict[str, tuple[NamespaceSource, Worker | None]], failed: dict[str, str]
) -> dict[str, list[str]]:
    """What is wrong in the namespaces this reload started anew (a new folder, or a changed one that took
    over), so the reload's answer says it and not only `/namespaces`: one that serves nothing because of
    its problems (an invalid tools.toml or tooldock.yaml) goes into `failed`; the problems of one that serves
    (a file that failed to import, a file the scan skipped) are returned, "file:line: message" each."""
    found: dict[str, list[str]] = {}
    for name, (_, worker) in fresh.items():
        entry = entries.get(name)
        if entry is None or entry.worker is not worker or name in failed:
            continue  # the previous version kept serving: `failed` says why already
        listed = [problem_text(p) for p in entry.status()["problems"]]
        if listed and entry.state in ("failed", "empty"):
            failed[name] = "; ".join(listed)
        elif listed:
            found[name] = listed
    return found


def _listed(entry: NamespaceEntry | None) -> Any:
    """What MCP clients list for a namespace: a change in it is announced to open sessions."""
    if entry is None:
        return None
    return entry.tools, entry.worker.surface if entry.worker is not None else {}


@dataclass(frozen=True)
class Snapshot:
    entries: Mapping[str, NamespaceEntry] = field(default_factory=lambda: MappingProxyType({}))
    problems: tuple[Problem, ...] = ()
    generation: int = 0
    # when this generation began (a reload, a swap): not copied by `replace`, so every new generation gets its own
    at: float = field(default_factory=time.time, init=False, compare=False)


class Registry:
    def __init__(self, backend: Backend, settings: Settings, secrets: SecretMap | None = None) -> None:
        self.backend, self.settings, self.secrets = backend, settings, secrets
        self.snapshot = Snapshot()
        self._lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()
        # Called with the names of namespaces whose tool list changed (or that went away) after a swap, or
        # when an upstream namespace's servers changed what they offer.
        self.listeners: list[Callable[[list[str]], Awaitable[None]]] = []
        # Called with (namespace, resource URI) when an upstream server says a subscribed resource changed.
        self.resource_listeners: list[Callable[[str, str], Awaitable[None]]] = []
        self.announcers: list[Callable[[bool], Awaitable[None]]] = []  # who tells other replicas of a reload
        self.reload_timings: list[Callable[[float], None]] = []  # called with each reload's duration (s)

    async def reload(self, retry_failed: bool = True, announce: bool = True) -> dict[str, Any]:
        """Rescan and apply; returns what changed (the `reload_core` result of seed 000). A namespace that failed
        (or crash-looped) is started again, unless `retry_failed` is False and its files and secrets are as they
        were (a watcher's reload after an edit elsewhere): it is then listed under `not_retried`. `announce`:
        tell the other replicas sharing the state store to reload too (reloads.share); not for a reload that
        came from one of them, nor the one at start. A `Delegating` backend's owner reloads first then."""
        started = time.perf_counter()
        try:
            owner = (
                await self.backend.reload_owner(retry_failed)
                if announce and isinstance(self.backend, Delegating)
                else {}
            )
            result = await self._reload(retry_failed)
            for key in ("failed", "problems"):  # what the owner of the workers found (its reload, just before)
                result[key] = {**(owner.get(key) or {}), **result[key]}
            if owner.get("deps_synced"):
                result["deps_synced"] = sorted(set(result["deps_synced"]) | set(owner["deps_synced"]))
        finally:
            for timed in self.reload_timings:
                timed(time.perf_counter() - started)
        if announce:
            for tell in self.announcers:
                await tell(retry_failed)
        return result

    def calls_in_flight(self) -> int:
        """Calls the serving workers are running now (what a stopping gateway waits for: http/drain.py)."""
        return sum(
            int(entry.worker.status().get("inflight") or 0)
            for entry in self.snapshot.entries.values()
            if entry.worker is not None
        )

    async def _reload(self, retry_failed: bool) -> dict[str, Any]:
        async with self._lock:
            try:
                scan = await self.backend.discover()
            except OSError as exc:  # e.g. the tools directory itself is gone: keep serving what we have
                raise ReloadFailed(f"reload failed, still serving the previous namespaces: {exc}") from exc
            if self.secrets is not None:
                try:
                    await asyncio.to_thread(self.secrets.refresh)
                except SecretsError as exc:
                    raise ReloadFailed(f"reload failed, still serving the previous namespaces: {exc}") from exc
            old = self.snapshot.entries
            keep: dict[str, NamespaceEntry] = {}
            fresh: dict[str, tuple[NamespaceSource, Worker | None]] = {}
            rejected: dict[str, str] = {}
            given: dict[str, NamespaceSecrets] = {}
            not_retried: list[str] = []
            for source in scan.namespaces:
                previous = old.get(source.name)
                secrets = given[source.name] = self._secrets_for(source)
                unchanged = (
                    previous is not None
                    and previous.source.fingerprint == source.fingerprint
                    and previous.secrets.env.token == secrets.env.token  # only changed values restart a worker
                )
                if unchanged and previous is not None and previous.state not in ("crash_loop", "failed"):
                    keep[source.name] = replace(previous, secrets=secrets, reload_error=None)
                elif unchanged and previous is not None and not retry_failed:
                    keep[source.name] = previous  # it would fail again as it did: an edit to it, or a reload, retries
                    not_retried.append(source.name)
                elif previous is not None and previous.state == "ready" and _new_problems(previous.source, source):
                    # An edit broke a file (syntax, hints, docstrings): the version before it keeps serving.
                    rejected[source.name] = _new_problems(previous.source, source)
                    keep[source.name] = replace(previous, reload_error=rejected[source.name])
                else:
                    fresh[source.name] = (source, self._create(source, secrets))
            started = [w for _, w in fresh.values() if w is not None]
            await asyncio.gather(*(w.start(self.settings.worker_start_timeout) for w in started))

            entries = dict(keep)
            retire: list[Worker] = []
            failed: dict[str, str] = dict(rejected)
            for name, (source, worker) in fresh.items():
                previous = old.get(name)
                if worker is not None and worker.state != "ready":
                    failed[name] = worker.status().get("last_error") or worker.state
                    if previous is not None and previous.state == "ready":
                        failed[name] = f"{failed[name]}; {KEEPS_SERVING}"
                        # The old version keeps serving; the new one is reported and discarded.
                        entries[name] = NamespaceEntry(previous.source, previous.worker, failed[name], previous.secrets)
                        retire.append(worker)
                        continue
                entries[name] = NamespaceEntry(source, worker, secrets=given[name])
                if previous is not None and previous.worker is not None:
                    retire.append(previous.worker)
            retire += [e.worker for n, e in old.items() if n not in entries and e.worker is not None]
            problems = _problems_of_new_versions(entries, fresh, failed)

            self.snapshot = Snapshot(MappingProxyType(entries), scan.problems, self.snapshot.generation + 1)
            for worker in retire:
                self._retire(worker)
            changed = sorted(n for n in set(old) | set(entries) if _listed(old.get(n)) != _listed(entries.get(n)))
            for listener in self.listeners:
                self._spawn(listener(changed))
            for problem in scan.problems:
                print(f"tooldock: skipped {problem.file}: {problem.message}", file=sys.stderr, flush=True)
            return {
                **({} if retry_failed else {"not_retried": not_retried}),
                "reloaded": True,
                "namespaces": sorted(entries),
                "workers_restarted": sorted(n for n, (_, w) in fresh.items() if w is not None and n not in failed),
                "deps_synced": sorted(n for n, (_, w) in fresh.items() if w is not None and w.deps_synced),
                "removed": sorted(n for n in old if n not in entries),
                "failed": failed,
                "problems": problems,
                "generation": self.snapshot.generation,
            }

    def _create(self, source: NamespaceSource, secrets: NamespaceSecrets) -> Worker | None:
        """A worker for a namespace folder: the backend's for tool files, the gateway's own for upstreams."""
        if source.upstream is not None:
            worker = UpstreamWorker(source, secrets.env.values, self.settings.state_dir / "upstream-cache")
            name = source.name
            worker.on_change = lambda: self._announce(name, worker)
            worker.on_resource_updated = lambda uri: self._resource_updated(name, uri)
            return worker
        created = self.backend.create(source, secrets.env) if source.files else None
        if isinstance(created, Replaceable):
            created.on_stuck = self._on_stuck
        if isinstance(created, Announcing):
            made, name = created, source.name
            made.on_change = lambda: self._announce(name, made)
        return created

    def _on_stuck(self, worker: Replaceable, reason: str) -> None:
        self._spawn(self._replace_stuck(worker, reason))

    async def _replace_stuck(self, worker: Replaceable, reason: str) -> None:
        """Swap a fresh worker in for a stuck one (backends/stuck.py), as a reload swaps a changed namespace:
        new calls go to the fresh one at once; the stuck one finishes what it can and is stopped."""
        async with self._lock:
            found = [(n, e) for n, e in self.snapshot.entries.items() if e.worker is cast(Worker, worker)]
            if not found:
                return  # a reload replaced or removed it meanwhile
            name, entry = found[0]
            fresh = self._create(entry.source, entry.secrets)
            assert fresh is not None  # the stuck one ran this namespace's files
            await fresh.start(self.settings.worker_start_timeout)
            if fresh.state != "ready":
                why = fresh.status().get("last_error") or fresh.state
                print(
                    f"tooldock: [{name}] a fresh worker did not start ({why}): restarting the stuck one",
                    file=sys.stderr,
                    flush=True,
                )
                self._retire(fresh)
                self._spawn(worker.restart_in_place(reason))
                return
            if isinstance(fresh, Replaceable):
                fresh.restarts, fresh.last_error = worker.restarts + 1, f"replaced: {reason}"
            entries = {**self.snapshot.entries, name: replace(entry, worker=fresh)}
            self.snapshot = replace(
                self.snapshot, entries=MappingProxyType(entries), generation=self.snapshot.generation + 1
            )
        self._retire(cast(Worker, worker))  # a Worker too: it came from the snapshot

    def _announce(self, name: str, worker: Worker) -> None:
        """An upstream namespace's lists changed by themselves: tell the front ends (if it is still served)."""
        entry = self.snapshot.entries.get(name)
        if entry is not None and entry.worker is worker:
            for listener in self.listeners:
                self._spawn(listener([name]))

    def _resource_updated(self, name: str, uri: str) -> None:
        for listener in self.resource_listeners:
            self._spawn(listener(name, uri))

    def _secrets_for(self, source: NamespaceSource) -> NamespaceSecrets:
        return self.secrets.for_namespace(source) if self.secrets is not None else NamespaceSecrets()

    def _retire(self, worker: Worker) -> None:
        self._spawn(worker.stop(self.settings.drain_timeout))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def close(self) -> None:
        async with self._lock:
            workers = [e.worker for e in self.snapshot.entries.values() if e.worker is not None]
            self.snapshot = Snapshot(generation=self.snapshot.generation + 1)
            await asyncio.gather(*(w.release() for w in workers))
            if self._retiring:
                await asyncio.gather(*self._retiring, return_exceptions=True)
