"""`tooldock call`: one tool of one namespace folder, called from a shell or a script, with no server and no port.

The folder's worker starts as `serve` starts it (its virtualenv, its secrets, the process backend), inside
this process's own gateway engine; the call goes through the engine as an MCP or REST call would, and the
worker stops when the command ends. A Context tool's progress and log lines go to stderr; a question it asks
the client (sampling, elicitation, roots) is refused, as by a client that declared none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click

from tooldock.cli.common import settings, writable_state_dir


def namespace_folder(path: Path) -> Path:
    """A namespace folder given on the command line, or a ClickException saying why it is not one."""
    from tooldock.namespace.names import NamespaceNameError, validate_namespace_name

    if not path.exists():
        raise click.ClickException(f"no such namespace folder: {path}")
    if not path.is_dir():
        raise click.ClickException(f"{path} is not a folder; give a namespace folder (a folder of tool files)")
    try:
        validate_namespace_name(path.resolve().name)
    except NamespaceNameError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    return path.resolve()


@contextlib.contextmanager
def tools_dir_of(*folders: Path) -> Any:
    """A temporary tools directory holding (links to) these namespace folders, as `serve` expects one."""
    with tempfile.TemporaryDirectory(prefix="tooldock-call-") as tmp:
        for folder in folders:
            link = Path(tmp) / folder.name
            if link.exists():
                raise click.ClickException(f"two namespace folders are named {folder.name!r}: give one of them")
            link.symlink_to(folder, target_is_directory=True)
        yield Path(tmp)


class CliRelay:
    """A Context tool's end of the call: progress and log lines to stderr; no question can be answered."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def call_fields(self) -> dict[str, Any]:
        return {"client": {}, "progress": True, "logLevel": "debug"}

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("op") != "event":
            method = message.get("method")
            return {"error": {"code": -32600, "message": f"tooldock call cannot answer {method}"}}
        data = message.get("data") or {}
        if message.get("event") == "progress":
            total = f"/{data['total']:g}" if isinstance(data.get("total"), (int, float)) else ""
            note = f" {data['message']}" if data.get("message") else ""
            click.echo(f"{self.tool}: progress {data.get('progress', 0):g}{total}{note}", err=True)
        elif message.get("event") == "log":
            click.echo(f"{self.tool}: {data.get('level', 'info')}: {data.get('data')}", err=True)
        return None


@contextlib.asynccontextmanager
async def engine_for(tools_dir: Path) -> AsyncIterator[Any]:
    """A gateway engine over `tools_dir` with its workers started (process backend), closed on the way out."""
    from tooldock.cli.serve import _secrets
    from tooldock.runtime.backends.process import ProcessBackend
    from tooldock.runtime.engine import Engine
    from tooldock.runtime.registry import Registry

    config = settings()
    writable_state_dir(config.state_dir)
    backend = ProcessBackend(config, tools_dir)
    registry = Registry(backend, config, _secrets())
    try:
        report = await registry.reload(announce=False)
        for name, why in {**(report.get("failed") or {}), **(report.get("problems") or {})}.items():
            click.echo(f"tooldock: {name}: {why}", err=True)
        yield Engine(registry, config)
    finally:
        await registry.close()
        await backend.close()


