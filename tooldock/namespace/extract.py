"""Import a namespace's tool files and describe their tools: the one place that imports fastmcp.

Runs only inside a worker's environment (a worker process, or a build step with the locked
dependencies), never in the gateway: importing a tool file executes user code.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, cast

from fastmcp import Context
from fastmcp.decorators import get_fastmcp_meta
from fastmcp.dependencies import Dependency
from fastmcp.prompts import Prompt
from fastmcp.resources import Resource, ResourceTemplate
from fastmcp.server.dependencies import get_context
from fastmcp.server.providers.filesystem_discovery import extract_components
from fastmcp.tools import Tool
from fastmcp.utilities.json_schema import dereference_refs
from fastmcp.utilities.types import find_kwarg_by_type
from fastmcp.utilities.versions import version_sort_key
from mcp_types import SERVER_INFO_META_KEY

from tooldock.namespace.asks import may_ask
from tooldock.namespace.models import INLINE_REFS_ENV, Problem
from tooldock.namespace.origins import TOOL_IMPORT
from tooldock.namespace.validate import AUTH_CHECK, FileReport, validate_source
from tooldock.namespace.versions import FASTMCP_META

# The fields of an MCP `Tool` that ToolDock pre-extracts and serves (seed 000, "Tools method compliance");
# `execution.taskSupport` is fastmcp's `@tool(task=...)`, which the gateway's tasks extension reads.
DESCRIPTOR_FIELDS = (
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "execution",
    "_meta",
)


@dataclass
class LoadedNamespace:
    tools: dict[str, Tool] = field(default_factory=dict)  # by name: the highest version of a versioned one
    descriptors: list[dict[str, Any]] = field(default_factory=list)
    # A versioned tool's versions, each callable by asking for it (`_meta.fastmcp.version`), as FastMCP serves them
    versions: dict[str, dict[str, Tool]] = field(default_factory=dict)
    failed: list[Problem] = field(default_factory=list)
    # Resources (by URI), resource templates (by URI template) and prompts (by name): served over MCP.
    resources: dict[str, Resource] = field(default_factory=dict)
    templates: dict[str, ResourceTemplate] = field(default_factory=dict)
    prompts: dict[str, Prompt] = field(default_factory=dict)
    # Tools that take a fastmcp `Context` (progress, logging, sampling, elicitation): run through the bridge.
    context_tools: set[str] = field(default_factory=set)
    asking_tools: set[str] = field(default_factory=set)  # the Context tools that may ask the client (asks.py)
    # The descriptors whose schemas have `$ref`s, with them inlined as FastMCP's default serves them (`inlined`)
    inlined: dict[str, dict[str, Any]] = field(default_factory=dict)
    inline_refs: bool = False  # make `inlined` (the gateway asked, INLINE_REFS_ENV): jsonref costs 80 ms to import
    folder: Path | None = None  # where the files were imported from (resolved): the tools' own frames

    def older_versions(self) -> dict[str, dict[str, dict[str, Any]]]:
        """A versioned tool's versions but the one listed, described (by name, then version): what REST and
        OpenAPI need to run and describe one (the handshake's `tool_versions`)."""
        return {
            name: {version: describe(tool) for version, tool in versions.items() if tool is not self.tools.get(name)}
            for name, versions in self.versions.items()
            if len(versions) > 1
        }

    def surface(self) -> dict[str, list[dict[str, Any]]]:
        """Everything but the tools, as MCP lists it (the tools are `descriptors`); keyed by
        `protocol.SURFACE_KINDS`, the handshake fields that carry them."""
        return {
            "resources": [_dump(r.to_mcp_resource()) for r in self.resources.values()],
            "resourceTemplates": [_dump(t.to_mcp_template()) for t in self.templates.values()],
            "prompts": [_dump(p.to_mcp_prompt()) for p in self.prompts.values()],
        }


def own_meta(meta: Any) -> dict[str, Any] | None:
    """The `_meta` a tool's author gave (`@tool(meta=...)`, a resource's or prompt's, a `ToolResult`'s: MCP Apps
    and the OpenAI Apps SDK put their UI links there), without fastmcp's own key (its tags) and the worker's
    server's `serverInfo` stamp (that server is internal: the client talks to the gateway)."""
    if not isinstance(meta, dict):
        return None
    kept = {key: value for key, value in meta.items() if key not in (FASTMCP_META, SERVER_INFO_META_KEY)}
    return kept or None


def listed_meta(meta: Any) -> dict[str, Any] | None:
    """A component's `_meta` as `tools/list` (and the other lists) send it: the author's (`own_meta`), and
    fastmcp's public block when it says something: `{"fastmcp": {"tags": [...], "version": ...}}`, by which
    FastMCP's clients filter by tag and see a tool's version. FastMCP lists that block on every component,
    `{"tags": []}` when there is nothing in it; ToolDock leaves such an empty one out."""
    listed = own_meta(meta) or {}
    block = meta.get(FASTMCP_META) if isinstance(meta, dict) else None
    if isinstance(block, dict):
        public = {key: value for key, value in block.items() if not key.startswith("_") and value not in ([], None)}
        if public:
            listed[FASTMCP_META] = public
    return listed or None


def _dump(model: Any) -> dict[str, Any]:
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    meta = listed_meta(data.pop("_meta", None))
    return {**data, "_meta": meta} if meta else data


def describe(tool: Tool) -> dict[str, Any]:
    """The tool as MCP `tools/list` shows it, its `_meta` the author's and its tags (`listed_meta`). Its
    schemas are sent as declared, `$defs` and `$ref`s kept, as the spec asks (SEP-1613): FastMCP's default
    (`dereference_schemas`) inlines them for clients that do not follow `$ref`, and fails the conformance
    scenario json-schema-2020-12 (the gateway sends `inlined` instead only when asked)."""
    data = _dump(tool.to_mcp_tool())
    return {key: data[key] for key in DESCRIPTOR_FIELDS if key in data}


def inlined(descriptor: dict[str, Any]) -> dict[str, Any] | None:
    """The descriptor with its schemas' `$ref`s inlined by fastmcp's own `dereference_refs` (FastMCP's default,
    `dereference_schemas`, for clients such as VS Code's Copilot that do not follow `$ref`); None when no
    schema has one. The gateway lists it instead when TOOLDOCK_INLINE_SCHEMA_REFS asks (runtime.engine)."""
    flat = dict(descriptor)
    for key in ("inputSchema", "outputSchema"):
        schema = descriptor.get(key)
        if isinstance(schema, dict) and ("$defs" in schema or '"$ref"' in json.dumps(schema)):
            flat[key] = dereference_refs(schema)
    return flat if flat != descriptor else None


def _import_file(path: Path) -> ModuleType:
    # Plain module names (the file stem) so tool files can import each other and their `_helpers.py`.
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(path.stem, None)
        raise
    return module


def _line_of(exc: BaseException, path: Path) -> int | None:
    if isinstance(exc, SyntaxError):
        return exc.lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return frames[-1].lineno if frames else None


def _import_problem(path: Path, exc: BaseException) -> Problem:
    line = _line_of(exc, path)
    if isinstance(exc, ModuleNotFoundError) and _installed_parent(exc.name):
        return Problem(
            path.name,
            f"import failed: {exc} (the installed {str(exc.name).split('.')[0]!r} has no such module: check the "
            "name, or the version requirements.txt pins)",
            line,
            "import_error",
        )
    if isinstance(exc, ModuleNotFoundError):
        return Problem(
            path.name,
            f"import failed: {exc}; add the package to the namespace's requirements.txt",
            line,
            "dependency_error",
        )
    if isinstance(exc, SystemExit):  # the file called sys.exit(): its message is the reason it gave
        return Problem(path.name, f"import failed: the file called sys.exit({exc.code!r})", line, "import_error")
    return Problem(path.name, f"import failed: {type(exc).__name__}: {exc}", line, "import_error")


def _installed_parent(name: str | None) -> bool:
    """Whether `name` is a submodule of an installed package (`httpx.nope`): then requirements.txt does not
    lack the package, the code asks it for something it does not have."""
    root = (name or "").split(".")[0]
    if not root or root == name:
        return False
    try:
        return importlib.util.find_spec(root) is not None
    except (ImportError, ValueError):
        return False


def load_namespace(folder: Path, filenames: Iterable[str]) -> LoadedNamespace:
    """Import each file and build its tools; a file that fails is reported and the rest still load."""
    folder = folder.resolve()
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    inline_refs = os.environ.get(INLINE_REFS_ENV, "").lower() in ("1", "true", "yes", "on")  # env_bool's words
    loaded = LoadedNamespace(folder=folder, inline_refs=inline_refs)
    for filename in filenames:
        path = folder / filename
        try:
            module = _import_file(path)
        except (Exception, SystemExit) as exc:  # user code: anything may be raised at import time, sys.exit() too
            loaded.failed.append(_import_problem(path, exc))
            continue
        try:
            report = validate_source(filename, path.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError):  # the gateway's scan reported it; the import worked, so serve all
            report = FileReport((), ())
        # A tool the static checks reject (no docstring, a parameter without a type hint) is left out as the
        # gateway's scan says, and one fastmcp rejects is reported by name; the file's other tools are served.
        own = _OwnObjects(module, set(report.skipped))
        components, rejected = _components(path, own, dict(report.functions))
        loaded.failed.extend(rejected.values())
        for component in components:
            problem = _add(loaded, component)
            if problem:
                loaded.failed.append(Problem(path.name, problem, None, "duplicate_tool"))
        loaded.failed.extend(_not_made(path.name, report, components, set(rejected)))
    _list_versions(loaded)
    return loaded


def _list_versions(loaded: LoadedNamespace) -> None:
    """A versioned tool's listing names all its versions, highest first (`_meta.fastmcp.versions`), as
    FastMCP lists them: each can be called (an inlined copy of the descriptor shares its `_meta`)."""
    for descriptor in loaded.descriptors:
        versions = loaded.versions.get(descriptor["name"])
        if versions and len(versions) > 1:
            ordered = sorted(versions.values(), key=version_sort_key, reverse=True)
            block = descriptor.setdefault("_meta", {}).setdefault(FASTMCP_META, {})
            block["versions"] = [str(tool.version) for tool in ordered]


def _not_made(filename: str, report: FileReport, components: list[Any], rejected: set[str]) -> list[Problem]:
    """The file's `@tool` functions (as its syntax reads) that importing it did not make into tools: their
    decorator is someone else's (a server object's that ToolDock does not run, a look-alike). Without this
    they would be missing from the list with no word why."""
    made = {getattr(c, "fn", None) for c in components if isinstance(c, Tool)}
    names = {getattr(fn, "__name__", None) for fn in made}
    if None in names:  # a tool whose function cannot be named: nothing to compare against
        return []
    return [
        Problem(
            filename,
            f"tool {name!r}: its decorator did not make it a fastmcp tool, so it is not served; decorate it "
            f"with '@tool' ({TOOL_IMPORT})",
            line,
            "not_a_tool",
        )
        for name, line in report.functions
        if name not in names and name not in rejected
    ]


def _components(path: Path, own: _OwnObjects, lines: dict[str, int]) -> tuple[list[Any], dict[str, Problem]]:
    """The file's tools, resources and prompts, each made by fastmcp on its own (`extract_components` over
    one attribute, duck-typed as a module), so one it rejects (a return type pydantic cannot describe, a
    resource template whose parameters do not match its URI) costs only itself. In the order the file
    defines them, as a FastMCP server's decorators register them and as `check` reads them (fastmcp's own
    file discovery takes `dir()`'s alphabetical order): the author's order is the order clients list. Also
    the problem of each one rejected, by its name. `lines`: the `def` line of the file's tools, as the
    static checks read them."""
    components: list[Any] = []
    rejected: dict[str, Problem] = {}
    for name in list(vars(own)):
        obj = getattr(own, name)
        kind = getattr(get_fastmcp_meta(obj), "type", None) or "component"
        try:
            made = extract_components(cast(ModuleType, SimpleNamespace(**{name: obj})))
        except Exception as exc:
            reason = " ".join(str(exc).split("\n\nFor further information", 1)[0].split())  # pydantic's link
            line = lines.get(name) or _first_line(obj) or _line_of(exc, path)
            rejected[name] = Problem(path.name, f"{kind} {name!r} cannot be served: {reason}", line, "invalid_tool")
            continue
        if any(getattr(component, "auth", None) is not None for component in made):
            line = lines.get(name) or _first_line(obj)
            rejected[name] = Problem(path.name, AUTH_CHECK.format(kind=kind, name=name), line, "auth_check")
            continue
        components.extend(made)
    return components, rejected


def _first_line(obj: Any) -> int | None:
    """The first line (its first decorator's) of the function behind a component."""
    code = getattr(inspect.unwrap(getattr(obj, "fn", obj)), "__code__", None)
    return code.co_firstlineno if code is not None else None


class _OwnObjects:
    """The module's attributes that were defined in it (not imported from a sibling file or helper)."""

    def __init__(self, module: ModuleType, skipped: set[str]) -> None:
        for name, obj in vars(module).items():
            if name not in skipped and (
                getattr(obj, "__module__", None) == module.__name__
                or getattr(getattr(obj, "fn", None), "__module__", None) == module.__name__
            ):
                setattr(self, name, obj)


def _add(loaded: LoadedNamespace, component: Any) -> str | None:
    """File one component; the problem text when its name or URI is already taken."""
    if isinstance(component, Tool):
        known = loaded.tools.get(component.name)
        if known is not None and (known.version is None or component.version is None):
            return f"duplicate tool name {component.name!r}"
        if component.version is not None:
            versions = loaded.versions.setdefault(component.name, {})
            if str(component.version) in versions:
                return f"duplicate version {str(component.version)!r} of tool {component.name!r}"
            versions[str(component.version)] = component
        if known is not None:  # versions of one tool: the highest is listed, as fastmcp lists it
            if max(known, component, key=version_sort_key) is known:
                return None
            loaded.descriptors = [d for d in loaded.descriptors if d["name"] != component.name]
            loaded.context_tools.discard(component.name)
            loaded.asking_tools.discard(component.name)
        loaded.tools[component.name] = component
        loaded.descriptors.append(describe(component))
        loaded.inlined.pop(component.name, None)
        if loaded.inline_refs and (flat := inlined(loaded.descriptors[-1])) is not None:
            loaded.inlined[component.name] = flat
        fn = getattr(component, "fn", None)
        parameter = _context_parameter(fn) if fn is not None else None
        if parameter is not None or (fn is not None and _runs_on_server(fn)):
            loaded.context_tools.add(component.name)
            if parameter is None or may_ask(fn, parameter):  # a dependency's use is not read: it may ask
                loaded.asking_tools.add(component.name)
    elif isinstance(component, ResourceTemplate):
        return _slot(loaded.templates, component.uri_template, component, "resource template")
    elif isinstance(component, Resource):
        return _slot(loaded.resources, str(component.uri), component, "resource")
    elif isinstance(component, Prompt):
        return _slot(loaded.prompts, component.name, component, "prompt name")
    return None


def _slot(table: dict[str, Any], key: str, component: Any, what: str) -> str | None:
    """File a resource, template or prompt under `key`; versions of one (`version=...`) are one, and the
    highest is served, as fastmcp serves them. The problem text when `key` is taken by an unversioned one."""
    known = table.get(key)
    if known is not None and (known.version is None or component.version is None):
        return f"duplicate {what} {key!r}"
    if known is None or max(known, component, key=version_sort_key) is component:
        table[key] = component
    return None


def _runs_on_server(fn: Any) -> bool:
    """Whether a tool with no Context parameter needs the worker's FastMCP server all the same: a fastmcp
    dependency as a parameter's default (`Progress()`, `CurrentContext()`, or `Depends(f)`, whose `f` may take
    one), which `Tool.run` alone cannot resolve, or fastmcp's `get_context()` called in its body (by any name)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(isinstance(p.default, Dependency) for p in parameters):
        return True
    fn = inspect.unwrap(fn)
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    return code is not None and any(n == "get_context" or names.get(n) is get_context for n in code.co_names)


def _context_parameter(fn: Any) -> str | None:
    """The name of the parameter that takes a fastmcp Context, if any."""
    try:
        return find_kwarg_by_type(fn, Context)
    except Exception:  # an unresolvable annotation: fastmcp itself reports it when the tool runs
        return None
