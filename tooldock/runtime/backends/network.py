"""The `network` backend: workers on other hosts, reached over mutual TLS at addresses given to the gateway.

`TOOLDOCK_WORKERS` names each namespace's workers, `NAMESPACE=tls://HOST:PORT` (worker/tls.py; or
`NAMESPACE=unix:PATH`, a worker's socket on this host, which the benchmark compares with TLS); the gateway
presents the certificate in `TOOLDOCK_TLS_DIR` and checks the worker's against the same trust bundle. When
HOST is a name, the namespace's workers are all the addresses it resolves to, resolved again every
`TOOLDOCK_DISCOVERY_INTERVAL` seconds (discovery.py), and calls are spread over them (pool.py); an IP literal
is one worker. The gateway starts, stops and restarts nothing: a worker here is a connection, made again
(with backoff) when it ends, as an attached replica's is (`attached.py`); its tools come from the worker's
handshake. Stopping or releasing one lets the gateway's calls on it finish and lets go, never `shutdown`:
other gateways may use the same worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tooldock.errors import ToolDockError
from tooldock.namespace.models import NamespaceConfig, NamespaceSource, ScanResult, ToolFile
from tooldock.runtime.backends.connected import ConnectedWorker
from tooldock.runtime.backends.discovery import Lookup, Resolver, SystemResolver, Target
from tooldock.runtime.backends.pool import WorkerPool, log
from tooldock.runtime.settings import Settings, SettingsError
from tooldock.runtime.workerclient import SecretEnv, SecretsDelivered, WorkerConnection
from tooldock.worker.tls import DISCOVERY_INTERVAL, UNIX, TLSError, TLSFiles, parse_workers

RETRY_MAX = 2.0  # seconds between attempts to reach a worker that is not answering, at most
SETTLE_AFTER = 3  # failed attempts after which start() returns (the worker is not ready; calls get a 503)


class NetworkWorker(ConnectedWorker):
    """One gateway's connection to one worker on the network (a member of its namespace's pool)."""

    kind = "network worker"

    def __init__(self, backend: NetworkBackend, source: NamespaceSource, address: str, secrets: SecretEnv) -> None:
        super().__init__(source.name, backend.settings, Path(os.devnull), None, secrets)  # no socket file
        self.backend, self.address = backend, address
        # `unix:PATH`: a worker run by hand on this host, on its socket (the same client, another transport)
        self._target: Path | str = Path(address.removeprefix(UNIX)) if address.startswith(UNIX) else address
        # Worked out once per handshake: for the tools list they were made from (compared by identity)
        self._names: tuple[object, frozenset[str]] = (None, frozenset())
        self._digest: tuple[object, str] = (None, "")

    async def _supervise(self) -> None:
        """Connect, serve until the connection ends, connect again (the worker's orchestrator restarts it)."""
        delay, failures, said = 0.05, 0, None
        while not self._stopping:
            try:
                conn = await WorkerConnection.open(self.namespace, self._target, None, self.backend.tls)
            except (OSError, SecretsDelivered, ToolDockError, TLSError) as exc:
                failures += 1
                self.last_error = f"cannot reach {self.address}: {_why(exc)}"
                if self.last_error != said:  # once per distinct reason, not once per attempt
                    self._log_line(f"[{self.namespace}] {self.last_error}; retrying")
                    said = self.last_error
                if failures >= SETTLE_AFTER:  # start() returns; the state stays starting (or restarting)
                    self._settled.set()
                await asyncio.sleep(delay)
                delay = min(RETRY_MAX, delay * 2)
                continue
            delay, failures, said, self.last_error = 0.05, 0, None, None
            await self._serve(conn)
            if not self._stopping:
                self.state = "restarting"
                self.restarts += 1
                self._log_line(f"[{self.namespace}] lost the connection to {self.address}; reconnecting")

    async def stuck(self, reason: str) -> None:
        """Not ours to restart: the worker's own orchestrator replaces it (its health check pings it)."""
        self._log_line(f"[{self.namespace}] the worker at {self.address} is stuck: {reason}")

    async def check(self, timeout: float) -> None:
        """Ping the worker when no call of ours runs on it; no answer within `timeout`: drop the connection
        (new calls go to the namespace's other workers; this one is connected again, with backoff)."""
        conn = self._conn
        if conn is None or conn.closed.is_set() or self._inflight:
            return
        try:
            async with asyncio.timeout(timeout):
                await conn.request("ping")
        except TimeoutError:
            if conn is self._conn and not self._inflight:
                self.last_error = f"no answer to a ping within {timeout:g}s: connection dropped"
                self._log_line(f"[{self.namespace}] the worker at {self.address} gave {self.last_error}")
                conn.abort()  # calls on it fail, `closed` is set, _supervise reconnects
        except ToolDockError:
            pass  # the connection ended meanwhile: _supervise connects again

    @property
    def inflight(self) -> int:
        return self._inflight

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed.is_set()

    def has_tool(self, name: str) -> bool:
        if self._names[0] is not self.tools:
            self._names = (self.tools, frozenset(str(t.get("name")) for t in self.tools))
        return name in self._names[1]

    def listing(self) -> str:
        """A short digest of what the last handshake listed: workers of the same image list the same."""
        if self._digest[0] is not self.tools:
            text = json.dumps([self.tools, self.surface], sort_keys=True, default=str)
            self._digest = (self.tools, hashlib.sha256(text.encode()).hexdigest()[:12])
        return self._digest[1]

    def status(self) -> dict[str, Any]:
        return {**super().status(), "address": self.address}


class NetworkBackend:
    name = "network"

    def __init__(
        self,
        settings: Settings,
        workers: dict[str, str],
        tls: TLSFiles | None,
        interval: float = 2.0,
        resolver: Resolver | None = None,
    ) -> None:
        self.settings, self.workers, self.tls = settings, dict(workers), tls
        self.interval, self.resolver = interval, resolver or SystemResolver()

    @classmethod
    def from_env(cls, settings: Settings, env: dict[str, str] | None = None) -> NetworkBackend:
        """`TOOLDOCK_WORKERS`, `TOOLDOCK_TLS_DIR` and `TOOLDOCK_DISCOVERY_INTERVAL`; raises SettingsError naming
        what is wrong."""
        env = dict(os.environ if env is None else env)
        try:
            workers = parse_workers(env.get("TOOLDOCK_WORKERS", ""))
            if not workers:
                raise TLSError("TOOLDOCK_WORKERS is empty: name each namespace's worker, NAMESPACE=tls://HOST:PORT")
            folder = env.get("TOOLDOCK_TLS_DIR", "")
            if not folder and any(not a.startswith(UNIX) for a in workers.values()):
                raise TLSError("--backend network needs TOOLDOCK_TLS_DIR: this gateway's cert.pem, key.pem, trust.pem")
            interval = _interval(env.get(DISCOVERY_INTERVAL, ""))
            return cls(settings, workers, TLSFiles(Path(folder)) if folder else None, interval)
        except TLSError as exc:
            raise SettingsError(str(exc)) from None

    async def discover(self) -> ScanResult:
        """One source per listed namespace; its fingerprint is its address or name (another one: other workers)."""
        sources = tuple(
            NamespaceSource(
                name=namespace,
                path=Path("/app"),
                files=(ToolFile(address, ()),),
                problems=(),
                config=NamespaceConfig(),
                requirements="",
                fingerprint=address,
            )
            for namespace, address in sorted(self.workers.items())
        )
        return ScanResult(sources, ())

    def create(self, source: NamespaceSource, secrets: SecretEnv) -> WorkerPool:
        """The namespace's pool: one worker for an address, all those its name resolves to for a name."""
        lookup = Lookup(source.name, Target.parse(self.workers[source.name]), self.resolver, log)
        return WorkerPool(
            source.name, self.settings, lookup, lambda a: NetworkWorker(self, source, a, secrets), self.interval
        )

    async def close(self) -> None:
        pass


def _interval(text: str) -> float:
    if not text.strip():
        return 2.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.1 <= value <= 3600:
        raise TLSError(f"{DISCOVERY_INTERVAL}={text!r}: give the seconds between DNS lookups, from 0.1 to 3600")
    return value


def _why(exc: BaseException) -> str:
    if isinstance(exc, ToolDockError):
        return exc.message
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