def parse_arguments(given: tuple[str, ...], schema: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments: one JSON object, or `key=value` pairs. A value is taken as JSON (`n=3`,
    `on=true`, `tags=["a"]`) unless the tool's parameter is a string, or it is not valid JSON."""
    if len(given) == 1 and given[0].lstrip().startswith("{"):
        try:
            found = json.loads(given[0])
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(found, dict):
            raise click.ClickException("the arguments must be one JSON object of parameter names to values")
        return found
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for pair in given:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.ClickException(f"{pair!r} is neither key=value nor a JSON object: write name=value")
        if properties.get(key, {}).get("type") == "string":
            arguments[key] = raw
            continue
        try:
            arguments[key] = json.loads(raw)
        except json.JSONDecodeError:
            arguments[key] = raw
    return arguments


def shown(result: dict[str, Any]) -> str:
    """A tool result for a person: its text blocks, and what other blocks there are."""
    lines = []
    for block in result.get("content") or []:
        if block.get("type") == "text":
            lines.append(str(block.get("text", "")))
        else:
            lines.append(f"[{block.get('type')} {block.get('mimeType', '')}]".replace(" ]", "]"))
    if not lines and result.get("structuredContent") is not None:
        lines.append(json.dumps(result["structuredContent"], indent=2, ensure_ascii=False))
    return "\n".join(lines)


async def _run(folder: Path, tool: str | None, given: tuple[str, ...], listing: bool) -> Any:
    from tooldock.errors import ExecutionTimeout, InvalidArguments, ToolDockError, ToolFailed, WorkerCrashed
    from tooldock.runtime.mcp.results import error_payload

    with tools_dir_of(folder) as tools_dir:
        async with engine_for(tools_dir) as engine:
            try:
                tools = engine.list_tools(folder.name)
                if listing:
                    return tools
                assert tool is not None
                known = {t["name"]: t for t in tools}
                if tool not in known:
                    names = ", ".join(sorted(known)) or "none"
                    raise click.ClickException(f"namespace {folder.name!r} has no tool {tool!r} (its tools: {names})")
                arguments = parse_arguments(given, known[tool].get("inputSchema") or {})
                try:
                    return await engine.call_tool(folder.name, tool, arguments, CliRelay(tool))
                except (ExecutionTimeout, InvalidArguments, ToolFailed, WorkerCrashed) as exc:
                    return error_payload(exc)  # the tool failed: its result says so, as over MCP
            except ToolDockError as exc:
                raise click.ClickException(exc.message) from None


@click.command()
@click.argument("namespace_dir", type=click.Path(path_type=Path))
@click.argument("tool", required=False)
@click.argument("arguments", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the whole MCP result (or the tool list) as JSON.")
@click.option("--list", "listing", is_flag=True, help="List the namespace's tools instead of calling one.")
def call(namespace_dir: Path, tool: str | None, arguments: tuple[str, ...], as_json: bool, listing: bool) -> None:
    """Call TOOL of the namespace in NAMESPACE_DIR once, with no server and no port.

    The namespace's worker starts as `tooldock serve` starts it (its own virtualenv, its declared secrets),
    runs the one call and stops. ARGUMENTS are one JSON object ('{"name": "Ada"}') or key=value pairs
    (name=Ada count=3); a value is read as JSON (numbers, true, lists) unless the parameter is a string.
    Prints the result's text (the whole MCP result as JSON with --json); a Context tool's progress and log
    lines go to stderr. Exits 1 when the tool fails (its error on stderr, or in the JSON), when the tool or
    the folder does not exist, or when the arguments do not parse.

    \b
    Examples:
      tooldock call examples/basic-tool say_hello name=Ada
      tooldock call examples/multi-tool add '{"a": 2, "b": 3}' --json
      tooldock call examples/multi-tool --list
    """
    folder = namespace_folder(namespace_dir)
    if tool is None and not listing:
        raise click.ClickException("name the tool to call, or list them: tooldock call FOLDER --list")
    if listing and (tool is not None or arguments):
        raise click.ClickException("--list takes no tool name or arguments")
    parse_arguments(arguments, {})  # what does not parse is said before any worker starts
    found = asyncio.run(_run(folder, tool, arguments, listing))
    if listing:
        if as_json:
            click.echo(json.dumps(found, ensure_ascii=False))
        else:
            for entry in found:
                summary = (entry.get("description") or "").strip().splitlines()
                click.echo(f"{entry['name']}" + (f"  {summary[0]}" if summary else ""))
        return
    if as_json:
        click.echo(json.dumps(found, ensure_ascii=False))
    elif found.get("isError"):
        click.echo(f"tool {tool!r} failed: {shown(found)}", err=True)
    else:
        click.echo(shown(found))
    if found.get("isError"):
        sys.exit(1)
