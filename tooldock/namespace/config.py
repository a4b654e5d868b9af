"""`tooldock.yaml`: read, check every key, and say exactly what is wrong."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tooldock.namespace.models import NESTED_TOO_DEEPLY, Limits, NamespaceConfig, Problem
from tooldock.namespace.names import ENV_NAME_RE

CONFIG_FILE = "tooldock.yaml"
_MEMORY_RE = re.compile(r"^[0-9]+[kmgKMG]?$")
_PYTHON_RE = re.compile(r"^3\.[0-9]{1,2}$")
KNOWN_KEYS = {
    "description",
    "version",
    "author",
    "secrets",
    "env",
    "network",
    "limits",
    "python",
    "idle_timeout",
    "audit",
    "tools",
    "tasks",
    "replicas",
}


class ConfigError(ValueError):
    pass


def _str(data: dict[str, Any], key: str) -> str:
    value = data.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)):
        raise ConfigError(f"'{key}' must be a string")
    return str(value)


MAX_NUMBER = 1e9  # past it a timer cannot be set (and no limit means anything)


def _finite_positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value <= MAX_NUMBER


def _positive(value: Any, key: str, kind: type) -> Any:
    if value is None:
        return None
    if not _finite_positive(value):  # .nan and .inf too: YAML reads them as floats
        raise ConfigError(f"'limits.{key}' must be a positive number (at most {MAX_NUMBER:.0e})")
    if kind is int and int(value) != value:
        raise ConfigError(f"'limits.{key}' must be a whole number")
    return kind(value)


def _limits(raw: Any) -> Limits:
    if raw is None:
        return Limits()
    if not isinstance(raw, dict):
        raise ConfigError("'limits' must be a mapping, e.g. {timeout: 30, concurrency: 8}")
    unknown = set(raw) - {"timeout", "concurrency", "memory", "cpus", "rate", "burst"}
    if unknown:
        raise ConfigError(f"unknown key(s) under 'limits': {', '.join(sorted(map(str, unknown)))}")
    found: list[str] = []

    def number(key: str, kind: type) -> Any:
        try:
            return _positive(raw.get(key), key, kind)
        except ConfigError as exc:
            found.append(str(exc))
            return None

    memory = raw.get("memory")
    if memory is not None and not _MEMORY_RE.match(str(memory)):
        found.append("'limits.memory' must look like '256m' or '1g'")
    limits = Limits(
        timeout=number("timeout", float),
        concurrency=number("concurrency", int),
        memory=str(memory) if memory is not None else None,
        cpus=number("cpus", float),
        rate=number("rate", float),
        burst=number("burst", int),
    )
    if found:
        raise ConfigError("; ".join(found))
    return limits


def _glob_lists(raw: Any, key: str, kinds: dict[str, str]) -> tuple[tuple[str, ...], ...]:
    """`key: {kind: [globs], ...}`: a list of tool-name globs for each kind (`kinds` maps each to an example)."""
    if raw is None:
        return tuple(() for _ in kinds)
    if not isinstance(raw, dict) or set(raw) - set(kinds):
        example = ", ".join(f"{kind}: {sample}" for kind, sample in kinds.items())
        raise ConfigError(f"'{key}' must be a mapping like {{{example}}}")
    lists = []
    for which, sample in kinds.items():
        globs = raw.get(which) or []
        if not isinstance(globs, list) or not all(isinstance(g, str) and g and len(g) <= 200 for g in globs):
            raise ConfigError(f"'{key}.{which}' must be a list of tool-name globs, e.g. {sample}")
        lists.append(tuple(globs))
    return tuple(lists)


def _globs(raw: Any) -> tuple[tuple[str, ...], ...]:
    """`tools: {allow: [globs], deny: [globs]}`: which of its tools a namespace exposes."""
    return _glob_lists(raw, "tools", {"allow": "['get_*']", "deny": "['delete_*']"})


def _tasks(raw: Any) -> tuple[tuple[str, ...], ...]:
    """`tasks: {optional: [globs], required: [globs]}`: which tools run as MCP tasks (a list: optional)."""
    raw = {"optional": raw} if isinstance(raw, list) else raw
    return _glob_lists(raw, "tasks", {"optional": "['report_*']", "required": "['rebuild_index']"})


def _secrets(raw: Any) -> tuple[str, ...]:
    secrets = raw or []
    if not isinstance(secrets, list) or not all(isinstance(s, str) and ENV_NAME_RE.match(s) for s in secrets):
        raise ConfigError("'secrets' must be a list of variable names like GITHUB_TOKEN")
    return tuple(secrets)


def _env(raw: Any) -> tuple[tuple[str, str], ...]:
    env = raw or {}
    if not isinstance(env, dict):
        raise ConfigError("'env' must be a mapping of NAME: value")
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_NAME_RE.match(key):
            raise ConfigError(f"'env' key {key!r} is not a valid environment variable name")
        if isinstance(value, (dict, list)) or value is None:
            raise ConfigError(f"'env.{key}' must be a string, number or boolean")
    return tuple(sorted((k, str(v)) for k, v in env.items()))


def _network(raw: Any) -> str:
    if raw not in ("none", "egress"):
        raise ConfigError("'network' must be 'none' or 'egress'")
    return str(raw)


def _python(raw: Any) -> str | None:
    if raw is not None and not _PYTHON_RE.match(str(raw)):
        raise ConfigError("'python' must be a version like '3.12'")
    return str(raw) if raw is not None else None


def _idle(raw: Any) -> float | None:
    if raw is not None and not _finite_positive(raw):
        raise ConfigError(f"'idle_timeout' must be a positive number of seconds (at most {MAX_NUMBER:.0e})")
    return float(raw) if raw is not None else None


def _audit(raw: Any) -> bool:
    audit = raw or {}
    if not isinstance(audit, dict) or set(audit) - {"arguments"} or not isinstance(audit.get("arguments", False), bool):
        raise ConfigError("'audit' must be a mapping like {arguments: true} (log call arguments, secrets masked)")
    return bool(audit.get("arguments", False))


MAX_REPLICAS = 100


def _replicas(raw: Any) -> int:
    """`replicas: N`: how many tasks run the namespace's worker on a cluster (`tooldock swarm`,
    `tooldock k8s render`); default 1."""
    if raw is None:
        return 1
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_REPLICAS:
        raise ConfigError(f"'replicas' must be a whole number from 1 to {MAX_REPLICAS}")
    return raw


def parse_config(data: Any) -> NamespaceConfig:
    """Every key checked; all that is wrong is said at once (`; ` between), so a person or an LLM fixing
    the file does not find its mistakes one reload at a time."""
    if data is None:
        return NamespaceConfig()
    if not isinstance(data, dict):
        raise ConfigError("the file must be a YAML mapping (key: value lines)")
    found: list[str] = []
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        found.append(
            f"unknown key(s): {', '.join(sorted(map(str, unknown)))} (known keys: {', '.join(sorted(KNOWN_KEYS))})"
        )

    def read(check: Callable[[Any], Any], key: str, default: Any, missing: Any = None) -> Any:
        try:
            return check(data.get(key, missing))
        except ConfigError as exc:
            found.append(str(exc))
            return default

    fields = {
        "description": read(lambda _: _str(data, "description"), "description", ""),
        "version": read(lambda _: _str(data, "version"), "version", ""),
        "author": read(lambda _: _str(data, "author"), "author", ""),
        "secrets": read(_secrets, "secrets", ()),
        "env": read(_env, "env", ()),
        "network": read(_network, "network", "none", missing="none"),
        "limits": read(_limits, "limits", Limits()),
        "python": read(_python, "python", None),
        "idle_timeout": read(_idle, "idle_timeout", None),
        "audit_arguments": read(_audit, "audit", False),
        "replicas": read(_replicas, "replicas", 1),
    }
    fields["tools_allow"], fields["tools_deny"] = read(_globs, "tools", ((), ()))
    fields["tasks_optional"], fields["tasks_required"] = read(_tasks, "tasks", ((), ()))
    if found:
        raise ConfigError("; ".join(found))
    return NamespaceConfig(**fields)


def config_to_dict(cfg: NamespaceConfig) -> dict[str, Any]:
    """The inverse of `parse_config`: what an image carries in its `io.tooldock.config` label."""
    limits = {k: v for k, v in vars(cfg.limits).items() if v is not None}
    data: dict[str, Any] = {
        "description": cfg.description,
        "version": cfg.version,
        "author": cfg.author,
        "secrets": list(cfg.secrets),
        "env": dict(cfg.env),
        "network": cfg.network,
    }
    if limits:
        data["limits"] = limits
    if cfg.python:
        data["python"] = cfg.python
    if cfg.idle_timeout:
        data["idle_timeout"] = cfg.idle_timeout
    if cfg.audit_arguments:
        data["audit"] = {"arguments": True}
    if cfg.tools_allow or cfg.tools_deny:
        data["tools"] = {"allow": list(cfg.tools_allow), "deny": list(cfg.tools_deny)}
    if cfg.tasks_optional or cfg.tasks_required:
        data["tasks"] = {"optional": list(cfg.tasks_optional), "required": list(cfg.tasks_required)}
    return data


def read_config(folder: Path) -> tuple[NamespaceConfig, Problem | None]:
    """The folder's config, or the defaults plus a problem if the file is unreadable or invalid."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        return NamespaceConfig(), None
    try:
        return parse_config(yaml.safe_load(path.read_text(encoding="utf-8"))), None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        return NamespaceConfig(), Problem(CONFIG_FILE, f"invalid YAML: {exc}", line, "invalid_config")
    except (ConfigError, UnicodeDecodeError) as exc:
        return NamespaceConfig(), Problem(CONFIG_FILE, str(exc), None, "invalid_config")
    except (RecursionError, MemoryError):  # PyYAML recurses once per level of nesting
        return NamespaceConfig(), Problem(CONFIG_FILE, f"invalid YAML: {NESTED_TOO_DEEPLY}", None, "invalid_config")
    except OSError as exc:
        return NamespaceConfig(), Problem(CONFIG_FILE, f"cannot read the file: {exc}", None, "invalid_config")
