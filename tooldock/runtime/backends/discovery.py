"""Discovery by DNS: a namespace's workers are the addresses a name resolves to, looked up again and again.

`TOOLDOCK_WORKERS` gives a namespace `tls://NAME:PORT`. When NAME is an IP literal (or the address is a
`unix:PATH`), that is one worker, as given. Otherwise every address NAME resolves to is a worker of the
namespace: Docker Swarm's `tasks.<service>` on an overlay network, a Kubernetes headless Service's
`<service>.<namespace>.svc.cluster.local`. The pool (pool.py) asks `Lookup.addresses()` every
`TOOLDOCK_DISCOVERY_INTERVAL` seconds and adds or drains workers to match.

Two outcomes are told apart: the name resolves to nothing (no such name, or no address behind it: the
service has no running task), which empties the namespace, and the lookup failing (the DNS server does not
answer, a timeout), which keeps the addresses known last. Each is logged once, when it starts, and again
when it ends; never once per attempt.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tooldock.worker.tls import SCHEME, UNIX, parse_address

RESOLVE_TIMEOUT = 10.0  # seconds a lookup may take before it counts as failed (the last set is kept)
# getaddrinfo's answers for "nothing behind this name" (NXDOMAIN, or a name without addresses)
_NOTHING = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[str]:
        """The IP addresses `host` has now; [] when it has none (no such name). Raises OSError when it
        cannot be looked up now (the caller keeps what it knew)."""


class SystemResolver:
    """The host's resolver (`/etc/hosts`, then DNS, as `nsswitch.conf` says), through `loop.getaddrinfo`."""

    async def resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        try:
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno in _NOTHING:
                return []
            raise
        return sorted({str(info[4][0]) for info in found})


@dataclass(frozen=True)
class Target:
    """A namespace's entry in `TOOLDOCK_WORKERS`: one address as given, or a name to resolve."""

    given: str  # as written: tls://tasks.weather:7700, tls://10.0.0.7:7000, unix:/run/w.sock
    host: str = ""  # the name to resolve; "" when `given` is the one worker's address
    port: int = 0

    @classmethod
    def parse(cls, given: str) -> Target:
        if given.startswith(UNIX):
            return cls(given)
        host, port = parse_address(given)
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return cls(given, host, port)  # a name: its workers are the addresses it resolves to
        return cls(given)

    @property
    def is_name(self) -> bool:
        return bool(self.host)

    def address(self, ip: str) -> str:
        """The worker address of one of the name's addresses: tls://IP:PORT (tls://[IPv6]:PORT)."""
        shown = f"[{ip}]" if ":" in ip else ip
        return f"{SCHEME}{shown}:{self.port}"


class Lookup:
    """One namespace's name, resolved on demand; says in the log when its answer changes kind."""

    def __init__(self, namespace: str, target: Target, resolver: Resolver, log: Callable[[str], None]) -> None:
        self.namespace, self.target, self.resolver, self._log = namespace, target, resolver, log
        self.error: str | None = None  # why the last lookup gave no usable answer (None: it did)
        self.known: frozenset[str] | None = None  # the addresses of the last answer; None before the first

    async def addresses(self) -> frozenset[str] | None:
        """The workers' addresses now; None when the lookup failed (keep the ones known last)."""
        if not self.target.is_name:
            self.known = frozenset({self.target.given})
            return self.known
        host = self.target.host
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT):
                found = await self.resolver.resolve(host, self.target.port)
        except (OSError, TimeoutError) as exc:
            kept = f"keeping its last {len(self.known)} address(es)" if self.known else "no address known yet"
            self._say(f"cannot resolve {host} ({_why(exc)}); {kept}; trying again")
            return None
        fresh = frozenset(self.target.address(ip) for ip in found)
        if not fresh:
            self._say(f"{host} resolves to no address: no worker of this namespace is running (or the name is wrong)")
        else:
            if self.error is not None:
                self._log(f"[{self.namespace}] {host} resolves again: {len(fresh)} address(es)")
            self.error = None
        if fresh and fresh != self.known:
            before = self.known or frozenset()
            added, gone = sorted(fresh - before), sorted(before - fresh)
            said = "; ".join(p for p in (_listed("new", added), _listed("gone", gone)) if p)
            self._log(f"[{self.namespace}] {host}: {len(fresh)} worker(s) ({said})")
        self.known = fresh
        return fresh

    def _say(self, error: str) -> None:
        if error != self.error:  # once per distinct reason
            self._log(f"[{self.namespace}] {error}")
        self.error = error


def _listed(what: str, addresses: list[str]) -> str:
    return f"{what}: {', '.join(addresses)}" if addresses else ""


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {RESOLVE_TIMEOUT:g}s"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
