"""The worker protocol over the network: mutual TLS between gateways and workers, on both ends.

A peer's TLS directory holds three files, as `tooldock cluster cert` writes them (`tooldock/cluster/`):

    cert.pem    its own certificate, issued by the cluster CA (usable as client and as server)
    key.pem     its private key (mode 0600)
    trust.pem   the CA certificates it trusts (one, or two while the CA is being rotated)

Both ends require TLS 1.3 and a certificate chaining to one of the trusted CAs; names are not checked (every
certificate of the cluster CA is a member of the cluster). `TLSFiles` builds the `ssl.SSLContext` from the
directory and builds it again when one of the files changes, so a rotated trust bundle or a renewed
certificate is used from the next connection on, with no restart. Addresses are `tls://HOST:PORT`. Only the
standard library here: the worker imports it, in every image.
"""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
from pathlib import Path

from tooldock.envvars import EnvVar, names

CERT, KEY, TRUST = "cert.pem", "key.pem", "trust.pem"
SCHEME = "tls://"
UNIX = "unix:"  # a worker on this host's unix socket, as a worker list may name it too
HANDSHAKE_TIMEOUT = 10.0  # seconds a peer has to complete the TLS handshake before it is dropped
DISCOVERY_INTERVAL = "TOOLDOCK_DISCOVERY_INTERVAL"
_NAME = re.compile(
    r"(?=.{1,253}\.?$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?"
)

SETTINGS_TITLE = "Workers over the network (mutual TLS)"
SETTINGS_INTRO = (
    "A worker can listen on TCP for gateways on other hosts, and a gateway can reach such workers "
    "(`tooldock serve --backend network`); both ends authenticate with certificates of the cluster CA "
    "(see [The cluster CA](../howto/cluster-ca.md)). Read by `python -m tooldock.worker` and `tooldock serve`."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_WORKER_LISTEN",
        "unset",
        "the worker's `--listen HOST:PORT`: also serve the worker protocol on TCP, over mutual TLS (needs "
        "`TOOLDOCK_TLS_DIR`). Unset: the unix socket only",
    ),
    EnvVar(
        "TOOLDOCK_TLS_DIR",
        "unset",
        "the directory with this peer's `cert.pem`, `key.pem` and `trust.pem` (as `tooldock cluster cert` writes "
        "them): the worker's `--tls-dir`, and the gateway's for `--backend network`",
    ),
    EnvVar(
        "TOOLDOCK_WORKERS",
        "unset",
        "`--backend network`: each namespace's workers, `NAMESPACE=tls://HOST:PORT` separated by commas or "
        "spaces. An IP address is one worker; a DNS name stands for every address it resolves to (Swarm's "
        "`tasks.SERVICE`, a Kubernetes headless Service), looked up again every `TOOLDOCK_DISCOVERY_INTERVAL` "
        "seconds, and calls are spread over them (see [Discovery by DNS](../howto/cluster-ca.md#discovery-by-dns)). "
        "`NAMESPACE=unix:PATH` for a worker's socket on this host",
    ),
    EnvVar(
        DISCOVERY_INTERVAL,
        "`2`",
        "`--backend network`: seconds between two DNS lookups of the names in `TOOLDOCK_WORKERS` (0.1 to 3600); "
        "new addresses become workers, a worker whose address is gone is drained",
    ),
)
ENV_VARS = names(SETTINGS)


class TLSError(ValueError):
    """A TLS directory or an address that cannot be used: the message says which and why."""


def parse_host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6) as (host, port); raises TLSError."""
    host, sep, port = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise TLSError(f"{text!r} is not HOST:PORT")
    if not _NAME.fullmatch(host):
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            raise TLSError(f"{text!r}: {host!r} is neither an IP address nor a DNS name") from None
    return host, int(port)


def parse_address(text: str) -> tuple[str, int]:
    """A worker's network address, `tls://HOST:PORT`, as (host, port); raises TLSError."""
    if not text.startswith(SCHEME):
        raise TLSError(f"{text!r}: a network worker's address is tls://HOST:PORT")
    return parse_host_port(text.removeprefix(SCHEME))


def is_network(address: object) -> bool:
    return isinstance(address, str) and address.startswith(SCHEME)


def parse_workers(text: str) -> dict[str, str]:
    """`TOOLDOCK_WORKERS`: `NS=tls://HOST:PORT` (or `NS=unix:PATH`, a worker's socket on this host) entries
    separated by commas or whitespace, by namespace. HOST is an IP address (one worker) or a DNS name (the
    workers are the addresses it resolves to: runtime/backends/discovery.py)."""
    found: dict[str, str] = {}
    for entry in text.replace(",", " ").split():
        namespace, sep, address = entry.partition("=")
        if not sep or not namespace:
            raise TLSError(f"TOOLDOCK_WORKERS: {entry!r} is not NAMESPACE=tls://HOST:PORT")
        if namespace in found:
            raise TLSError(f"TOOLDOCK_WORKERS names namespace {namespace!r} twice")
        if not (address.startswith(UNIX) and len(address) > len(UNIX)):
            parse_address(address)
        found[namespace] = address
    return found


class TLSFiles:
    """One peer's TLS directory, as server (`server()`) or client (`client()`) contexts, built again when a
    file changed since the last one was built (looked at on each call: three `stat`s)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seen: dict[bool, tuple[tuple[int, int], ...]] = {}
        self._contexts: dict[bool, ssl.SSLContext] = {}
        self.check()

    def check(self) -> None:
        """Raise TLSError now when a file is missing or unusable (rather than at the first connection)."""
        self.context(server=True)

    def _stamp(self) -> tuple[tuple[int, int], ...]:
        try:
            return tuple((s.st_ino, s.st_mtime_ns) for s in (os.stat(self.folder / n) for n in (CERT, KEY, TRUST)))
        except OSError as exc:
            raise TLSError(f"TLS directory {self.folder}: {exc.strerror}: {exc.filename}") from None

    def context(self, server: bool) -> ssl.SSLContext:
        stamp = self._stamp()
        if self._seen.get(server) != stamp or server not in self._contexts:
            self._contexts[server] = build_context(self.folder, server)
            self._seen[server] = stamp
        return self._contexts[server]

    def server(self) -> ssl.SSLContext:
        return self.context(server=True)

    def client(self) -> ssl.SSLContext:
        return self.context(server=False)


def build_context(folder: Path, server: bool) -> ssl.SSLContext:
    """TLS 1.3 only, a certificate required of the other end and verified against `trust.pem`; our own
    certificate and key presented. Names are not checked: the cluster CA's certificates are the cluster."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    try:
        context.load_cert_chain(folder / CERT, folder / KEY)
        context.load_verify_locations(cafile=folder / TRUST)
    except FileNotFoundError as exc:
        raise TLSError(f"TLS directory {folder}: no {Path(str(exc.filename)).name}") from None
    except (ssl.SSLError, OSError) as exc:  # never the key's content: only which file and the library's reason
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__
        raise TLSError(f"TLS directory {folder}: cannot use its certificate, key or trust bundle ({reason})") from None
    return context


def refusal_reason(exc: BaseException) -> str:
    """Why a TLS handshake failed, in a few words for a log line (no certificate or key material)."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or type(exc).__name__
        said = reason.lower().replace("_", " ")
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "UNKNOWN_PROTOCOL"):
            return f"not TLS ({said})"
        if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return f"no client certificate ({said})"
        return said
    if isinstance(exc, TimeoutError):
        return f"no TLS handshake within {HANDSHAKE_TIMEOUT:g}s"
    return str(exc) or type(exc).__name__
