"""Manager settings, from environment variables (seed 000, `ManagerSettings`), validated at start-up."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from tooldock.envvars import EnvVar, names
from tooldock.runtime.settings import Settings, SettingsError, env_number

# Every environment variable the manager reads besides the gateway's own, with its default and meaning
# (docs/reference/settings.md is generated from these).
SETTINGS_TITLE = "Manager"
SETTINGS_INTRO = (
    "The [manager](../tutorials/manager.md) reads the gateway's variables (the bearer token, "
    "`MANAGER_INTERNAL_TOKEN`, the state directory, the secrets store) and these."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_GATEWAY_URL",
        "`http://127.0.0.1:8000`",
        "the gateway the manager signals and calls (`--gateway-url` wins)",
    ),
    EnvVar(
        "CORE_URL",
        "—",
        "seed 000's name for the same, used when `TOOLDOCK_GATEWAY_URL` is unset",
    ),
    EnvVar(
        "TOOLDOCK_BASE_IMAGE",
        "the `tooldock base` image",
        "docker backend: the base `reload_core` builds worker images on (an OCI layout directory, a registry "
        "reference or an image in the Docker engine, as `tooldock build --base`); the manager's image sets it to "
        "the base it was built on, which `tooldock compose up` loads next to it",
    ),
    EnvVar(
        "TOOLDOCK_SEED_DIR",
        "unset",
        "a seed the manager copies in at start (the manager's image sets it, see [Docker Compose]"
        "(../howto/compose.md)): build-cache entries, the example namespaces on the first start, an empty secrets "
        "store; then one `reload_core` deploys every namespace",
    ),
    EnvVar(
        "ANALYZE_REPO_TIMEOUT_SECONDS",
        "`120`",
        "[`analyze_repo`](../howto/analyze-repo.md): seconds for one git command (`ls-remote`, `clone`)",
    ),
    EnvVar(
        "ANALYZE_REPO_MAX_MB",
        "`200`",
        "`analyze_repo`: a clone's size (working tree and `.git`); past it the clone stops and is removed",
    ),
    EnvVar(
        "READ_REPO_FILE_MAX_KB",
        "`512`",
        "`read_repo_file`: the largest file it returns",
    ),
    EnvVar(
        "ANALYZE_REPO_WORKSPACE_MAX_MB",
        "`2048`",
        "`analyze_repo`: all clones together; past it, after a new clone, the clones of the least recently analyzed "
        "repositories are removed (analyzing one again clones it again)",
    ),
)
ENV_VARS = names(SETTINGS)

DEFAULT_GATEWAY_URL = "http://127.0.0.1:8000"


def gateway_url(raw: str) -> str:
    url = raw.strip().rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.path or parsed.query:
        raise SettingsError(f"gateway URL {raw!r} is not an http(s) base URL; use e.g. {DEFAULT_GATEWAY_URL} (no path)")
    return url


@dataclass(frozen=True)
class ManagerSettings:
    tools_dir: Path
    runtime: Settings  # the bearer token (the manager's own and the gateway's), MANAGER_INTERNAL_TOKEN, state
    gateway_url: str = DEFAULT_GATEWAY_URL
    backend: str = "process"  # how the gateway runs workers: process (venvs) or docker (images to rebuild)
    watch: bool = False
    debounce_ms: int = 1500
    # analyze_repo's limits: seconds for one `git clone` (and `git ls-remote`), a clone's size, read_repo_file
    clone_timeout: float = 120.0
    max_repo_bytes: int = 200 * 1024 * 1024
    max_read_bytes: int = 512 * 1024
    max_workspace_bytes: int = 2048 * 1024 * 1024  # every clone together; the least recently analyzed go first
    base_image: str | None = None  # docker: what reload_core builds on (TOOLDOCK_BASE_IMAGE; None: tooldock base)
    seed_dir: Path | None = None  # TOOLDOCK_SEED_DIR: the manager image's seed, copied in at start (seed.py)

    @classmethod
    def from_env(
        cls, tools_dir: Path, url: str | None = None, backend: str = "process", env: dict[str, str] | None = None
    ) -> ManagerSettings:
        env = dict(os.environ if env is None else env)
        raw = url or env.get("TOOLDOCK_GATEWAY_URL") or env.get("CORE_URL") or DEFAULT_GATEWAY_URL
        runtime = Settings.from_env(env)
        return cls(
            tools_dir=tools_dir.resolve(),
            runtime=runtime,
            gateway_url=gateway_url(raw),
            backend=backend,
            watch=runtime.watch,
            debounce_ms=runtime.watch_debounce_ms,
            clone_timeout=env_number(env, "ANALYZE_REPO_TIMEOUT_SECONDS", 120.0),
            max_repo_bytes=int(env_number(env, "ANALYZE_REPO_MAX_MB", 200, int)) * 1024 * 1024,
            max_read_bytes=int(env_number(env, "READ_REPO_FILE_MAX_KB", 512, int)) * 1024,
            max_workspace_bytes=int(env_number(env, "ANALYZE_REPO_WORKSPACE_MAX_MB", 2048, int)) * 1024 * 1024,
            base_image=env.get("TOOLDOCK_BASE_IMAGE") or None,
            seed_dir=Path(env["TOOLDOCK_SEED_DIR"]) if env.get("TOOLDOCK_SEED_DIR") else None,
        )

    def public(self) -> dict[str, object]:
        """`server_config`: what an LLM may see. Never a token, a key or a secret."""
        parsed = urlparse(self.gateway_url)
        return {
            "tools_dir": str(self.tools_dir),
            "data_dir": str(self.runtime.state_dir),
            "gateway_url": self.gateway_url,
            "core_port": parsed.port or (443 if parsed.scheme == "https" else 80),
            "backend": self.backend,
            "fs_watcher": self.watch,
            "fs_watcher_debounce_ms": self.debounce_ms,
            "manager_token_set": self.runtime.manager_token is not None,
            "mcp_session_ttl_hours": self.runtime.session_ttl / 3600,
            "enable_legacy_mcp": self.runtime.enable_legacy_mcp,
            "tool_call_timeout_seconds": self.runtime.call_timeout,
            "analyze_repo_timeout_seconds": self.clone_timeout,
            "analyze_repo_max_mb": self.max_repo_bytes // (1024 * 1024),
            "read_repo_file_max_kb": self.max_read_bytes // 1024,
            "analyze_repo_workspace_max_mb": self.max_workspace_bytes // (1024 * 1024),
        }
