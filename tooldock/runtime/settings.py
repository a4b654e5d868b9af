"""Gateway settings, from environment variables (seed 000, "Configuration"). Invalid values fail fast."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from tooldock.envvars import names
from tooldock.errors import OAuthConfigError
from tooldock.oauth import OAuthConfig
from tooldock.runtime.settings_table import SETTINGS, SETTINGS_INTRO, SETTINGS_TITLE
from tooldock.state.url import StateUrl, parse_url

__all__ = ["ENV_VARS", "SECRET_VARS", "SETTINGS", "SETTINGS_INTRO", "SETTINGS_TITLE", "Settings", "SettingsError"]

ENV_VARS = names(SETTINGS)
# The settings that are secrets: each may instead be read from the file `<NAME>_FILE` names (as Docker and
# compose mount secrets at /run/secrets/...), so the value is not in an environment `docker inspect` shows.
SECRET_VARS = (
    "TOOLDOCK_BEARER_TOKEN",
    "MANAGER_INTERNAL_TOKEN",
    "METRICS_TOKEN",
    "TOOLDOCK_STATE_KEY",
    "TOOLDOCK_STATE_URL",
)
MAX_SECRET_FILE = 64 * 1024


class SettingsError(ValueError):
    pass


def with_secret_files(env: dict[str, str]) -> dict[str, str]:
    """`env` with each `<NAME>_FILE` of SECRET_VARS read into `<NAME>` (the file's text, surrounding
    whitespace and the final newline taken off). The errors name the variable and the file, never a value."""
    for name in SECRET_VARS:
        path = env.get(f"{name}_FILE", "").strip()
        if not path:
            continue
        if env.get(name):
            raise SettingsError(
                f"{name} and {name}_FILE are both set: keep one (the file, to keep it out of the environment)"
            )
        env[name] = read_secret_file(f"{name}_FILE", path)
    return env


def read_secret_file(variable: str, path: str, limit: int = MAX_SECRET_FILE, holds: str = "the value") -> str:
    """The text of the secret file `variable` names (surrounding whitespace and the final newline taken off).
    The errors (SettingsError) name the variable and the file, and say it must hold only `holds`; never what
    it holds."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise SettingsError(f"{variable}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise SettingsError(f"{variable}: {path} is over {limit // 1024} KB; it must hold only {holds}")
    try:
        value = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SettingsError(f"{variable}: {path} is not UTF-8 text; it must hold only {holds}") from None
    if not value:
        raise SettingsError(f"{variable}: {path} is empty; it must hold {holds}")
    return value


def _log_dir(env: dict[str, str]) -> Path | None:
    raw = env.get("TOOLDOCK_LOG_DIR", "").strip()
    if raw.lower() == "off":
        return None
    if raw:
        return Path(raw).expanduser().absolute()
    state = env.get("TOOLDOCK_STATE_DIR")
    return (Path(state).expanduser().absolute() if state else default_state_dir()) / "logs"


def _metrics_token(env: dict[str, str]) -> str | None:
    token = env.get("METRICS_TOKEN") or None
    if token is not None and len(token) < 8:
        raise SettingsError("METRICS_TOKEN must be at least 8 characters long")
    return token


