"""`tooldock new`: a namespace folder to start from, ready for `serve --watch`, `call` and `test`.

Each template writes a documented tool file (or, for `upstream`, a `tools.toml`), `tooldock.yaml`,
`requirements.txt`, a README and a `tests/` folder whose test passes under `tooldock test` (it uses the
`mcp_client` fixture, tooldock/testing.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

TEMPLATES = ("plain", "async", "context", "upstream")

PLAIN = '''"""The {name} namespace's tools: each `@tool` function is one tool, its docstring what clients read."""

from fastmcp.tools import tool


@tool
def greet(name: str = "World", excited: bool = False) -> str:
    """Greet someone by name.

    Args:
        name: The person to greet.
        excited: End with an exclamation mark instead of a full stop.

    Returns:
        The greeting.
    """
    return f"Hello, {{name}}" + ("!" if excited else ".")
'''

ASYNC = '''"""The {name} namespace's tools: an async tool runs on the worker's event loop; await what is slow."""

import asyncio

from fastmcp.tools import tool


@tool
async def countdown(start: int = 3, delay: float = 0.0) -> list[int]:
    """Count down from a number to zero.

    Args:
        start: The number to count down from (0 to 100).
        delay: Seconds to wait between two numbers.

    Returns:
        The numbers, from `start` down to 0.
    """
    if not 0 <= start <= 100:
        raise ValueError("start must be between 0 and 100")
    numbers = []
    for n in range(start, -1, -1):
        numbers.append(n)
        await asyncio.sleep(delay)
    return numbers
'''

CONTEXT = '''"""The {name} namespace's tools: a tool that takes a fastmcp `Context` reports progress, logs to the
client, and reads the request it serves (its `_meta`, the client's capabilities)."""

from fastmcp import Context
from fastmcp.tools import tool


@tool
async def count_words(text: str, ctx: Context) -> dict:
    """Count the words of a text, line by line, reporting progress to the client.

    Args:
        text: The text to count the words of.

    Returns:
        The number of lines and words, and the client that asked.
    """
    lines = text.splitlines() or [""]
    words = 0
    for done, line in enumerate(lines, start=1):
        words += len(line.split())
        await ctx.report_progress(done, len(lines))
    await ctx.info(f"counted {{words}} word(s) in {{len(lines)}} line(s)")
    info = ctx.session.client_params.client_info if ctx.session.client_params else None
    return {{"lines": len(lines), "words": words, "client": info.name if info else None}}
'''

UPSTREAM = """# MCP servers served as the {name} namespace (docs: how-to "Upstream MCP servers").
# Each [[servers]] table is one server; its tools are listed as <namespace>_<tool>.

[[servers]]
namespace = "time"
command = "uvx mcp-server-time --local-timezone UTC"
"""

CONFIG = """# The {name} namespace's settings (docs: reference "Namespaces").
description: "{description}"
version: "0.1.0"
# secrets: [API_TOKEN]        # names of secrets the tools read from the environment (tooldock secrets set)
# network: egress             # let the worker reach the network when it runs as a container
# limits: {{timeout: 30}}
"""

TEST_PLAIN = '''"""The {name} namespace's own tests, run by `tooldock test {name}` in its environment, against the
namespace served as ToolDock serves it (`mcp_client`). Files under tests/ are not tools and not in the image."""


def test_the_tool_is_listed(mcp_client):
    assert "greet" in [tool.name for tool in mcp_client.list_tools()]


def test_greet(mcp_client):
    assert mcp_client.call("greet", name="Ada", excited=True).data == "Hello, Ada!"
'''

TEST_ASYNC = '''"""The {name} namespace's own tests, run by `tooldock test {name}` in its environment, against the
namespace served as ToolDock serves it (`mcp_client`). Files under tests/ are not tools and not in the image."""

import pytest
from fastmcp.exceptions import ToolError


def test_countdown(mcp_client):
    assert mcp_client.call("countdown", start=3).structured_content == {{"result": [3, 2, 1, 0]}}


