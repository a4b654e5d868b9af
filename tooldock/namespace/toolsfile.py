"""`tools.toml`: a namespace that fronts upstream MCP servers (seed 001's format, with ToolDock's extensions).

    active_toolsets = ["time_*", "everything_echo"]    # globs over "<prefix>_<name>": active at start
    restart = true                                      # restart a crashed upstream (false: Toolman v1)
    startup_timeout = 30                                # seconds for each server to connect and list

    [[servers]]
    namespace = "time"                                  # the prefix; "" keeps upstream names as they are
    command = "uvx mcp-server-time"                     # stdio: one shell string
    env = { API_KEY = "${secret:TIME_KEY}" }            # values may name secrets from the secrets store
    cwd = "data"                                        # relative to the namespace folder

    [[servers]]
    namespace = "docs"
    url = "http://127.0.0.1:8080/mcp"                   # streamable HTTP, or legacy SSE (transport = "sse")
    headers = { Authorization = "Bearer ${secret:DOCS_TOKEN}" }

    [[servers]]
    namespace = "fs"
    registry = "io.github.example/filesystem"          # an MCP Registry entry, resolved at start
    version = "1.2.0"                                   # its version (default: the latest)

Parsing is pure: every mistake becomes a `Problem` naming the key and what to write instead. Secret
references are only allowed where a value never shows up in a process list or a log line: `env` and
`headers` values.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit

from tooldock.namespace.models import NESTED_TOO_DEEPLY, Problem

TOOLS_FILE = "tools.toml"
PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
SECRET_REF_RE = re.compile(r"\$\{secret:([^}]*)\}")
SECRET_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_NAME_RE = SECRET_NAME_RE
HEADER_NAME_RE = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
REGISTRY_NAME_RE = re.compile(r"[A-Za-z0-9._-]+/[A-Za-z0-9._/-]+")
MAX_SERVERS = 64
DEFAULT_STARTUP_TIMEOUT = 30.0
TOP_KEYS = ("active_toolsets", "servers", "restart", "startup_timeout")
SERVER_KEYS = ("namespace", "command", "url", "transport", "headers", "env", "cwd", "registry", "version", "oauth")
# `oauth = { token_url | issuer, client_id, client_secret = "${secret:NAME}", scope, resource }`: the gateway's own
# client-credentials token for this url server (upstream/clientcreds.py), never the caller's.
OAUTH_KEYS = ("issuer", "token_url", "client_id", "client_secret", "scope", "resource")

Transport = Literal["stdio", "streamable-http", "sse"]


class ToolsFileError(ValueError):
    pass


@dataclass(frozen=True)
class UpstreamServer:
    """One `[[servers]]` table. Exactly one of `command`, `url` and `registry` is set."""

    namespace: str  # the prefix; names become "<namespace>_<name>" ("" = unprefixed)
    command: str = ""
    url: str = ""
    transport: Transport = "stdio"
    headers: tuple[tuple[str, str], ...] = ()  # values may hold ${secret:NAME}
    env: tuple[tuple[str, str], ...] = ()  # values may hold ${secret:NAME}
    cwd: str = ""  # relative to the namespace folder ("" = the folder itself)
    registry: str = ""  # an MCP Registry server name
    version: str = ""  # its version ("" = the latest)
    oauth: tuple[tuple[str, str], ...] = ()  # OAUTH_KEYS; client_id and client_secret may hold ${secret:NAME}

    @property
    def label(self) -> str:
        """How messages name this server."""
        what = self.command or self.url or f"registry {self.registry}{'@' + self.version if self.version else ''}"
        return f"{self.namespace or '(no prefix)'} ({what})"

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    def secret_names(self) -> tuple[str, ...]:
        values = [v for _, v in self.env] + [v for _, v in self.headers] + [v for _, v in self.oauth]
        return tuple(dict.fromkeys(m for v in values for m in SECRET_REF_RE.findall(v)))


@dataclass(frozen=True)
class UpstreamConfig:
    servers: tuple[UpstreamServer, ...]
    active_toolsets: tuple[str, ...] = ()
    restart: bool = True
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT

    def secret_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for s in self.servers for n in s.secret_names()))


def expand_secrets(value: str, secrets: dict[str, str]) -> str:
    """`${secret:NAME}` replaced by its value; a missing value stays visible as the reference (never empty)."""
    return SECRET_REF_RE.sub(lambda m: secrets.get(m.group(1), m.group(0)), value)


def _strings(raw: Any, where: str, check: re.Pattern[str], what: str, secrets: bool) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict):
        raise ToolsFileError(f'{where} must be a table of {what} = "value", e.g. {{ NAME = "value" }}')
    pairs = []
    for key, value in raw.items():
        if not check.fullmatch(key):
            raise ToolsFileError(f"{where}: {key!r} is not a valid {what}")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ToolsFileError(f"{where}.{key} must be a string")
        text = str(value)
        if "\0" in text or "\n" in text or "\r" in text:
            raise ToolsFileError(f"{where}.{key} must be one line of text")
        for name in SECRET_REF_RE.findall(text):
            if not secrets or not SECRET_NAME_RE.fullmatch(name):
                raise ToolsFileError(f"{where}.{key}: ${{secret:{name}}} must name a secret like GITHUB_TOKEN")
        pairs.append((key, text))
    return tuple(pairs)


def _oauth(raw: Any, where: str, kind: str) -> tuple[tuple[str, str], ...]:
    if kind != "url":
        raise ToolsFileError(f"{where} only applies to a url server (its own OAuth client credentials)")
    pairs = _strings(raw, where, re.compile("|".join(OAUTH_KEYS)), f"key (one of {', '.join(OAUTH_KEYS)})", True)
    given = dict(pairs)
    if ("issuer" in given) == ("token_url" in given) or "client_id" not in given:
        raise ToolsFileError(f"{where} needs client_id, client_secret and one of issuer or token_url")
    if not re.fullmatch(r"\$\{secret:[A-Za-z_][A-Za-z0-9_]*\}", given.get("client_secret", "")):
        raise ToolsFileError(
            f'{where}.client_secret must be a secret reference such as "${{secret:DOCS_CLIENT_SECRET}}" (set it '
            "with `tooldock secrets set`), never the secret itself"
        )
    for key in ("issuer", "token_url", "resource"):
        url = given.get(key, "")
        if url and (SECRET_REF_RE.search(url) or urlsplit(url).scheme not in ("http", "https")):
            raise ToolsFileError(f"{where}.{key} must be an http:// or https:// URL, got {url[:200]!r}")
    return pairs


def _no_secret(value: str, where: str) -> None:
    if SECRET_REF_RE.search(value):
        raise ToolsFileError(
            f"{where} may not hold a ${{secret:...}} reference (it would show in process lists and logs); "
            "pass the secret through env or headers instead"
        )


def _server(raw: Any, index: int) -> UpstreamServer:
    where = f"servers[{index}]"
    if not isinstance(raw, dict):
        raise ToolsFileError(f"{where} must be a [[servers]] table")
    unknown = sorted(set(raw) - set(SERVER_KEYS))
    if unknown:
        raise ToolsFileError(f"{where}: unknown key(s) {', '.join(unknown)} (known keys: {', '.join(SERVER_KEYS)})")
    prefix = raw.get("namespace")
    if not isinstance(prefix, str):
        raise ToolsFileError(f'{where}.namespace is required: the prefix of its names, e.g. namespace = "github"')
    if prefix and not PREFIX_RE.fullmatch(prefix):
        raise ToolsFileError(
            f"{where}.namespace {prefix!r} must be letters, digits, '_' or '-' (at most 63, starting with a "
            'letter or digit), or "" for no prefix'
        )
    given = [k for k in ("command", "url", "registry") if raw.get(k) not in (None, "")]
    if len(given) != 1:
        raise ToolsFileError(
            f"{where} needs exactly one of command (a stdio server), url (an HTTP server) or registry "
            f"(an MCP Registry entry); it has {', '.join(given) or 'none'}"
        )
    kind = given[0]
    for key in ("command", "url", "registry", "transport", "cwd", "version"):
        if key in raw and not isinstance(raw[key], str):
            raise ToolsFileError(f"{where}.{key} must be a string")
    fields: dict[str, Any] = {"namespace": prefix}
    if kind == "command":
        command = raw["command"]
        _no_secret(command, f"{where}.command")
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ToolsFileError(f"{where}.command is not a valid shell string: {exc}") from None
        if not argv or "\0" in command:
            raise ToolsFileError(f"{where}.command is empty: give the program and its arguments")
        fields["command"] = command
    elif kind == "url":
        url = raw["url"]
        _no_secret(url, f"{where}.url")
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:  # a bracketed host that is not an IPv6 address, an unbalanced bracket
            host = None
        if host is None or parts.scheme not in ("http", "https"):
            raise ToolsFileError(f"{where}.url must be an http:// or https:// URL, got {url!r}")
        if parts.username or parts.password:
            raise ToolsFileError(f"{where}.url must not hold credentials; send them with headers")
        fields["url"] = url
        transport = raw.get("transport") or ("sse" if parts.path.rstrip("/").endswith("/sse") else "streamable-http")
        if transport not in ("streamable-http", "sse"):
            raise ToolsFileError(f'{where}.transport must be "streamable-http" or "sse", got {transport!r}')
        fields["transport"] = transport
    else:
        name = raw["registry"]
        if not REGISTRY_NAME_RE.fullmatch(name):
            raise ToolsFileError(f'{where}.registry must be a registry server name like "io.github.owner/server"')
        fields["registry"] = name
        version = raw.get("version", "")
        if version and (len(version) > 255 or not version.isprintable() or len(version.split()) != 1):
            raise ToolsFileError(
                f'{where}.version must be an exact version like "1.2.0" (or leave it out for the latest)'
            )
        fields["version"] = version
    if "version" in raw and kind != "registry":
        raise ToolsFileError(
            f"{where}.version only applies to a registry server; pin a command's version in the command"
        )
    if "transport" in raw and kind != "url":
        raise ToolsFileError(f"{where}.transport only applies to a url server")
    if "headers" in raw:
        if kind == "command":
            raise ToolsFileError(f"{where}.headers only apply to url and registry servers; use env for a command")
        fields["headers"] = _strings(raw["headers"], f"{where}.headers", HEADER_NAME_RE, "header name", True)
    if "env" in raw:
        if kind == "url":
            raise ToolsFileError(f"{where}.env only applies to command and registry servers; use headers for a url")
        fields["env"] = _strings(raw["env"], f"{where}.env", ENV_NAME_RE, "environment variable name", True)
    if "oauth" in raw:
        fields["oauth"] = _oauth(raw["oauth"], f"{where}.oauth", kind)
    if raw.get("cwd"):
        if kind == "url":
            raise ToolsFileError(f"{where}.cwd only applies to command and registry servers")
        cwd = PurePosixPath(raw["cwd"])
        if not cwd.is_absolute() and ".." in cwd.parts:
            raise ToolsFileError(f"{where}.cwd must stay inside the namespace folder (or be an absolute path)")
        fields["cwd"] = str(cwd)
    return UpstreamServer(**fields)


def parse_tools_file(data: dict[str, Any]) -> UpstreamConfig:
    """Every top-level key and every server checked; all that is wrong is said at once (`; ` between), a
    server's first mistake each."""
    found: list[str] = []
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        found.append(f"unknown key(s) {', '.join(unknown)} (known keys: {', '.join(TOP_KEYS)})")
    toolsets = data.get("active_toolsets", [])
    if not isinstance(toolsets, list) or not all(isinstance(g, str) and g for g in toolsets):
        found.append('active_toolsets must be a list of glob patterns, e.g. ["github_*", "time_get_*"]')
    restart = data.get("restart", True)
    if not isinstance(restart, bool):
        found.append("restart must be true or false")
    timeout = data.get("startup_timeout", DEFAULT_STARTUP_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
        found.append("startup_timeout must be a number of seconds between 0 and 600")
    servers = data.get("servers")
    parsed: list[UpstreamServer] = []
    if not isinstance(servers, list) or not servers:
        found.append(
            'no servers: add at least one [[servers]] table with namespace = "..." and command = "..." or url = "..."'
        )
    elif len(servers) > MAX_SERVERS:
        found.append(f"at most {MAX_SERVERS} servers per namespace, got {len(servers)}")
    else:
        for index, raw in enumerate(servers):
            try:
                parsed.append(_server(raw, index))
            except ToolsFileError as exc:
                found.append(str(exc))
    if found:
        raise ToolsFileError("; ".join(found))
    return UpstreamConfig(
        servers=tuple(parsed),
        active_toolsets=tuple(toolsets),
        restart=restart,
        startup_timeout=float(timeout),
    )


_LINE_RE = re.compile(r"at line (\d+)")


def declared_secrets(listed: tuple[str, ...] | list[str], upstream: UpstreamConfig | None) -> tuple[str, ...]:
    """A namespace's declared secrets: those its tooldock.yaml lists, then those its tools.toml's servers
    refer to (`${secret:NAME}`), each once."""
    return tuple(dict.fromkeys((*listed, *(upstream.secret_names() if upstream is not None else ()))))


def read_tools_file(folder: Path) -> tuple[UpstreamConfig | None, Problem | None]:
    """The folder's `tools.toml`, or None and the problem that stops it from being served."""
    path = folder / TOOLS_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a BOM (Windows editors) is no statement
    except tomllib.TOMLDecodeError as exc:
        found = _LINE_RE.search(str(exc))
        line = int(found.group(1)) if found else None
        return None, Problem(TOOLS_FILE, f"invalid TOML: {exc}", line, "invalid_config")
    except (OSError, UnicodeDecodeError) as exc:
        return None, Problem(TOOLS_FILE, f"cannot read the file: {exc}", None, "invalid_config")
    except (RecursionError, MemoryError):  # tomllib recurses once per level of nesting
        return None, Problem(TOOLS_FILE, f"invalid TOML: {NESTED_TOO_DEEPLY}", None, "invalid_config")
    try:
        return parse_tools_file(data), None
    except ToolsFileError as exc:
        return None, Problem(TOOLS_FILE, str(exc), None, "invalid_config")
