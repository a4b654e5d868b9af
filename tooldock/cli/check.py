"""`tooldock check`: what `serve` would find in a tools directory, without starting anything.

The same static scan the gateway runs at each reload (namespace names, tool files, docstrings, type hints,
duplicate names, `tooldock.yaml`, `tools.toml`) and the builder's search for credentials written into the
files, so a pre-commit hook or a CI job can refuse a folder before a gateway sees it. Nothing is imported
or installed unless `--import` asks: then each namespace's files are imported in its own environment, as a
worker would (an import that fails, a requirement that does not install).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tooldock.cli.common import refuse_namespace_folder, settings, writable_state_dir
from tooldock.cli.serve import tools_dir_argument
from tooldock.namespace.credentials import credential_problems
from tooldock.namespace.models import NamespaceSource, ScanResult, problem_text
from tooldock.namespace.names import tool_name_warning


def report(scan: ScanResult) -> dict[str, Any]:
    """The scan as data: each namespace with its tools (or upstream servers) and problems, credentials written
    into its files included (serve runs them; build refuses them)."""
    namespaces = []
    for source in scan.namespaces:
        problems = [*source.problems, *credential_problems(source)]
        entry: dict[str, Any] = {
            "name": source.name,
            "problems": [p.to_dict() for p in problems],
            "warnings": _warnings(source),
        }
        if source.is_upstream:
            servers = source.upstream.servers if source.upstream is not None else ()
            entry["servers"] = [s.namespace or "(unprefixed)" for s in servers]
        else:
            entry["tools"] = list(source.tool_names)
        namespaces.append(entry)
    return _tallied({"namespaces": namespaces, "problems": [p.to_dict() for p in scan.problems]})


def _warnings(source: NamespaceSource) -> list[dict[str, Any]]:
    """What `serve` serves but clients may refuse: tool names outside MCP's rules (SEP-986). Not problems:
    they leave the exit status alone, as fastmcp serves such tools."""
    found = []
    for file in source.files:
        for name, line in zip(file.tools, file.lines or [None] * len(file.tools), strict=True):
            message = tool_name_warning(name)
            if message:
                found.append({"file": file.filename, "line": line, "code": "tool_name", "message": message})
    return found


SHOWN = 20  # tool names on a namespace's line


def _tallied(result: dict[str, Any]) -> dict[str, Any]:
    count = len(result["problems"]) + sum(len(n["problems"]) for n in result["namespaces"])
    warned = sum(len(n["warnings"]) for n in result["namespaces"])
    return {**result, "ok": count == 0, "problem_count": count, "warning_count": warned}


def _summary(entry: dict[str, Any]) -> str:
    if "servers" in entry:  # an upstream namespace (its tools.toml)
        servers = entry["servers"]
        return f"{len(servers)} upstream server(s)" + (f" ({', '.join(servers)})" if servers else "")
    tools = entry["tools"]
    return f"{len(tools)} tool(s)" + (f" ({_names(tools)})" if tools else "")


def _names(names: list[str]) -> str:
    """The first SHOWN names, then how many more (`--json` has them all): one line per namespace."""
    more = f", ... and {len(names) - SHOWN} more (--json lists them all)" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def _with_imports(result: dict[str, Any], scan: ScanResult) -> dict[str, Any]:
    """Import each namespace's files in its environment (runtime.backends.importcheck) and add what that
    finds to the report: the tools really served, and the files or tools that failed."""
    import asyncio

    from tooldock.runtime.backends.importcheck import import_all

    state_dir = settings().state_dir
    writable_state_dir(state_dir)
    click.echo(f"importing {len(scan.namespaces)} namespace(s) in their environments ...", err=True)
    imported = asyncio.run(import_all(list(scan.namespaces), state_dir))
    for entry in result["namespaces"]:
        found = imported.get(entry["name"])
        if found is not None:
            entry["tools"] = found.tools
            entry["problems"] += found.problems
    return _tallied(result)


@click.command()
@tools_dir_argument
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.option(
    "--import",
    "imports",
    is_flag=True,
    help="Also import each namespace's files in its own environment (made with uv, as serve makes it), "
    "reporting imports that fail and requirements that do not install.",
)
def check(tools_dir: Path, as_json: bool, imports: bool) -> None:
    """Check TOOLS_DIR (default: ./tools) as serve would scan it, without starting anything.

    Lists each namespace's tools and every problem (file:line: what to fix). Exits 1 when there is a
    problem (a tool, file or folder `serve` would leave out, or a credential written into a file, which
    `build` refuses to put into an image), 0 otherwise. Warnings (a tool name clients may refuse) are
    listed and leave the exit status alone. Without --import nothing is
    imported or installed: a failing import or requirement shows when a worker starts or an image is built.
    """
    from tooldock.namespace.scanner import scan_tools_dir

    try:
        scan = scan_tools_dir(tools_dir)
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    if not scan.namespaces and not scan.problems:
        refuse_namespace_folder(tools_dir, "check")
    result = report(scan)
    if imports:
        result = _with_imports(result, scan)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
    else:
        for entry in result["namespaces"]:
            click.echo(f"{entry['name']}: {_summary(entry)}")
            for problem in entry["problems"]:
                click.echo(f"  {entry['name']}/{problem_text(problem)}")
            for warning in entry["warnings"]:
                warned = {**warning, "message": f"warning: {warning['message']}"}
                click.echo(f"  {entry['name']}/{problem_text(warned)}")
        for problem in result["problems"]:
            click.echo(f"not a namespace: {problem_text(problem)}")
        if not scan.namespaces and not scan.problems:
            click.echo(f"no namespace folders in {tools_dir}")
        found, warned = result["problem_count"], result["warning_count"]
        also = f", {warned} warning(s)" if warned else ""
        click.echo(f"{len(scan.namespaces)} namespace(s), {found} problem(s){also}", err=True)
    if not result["ok"]:
        raise SystemExit(1)
