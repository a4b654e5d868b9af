"""TOOLDOCK_STATE_URL: checked before anything connects, and shown only without its password."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True)
class StateUrl:
    url: str  # as given: may hold a password, so never logged or shown
    shown: str  # the same with any password replaced by ***

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"StateUrl({self.shown!r})"


def parse_url(raw: str) -> StateUrl:
    """`raw` checked: a Redis URL (`redis://[:password@]host[:port][/db]`, `rediss://...` for TLS,
    `unix:///path/to/redis.sock[?db=N]`). ValueError says what is wrong and shows no password."""
    raw = raw.strip()
    try:
        parts = urlsplit(raw)
        port = parts.port
        host = parts.hostname
    except ValueError:
        raise ValueError("TOOLDOCK_STATE_URL is not a URL; use e.g. redis://127.0.0.1:6379/0") from None
    shown = _without_password(raw)
    if parts.scheme not in SCHEMES:
        raise ValueError(
            f"TOOLDOCK_STATE_URL={shown!r}: the scheme must be redis://, rediss:// or unix:// "
            "(e.g. redis://127.0.0.1:6379/0); leave it unset to keep the state in this process"
        )
    if parts.scheme == "unix":
        if not parts.path.startswith("/"):
            raise ValueError(f"TOOLDOCK_STATE_URL={shown!r}: give the socket's absolute path, unix:///run/redis.sock")
    elif not host:
        raise ValueError(f"TOOLDOCK_STATE_URL={shown!r}: no host; use e.g. redis://127.0.0.1:6379/0")
    elif port == 0:
        raise ValueError(f"TOOLDOCK_STATE_URL={shown!r}: port 0 is not a port")
    db = parts.path.strip("/") if parts.scheme != "unix" else ""
    if db and not db.isdigit():
        raise ValueError(f"TOOLDOCK_STATE_URL={shown!r}: the path is a database number, e.g. /0")
    return StateUrl(raw, shown)


def _without_password(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.password is None:
        return raw
    user = parts.username or ""
    netloc = f"{user}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