def test_a_bad_start_fails_the_call(mcp_client):
    with pytest.raises(ToolError, match="between 0 and 100"):
        mcp_client.call("countdown", start=1000)
'''

TEST_CONTEXT = '''"""The {name} namespace's own tests, run by `tooldock test {name}` in its environment, against the
namespace served as ToolDock serves it (`mcp_client`). Files under tests/ are not tools and not in the image."""


def test_count_words(mcp_client):
    result = mcp_client.call("count_words", text="one two\\nthree")
    assert result.structured_content["lines"] == 2
    assert result.structured_content["words"] == 3
'''

TEST_UPSTREAM = '''"""The {name} namespace's own tests, run by `tooldock test {name}` against the namespace served
as ToolDock serves it (`mcp_client`). The upstream server starts on first use (`uvx` fetches it: network
needed)."""


def test_the_servers_tools_are_listed(mcp_client):
    names = [tool.name for tool in mcp_client.list_tools()]
    assert "time_get_current_time" in names, names
'''

README = """# {name}

{description}

- Try a tool: `tooldock call {name} {example}`
- Run its tests: `tooldock test {name}`
- Serve it while you edit: `tooldock serve . --watch` (from the folder that holds `{name}/`)
- Add it to a client: `tooldock install claude-desktop {name}`
"""

FILES = {  # template -> (tool file name, tool file text, test text, description, example call)
    "plain": ("tools.py", PLAIN, TEST_PLAIN, "A plain tool to start from.", "greet name=Ada"),
    "async": ("tools.py", ASYNC, TEST_ASYNC, "An async tool to start from.", "countdown start=3"),
    "context": ("tools.py", CONTEXT, TEST_CONTEXT, "A Context tool to start from.", "count_words text='one two'"),
    "upstream": ("tools.toml", UPSTREAM, TEST_UPSTREAM, "An upstream MCP server served as a namespace.", "--list"),
}


def scaffold(folder: Path, template: str) -> list[Path]:
    """Write the template's files into `folder` (which must not exist); the paths written."""
    name = folder.name
    tool_file, tool_text, test_text, description, example = FILES[template]
    texts = {
        tool_file: tool_text.format(name=name),
        "tooldock.yaml": CONFIG.format(name=name, description=description),
        "requirements.txt": "# the namespace's own requirements, one a line (pip's format); fastmcp is always there\n",
        "README.md": README.format(name=name, description=description, example=example),
        "tests/test_tools.py": test_text.format(name=name),
    }
    written = []
    for rel, text in texts.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


@click.command()
@click.argument("name", type=click.Path(path_type=Path))
@click.option(
    "--template",
    type=click.Choice(TEMPLATES),
    default="plain",
    show_default=True,
    help="plain: a sync tool; async: an async tool; context: a tool using fastmcp's Context (progress, logs, "
    "the request); upstream: a tools.toml serving an existing MCP server.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the files written as a JSON list.")
def new(name: Path, template: str, as_json: bool) -> None:
    """Make the namespace folder NAME (a path; its last part is the namespace's name) from a template.

    It holds a documented tool (or a tools.toml), tooldock.yaml, requirements.txt, a README and a tests/
    folder whose test passes under `tooldock test NAME`. The folder must not exist yet.

    \b
    Examples:
      tooldock new tools/weather
      tooldock new tools/notes --template context
    """
    from tooldock.namespace.names import NamespaceNameError, validate_namespace_name

    try:
        validate_namespace_name(name.name)
    except NamespaceNameError as exc:
        raise click.ClickException(str(exc)) from None
    if name.exists():
        raise click.ClickException(f"{name} exists already; give a new folder's path")
    if not name.absolute().parent.is_dir():
        raise click.ClickException(f"no such folder: {name.absolute().parent} (make it first)")
    written = scaffold(name, template)
    if as_json:
        click.echo(json.dumps([str(p) for p in written]))
    else:
        for path in written:
            click.echo(str(path))
    click.echo(f"namespace {name.name!r} made from the {template} template: try `tooldock test {name}`", err=True)
