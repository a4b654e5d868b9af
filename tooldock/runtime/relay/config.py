"""The relay socket's settings, from the environment (each documented by its SETTINGS entry, which
docs/reference/settings.md shows).

    TOOLDOCK_RELAY_SOCKET            path of the socket, `off` for none (default: $TOOLDOCK_STATE_DIR/relay/relay.sock)
    TOOLDOCK_RELAY_SOCKET_MODE       octal file mode of the socket (default 0660: owner and group)
    TOOLDOCK_RELAY_SOCKET_GROUP      group name or gid the socket is given (default: the gateway's own group)
    TOOLDOCK_RELAY_MAX_CONNECTIONS   connections at once (default 64); one more is told so and closed

The longest line is TOOLDOCK_MAX_BODY_BYTES, the gateway's limit on a request body.
"""

from __future__ import annotations

import grp
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tooldock.envvars import EnvVar, names
from tooldock.runtime.settings import Settings, SettingsError, env_number

# Read by `tooldock serve` (and TOOLDOCK_RELAY_SOCKET by `tooldock relay`); docs/reference/settings.md is generated
# from these.
SETTINGS_TITLE = "Relay socket"
SETTINGS_INTRO = (
    "Where and how `tooldock serve` listens for the [relay socket](../howto/relay-sandbox.md) that sandboxes "
    "reach ToolDock's tools through with an API key; an invalid value stops start-up with a message naming it."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_RELAY_SOCKET",
        "`$TOOLDOCK_STATE_DIR/relay/relay.sock`",
        "where `tooldock serve` listens for the [relay socket](../howto/relay-sandbox.md); `off`: no relay. Keep it "
        "in a directory of its own and mount that directory into sandboxes. Inside a sandbox, `tooldock relay` "
        "reads the same variable as its `--socket`",
    ),
    EnvVar(
        "TOOLDOCK_RELAY_SOCKET_MODE",
        "`660`",
        "the socket's file mode (octal; owner read/write is required): owner and group may connect, others may not",
    ),
    EnvVar(
        "TOOLDOCK_RELAY_SOCKET_GROUP",
        "the gateway's group",
        "a group name or gid the socket is given (the gateway's user must belong to it): give sandboxes that group "
        "(`docker run --group-add GID`)",
    ),
    EnvVar(
        "TOOLDOCK_RELAY_MAX_CONNECTIONS",
        "`64`",
        'relay connections at once; one more is answered -32000 "too many connections" and closed. Each '
        "connection buffers at most two lines of `TOOLDOCK_MAX_BODY_BYTES` (the longest line accepted)",
    ),
)
ENV_VARS = names(SETTINGS)
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes, with the terminating NUL


@dataclass(frozen=True)
class RelayConfig:
    path: Path | None  # None: no relay socket
    mode: int = 0o660
    gid: int | None = None
    max_connections: int = 64
    max_line: int = 4 * 1024 * 1024

    @classmethod
    def from_env(cls, settings: Settings, env: dict[str, str] | None = None) -> RelayConfig:
        env = dict(os.environ if env is None else env)
        raw = env.get("TOOLDOCK_RELAY_SOCKET", "")
        path: Path | None = None
        if raw.lower() != "off":
            path = Path(raw).expanduser().absolute() if raw else settings.state_dir / "relay" / "relay.sock"
            if len(os.fsencode(path)) > MAX_SOCKET_PATH and not raw:
                print(
                    f"tooldock: no relay socket: {path} is too long for a unix socket; set TOOLDOCK_RELAY_SOCKET",
                    file=sys.stderr,
                    flush=True,
                )
                path = None
            elif len(os.fsencode(path)) > MAX_SOCKET_PATH:
                raise SettingsError(
                    f"TOOLDOCK_RELAY_SOCKET: {path} is longer than {MAX_SOCKET_PATH} bytes, the limit of a unix "
                    "socket path; choose a shorter one (e.g. /run/tooldock-relay/relay.sock)"
                )
        return cls(
            path=path,
            mode=_mode(env.get("TOOLDOCK_RELAY_SOCKET_MODE", "")),
            gid=_gid(env.get("TOOLDOCK_RELAY_SOCKET_GROUP", "")),
            max_connections=int(env_number(env, "TOOLDOCK_RELAY_MAX_CONNECTIONS", 64, int)),
            max_line=settings.max_body_bytes,
        )


def _mode(raw: str) -> int:
    if not raw:
        return 0o660
    try:
        mode = int(raw, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777 or mode & 0o600 != 0o600:
        raise SettingsError(
            f"TOOLDOCK_RELAY_SOCKET_MODE={raw!r}: give an octal mode the gateway can use itself, e.g. 660 or 600"
        )
    return mode


def _gid(raw: str) -> int | None:
    if not raw:
        return None
    if raw.isdigit():
        return int(raw)
    try:
        return grp.getgrnam(raw).gr_gid
    except KeyError:
        raise SettingsError(f"TOOLDOCK_RELAY_SOCKET_GROUP={raw!r}: no such group; give a group name or a gid") from None