def _state_keys(env: dict[str, str]) -> tuple[str, ...]:
    """TOOLDOCK_STATE_KEY: one secret, or several separated by commas (the first seals; all open, for rotation)."""
    raw = env.get("TOOLDOCK_STATE_KEY", "").strip()
    if not raw and env.get("TOOLDOCK_STATE_URL", "").strip():
        # Replicas seal requestState and mint session ids with it: without one shared key each replica would
        # refuse what the others made (and a restarted gateway what it made itself).
        raise SettingsError(
            "TOOLDOCK_STATE_URL is set but TOOLDOCK_STATE_KEY is not: set TOOLDOCK_STATE_KEY (or "
            "TOOLDOCK_STATE_KEY_FILE) to the same secret on every gateway replica sharing the store; generate "
            'one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    if not raw:
        return (secrets.token_urlsafe(32),)  # this run only: state minted here is refused by other processes
    keys = tuple(k.strip() for k in raw.split(","))
    if len(set(keys)) != len(keys):
        raise SettingsError("TOOLDOCK_STATE_KEY lists the same key twice")
    if any(len(k.encode()) < 32 for k in keys):
        raise SettingsError(
            "TOOLDOCK_STATE_KEY: each key must be at least 32 bytes of secret randomness; "
            'generate one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    return keys


def env_number(env: dict[str, str], name: str, default: float, kind: type = float, zero: bool = False) -> float:
    """`name`'s number, or `default` when unset; a positive one (or, with `zero`, zero too)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a valid {kind.__name__}; e.g. {name}={default}") from None
    if not math.isfinite(value):  # float() takes "inf" and "nan": no timeout, size or count can be either
        raise SettingsError(f"{name} must be a finite number, got {raw!r}")
    if value < 0 or (value == 0 and not zero):
        raise SettingsError(f"{name} must be {'0 or more' if zero else 'greater than 0'}, got {raw!r}")
    return value


def _seconds_or_off(env: dict[str, str], name: str, default: float) -> float | None:
    if env.get(name, "").strip().lower() == "off":
        return None
    return env_number(env, name, default)


def env_bool(env: dict[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name}={raw!r}: use true or false")


def _cidrs(raw: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in raw.split(",") if part.strip())
    except ValueError as exc:
        raise SettingsError(f"INTERNAL_ALLOWED_CIDRS: {exc}; use e.g. 127.0.0.1/32,::1/128") from None


_ORIGIN_RE = re.compile(r"^[a-z][a-z0-9+.-]*://[^/\s?#*]+(:\*)?$")


def _origins(raw: str, name: str = "MCP_ALLOWED_ORIGINS", star: bool = False) -> tuple[str, ...]:
    """MCP_ALLOWED_ORIGINS: comma-separated browser origins (`scheme://host[:port]`), `:*` for any port.
    CORS_ORIGINS: the same, or `*` (`star`) for any origin."""
    origins = []
    for part in raw.split(","):
        origin = part.strip().rstrip("/").lower()
        if not origin:
            continue
        if not (_ORIGIN_RE.match(origin) or (star and origin == "*")):
            raise SettingsError(
                f"{name}: {part.strip()!r} is not an origin; use e.g. https://app.example.com,http://localhost:*"
                + (" (or * for any origin)" if star else "")
            )
        origins.append(origin)
    return tuple(origins)


def _choice(env: dict[str, str], name: str, choices: tuple[str, ...]) -> str:
    raw = env.get(name) or choices[0]
    if raw.lower() not in choices:
        raise SettingsError(f"{name}={raw!r}: use one of {', '.join(choices)}")
    return raw.lower()


# Swagger UI's two files the /docs pages load (the npm package swagger-ui-dist's), and the largest either may be.
SWAGGER_FILES = ("swagger-ui-bundle.js", "swagger-ui.css")
MAX_SWAGGER_FILE = 16 * 1024 * 1024


def _state_url(env: dict[str, str]) -> StateUrl | None:
    raw = env.get("TOOLDOCK_STATE_URL", "").strip()
    if not raw:
        return None
    try:
        return parse_url(raw)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _swagger_ui_dir(env: dict[str, str]) -> Path | None:
    """TOOLDOCK_SWAGGER_UI_DIR: a folder holding SWAGGER_FILES, which the gateway then serves itself."""
    raw = env.get("TOOLDOCK_SWAGGER_UI_DIR", "").strip()
    if not raw:
        return None
    folder = Path(raw).expanduser().absolute()
    how = "point it at the files of the npm package swagger-ui-dist (`npm pack swagger-ui-dist`, then untar)"
    for name in SWAGGER_FILES:
        try:
            size = (folder / name).stat().st_size
        except OSError as exc:
            raise SettingsError(f"TOOLDOCK_SWAGGER_UI_DIR: no {name} in {folder} ({exc.strerror}); {how}") from None
        if not 0 < size <= MAX_SWAGGER_FILE:
            raise SettingsError(f"TOOLDOCK_SWAGGER_UI_DIR: {folder / name} is empty or over 16 MB; {how}")
    return folder


def _oauth(env: dict[str, str]) -> OAuthConfig | None:
    try:
        return OAuthConfig.from_env(env)
    except OAuthConfigError as exc:
        raise SettingsError(str(exc)) from None


def default_state_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tooldock"


@dataclass(frozen=True)
class Settings:
    bearer_token: str
    token_generated: bool = False
    call_timeout: float = 30.0
    max_concurrency: int = 16
    state_dir: Path = field(default_factory=default_state_dir)
    manager_token: str | None = None
    internal_allowed_cidrs: tuple = ()
    max_body_bytes: int = 4 * 1024 * 1024
    worker_start_timeout: float = 120.0
    drain_timeout: float = 30.0
    shutdown_grace: float = 0.0  # seconds a SIGTERMed gateway serves on, draining, before it stops (http/drain.py)
    restart_backoff: float = 0.5
    stuck_after: float = 5.0  # seconds a cancelled call may run on before its worker is replaced (stuck.py)
    liveness_interval: float | None = 30.0  # seconds between pings of an idle worker (stuck.py); None: off
    fork_workers: bool = True  # process backend: fork workers from a warm interpreter per environment
    lean_mcp: bool = True  # MCP tools/call of plain tools, tools/list and ping answered without the SDK's machinery
    lean_rest: bool = True  # POST /tools/{name} answered before FastAPI's routing and layers
    inline_schema_refs: bool = False  # MCP tools/list: schemas' `$ref`s inlined (FastMCP's default), not as declared
    socket_dir: Path | None = None  # docker backend: where worker containers' sockets live on the host
    dns_rebinding_protection: bool = True
    enable_legacy_mcp: bool = True
    session_ttl: float = 24 * 3600.0  # seconds an MCP session may sit idle (MCP_SESSION_TTL_HOURS)
    max_sessions: int = 10_000  # open MCP sessions per namespace
    event_buffer: int = 100  # SSE events kept per stream for Last-Event-ID replay
    sse_retry_ms: int = 1000  # the SSE `retry:` field clients wait before reconnecting
    allowed_origins: tuple[str, ...] = ()  # empty: no Origin allowlist (loopback binds keep their own)
    task_ttl: float = 3600.0  # seconds an MCP task stays readable after it was created (its `ttlMs`)
    max_tasks: int = 1000  # MCP tasks held per namespace (finished ones make room first)
    cors_origins: tuple[str, ...] = ()  # browser origins CORS lets read answers; empty: no CORS headers
    log_format: str = "text"  # text | json (one JSON object per line on stderr)
    access_log: bool = False  # uvicorn's line per request
    log_dir: Path | None = None  # the audit log's directory (TOOLDOCK_LOG_DIR; default <state>/logs, "off": none)
    log_retention_days: int = 30
    metrics_token: str | None = None  # also admits GET /metrics (besides the bearer token)
    # MCP 2026-07-28 `requestState` keys (the first seals, all open; shared by replicas) and lifetime in seconds.
    state_keys: tuple[str, ...] = field(default_factory=lambda: (secrets.token_urlsafe(32),))
    state_ttl: float = 600.0
    swagger_ui_dir: Path | None = None  # Swagger UI's files, served by the gateway (None: from jsDelivr)
    watch: bool = False  # reload after edits under the tools directory (serve --watch, or the manager's)
    watch_debounce_ms: int = 1500  # quiet time that ends a burst of edits
    state_url: StateUrl | None = None  # the shared state store (None: this process's memory)
    oauth: OAuthConfig | None = None  # access tokens from an OpenID / OAuth issuer (TOOLDOCK_OAUTH_*; tooldock.oauth)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = with_secret_files(dict(os.environ if env is None else env))
        token = env.get("TOOLDOCK_BEARER_TOKEN") or env.get("BEARER_TOKEN") or ""
        generated = not token
        if generated:
            token = secrets.token_urlsafe(32)
        elif len(token) < 8:
            raise SettingsError("TOOLDOCK_BEARER_TOKEN must be at least 8 characters long")
        return cls(
            bearer_token=token,
            token_generated=generated,
            call_timeout=env_number(env, "TOOL_CALL_TIMEOUT_SECONDS", 30.0),
            max_concurrency=int(env_number(env, "NAMESPACE_MAX_CONCURRENCY", 16, int)),
            # Absolute: workers run in other directories, and a relative path would name another place there.
            state_dir=Path(env["TOOLDOCK_STATE_DIR"]).expanduser().absolute()
            if env.get("TOOLDOCK_STATE_DIR")
            else default_state_dir(),
            manager_token=env.get("MANAGER_INTERNAL_TOKEN") or None,
            internal_allowed_cidrs=_cidrs(env.get("INTERNAL_ALLOWED_CIDRS", "127.0.0.1/32,::1/128")),
            max_body_bytes=int(env_number(env, "TOOLDOCK_MAX_BODY_BYTES", 4 * 1024 * 1024, int)),
            worker_start_timeout=env_number(env, "TOOLDOCK_WORKER_START_TIMEOUT", 120.0),
            drain_timeout=env_number(env, "TOOLDOCK_DRAIN_TIMEOUT", 30.0),
            # Replicas (a shared store) stand behind a load balancer, which needs a moment to see /health go 503.
            shutdown_grace=env_number(env, "TOOLDOCK_SHUTDOWN_GRACE", 2.0 if _state_url(env) else 0.0, zero=True),
            restart_backoff=env_number(env, "TOOLDOCK_RESTART_BACKOFF", 0.5),
            stuck_after=env_number(env, "TOOLDOCK_STUCK_AFTER", 5.0),
            liveness_interval=_seconds_or_off(env, "TOOLDOCK_LIVENESS_INTERVAL", 30.0),
            fork_workers=env_bool(env, "TOOLDOCK_FORK_WORKERS", True),
            lean_mcp=env_bool(env, "TOOLDOCK_LEAN_MCP", True),
            lean_rest=env_bool(env, "TOOLDOCK_LEAN_REST", True),
            inline_schema_refs=env_bool(env, "TOOLDOCK_INLINE_SCHEMA_REFS", False),
            socket_dir=Path(env["TOOLDOCK_SOCKET_DIR"]).expanduser().absolute()
            if env.get("TOOLDOCK_SOCKET_DIR")
            else None,
            dns_rebinding_protection=env_bool(env, "TOOLDOCK_DNS_REBINDING_PROTECTION", True),
            enable_legacy_mcp=env_bool(env, "ENABLE_LEGACY_MCP", True),
            session_ttl=env_number(env, "MCP_SESSION_TTL_HOURS", 24.0) * 3600.0,
            max_sessions=int(env_number(env, "MCP_MAX_SESSIONS", 10_000, int)),
            event_buffer=int(env_number(env, "MCP_EVENT_BUFFER", 100, int)),
            sse_retry_ms=int(env_number(env, "MCP_SSE_RETRY_MS", 1000, int)),
            allowed_origins=_origins(env.get("MCP_ALLOWED_ORIGINS", "")),
            task_ttl=env_number(env, "MCP_TASK_TTL_SECONDS", 3600.0),
            max_tasks=int(env_number(env, "MCP_MAX_TASKS", 1000, int)),
            cors_origins=_origins(env.get("CORS_ORIGINS", ""), "CORS_ORIGINS", star=True),
            log_format=_choice(env, "TOOLDOCK_LOG_FORMAT", ("text", "json")),
            access_log=env_bool(env, "TOOLDOCK_ACCESS_LOG", False),
            log_dir=_log_dir(env),
            log_retention_days=int(env_number(env, "LOG_RETENTION_DAYS", 30, int)),
            metrics_token=_metrics_token(env),
            state_keys=_state_keys(env),
            state_ttl=env_number(env, "TOOLDOCK_STATE_TTL_SECONDS", 600.0),
            swagger_ui_dir=_swagger_ui_dir(env),
            watch=env_bool(env, "ENABLE_FS_WATCHER", False),
            watch_debounce_ms=int(env_number(env, "FS_WATCHER_DEBOUNCE_MS", 1500, int)),
            state_url=_state_url(env),
            oauth=_oauth(env),
        )

    @property
    def sockets(self) -> Path:
        return self.socket_dir or self.state_dir / "sockets"

    def __repr__(self) -> str:  # never print the tokens
        return f"Settings(state_dir={str(self.state_dir)!r}, call_timeout={self.call_timeout})"
