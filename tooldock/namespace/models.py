"""Plain data describing a namespace folder. Immutable, so snapshots can share them safely."""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tooldock.namespace.toolsfile import UpstreamConfig

NetworkMode = Literal["none", "egress"]

# A YAML, TOML or JSON file nested thousands of levels deep: its parser raises RecursionError, not its error.
NESTED_TOO_DEEPLY = "nested too deeply to read (lists or tables thousands of levels deep); flatten it"
# The gateway setting that lists tool schemas with their `$ref`s inlined; it reaches workers too (process workers
# through their environment, containers through `deploy`), which inline them only then (extract.inlined).
INLINE_REFS_ENV = "TOOLDOCK_INLINE_SCHEMA_REFS"


@dataclass(frozen=True)
class Problem:
    """Something wrong with one file, reported as data: which file, which line, why."""

    file: str
    message: str
    line: int | None = None
    code: str = "invalid_file"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "code": self.code, "message": self.message}


def problem_text(problem: dict[str, Any]) -> str:
    """A problem (`Problem.to_dict()`, or as `/namespaces` lists it) as one line: "file:line: message"."""
    where = f"{problem['file']}:{problem['line']}" if problem.get("line") else str(problem["file"])
    return f"{where}: {problem.get('message')}"


@dataclass(frozen=True)
class Limits:
    timeout: float | None = None  # seconds per call; None = the gateway default
    concurrency: int | None = None  # calls in flight per namespace; None = the gateway default
    memory: str | None = None  # e.g. "256m" (container backends)
    cpus: float | None = None
    rate: float | None = None  # calls per second admitted (token bucket); None = unlimited
    burst: int | None = None  # calls admitted at once (the bucket's size); None = the rate rounded up


@dataclass(frozen=True)
class NamespaceConfig:
    """`tooldock.yaml`. Every key is optional."""

    description: str = ""
    version: str = ""
    author: str = ""
    secrets: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    network: NetworkMode = "none"
    limits: Limits = field(default_factory=Limits)
    python: str | None = None
    idle_timeout: float | None = None  # seconds without a call after which the worker is stopped (scale to zero)
    tools_allow: tuple[str, ...] = ()  # `tools.allow` globs: only these tools are exposed (empty: all)
    tools_deny: tuple[str, ...] = ()  # `tools.deny` globs: these are never exposed
    audit_arguments: bool = False  # `audit: {arguments: true}`: audit lines carry the arguments (secrets masked)
    # `tasks: {optional: [globs], required: [globs]}`: tools run as MCP tasks (besides fastmcp's `@tool(task=...)`)
    tasks_optional: tuple[str, ...] = ()
    tasks_required: tuple[str, ...] = ()
    replicas: int = 1  # tasks of its worker service on a cluster (`tooldock swarm`); not in the image's label


def exposes(config: NamespaceConfig, tool: str) -> bool:
    """Whether a namespace's `tools: {allow, deny}` lets callers see and call `tool`."""
    if config.tools_allow and not any(fnmatchcase(tool, g) for g in config.tools_allow):
        return False
    return not any(fnmatchcase(tool, g) for g in config.tools_deny)


@dataclass(frozen=True)
class ToolFile:
    """A file that passed static validation, with the tool functions found in it."""

    filename: str
    tools: tuple[str, ...]
    lines: tuple[int, ...] = ()  # each tool's `def` line, as `tools` lists them (empty: not known)


@dataclass(frozen=True)
class NamespaceSource:
    """One namespace folder as scanned: what will be loaded, what was rejected, and a content fingerprint."""

    name: str
    path: Path
    files: tuple[ToolFile, ...]
    problems: tuple[Problem, ...]
    config: NamespaceConfig
    requirements: str  # the text of requirements.txt, "" if absent
    fingerprint: str  # changes whenever anything in the folder that affects the worker changes
    # A folder with a `tools.toml` fronts upstream MCP servers instead of holding tool files; `upstream` is
    # None when that file is invalid (the problem says why) and the namespace then serves nothing.
    is_upstream: bool = False
    upstream: UpstreamConfig | None = None

    @property
    def has_requirements(self) -> bool:
        return bool(self.requirements.strip())

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Each tool once (versions of one tool, `version=`, in several files are one tool)."""
        return tuple(dict.fromkeys(name for f in self.files for name in f.tools))


@dataclass(frozen=True)
class ScanResult:
    namespaces: tuple[NamespaceSource, ...]
    problems: tuple[Problem, ...]  # folders that could not become namespaces at all

    def get(self, name: str) -> NamespaceSource | None:
        return next((ns for ns in self.namespaces if ns.name == name), None)
