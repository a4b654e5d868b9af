"""The README is the user's manual: every CLI option, setting and endpoint must be in it."""

from pathlib import Path

import click
import pytest

from tooldock.builder import ENV_VARS as BUILD_ENV_VARS
from tooldock.cli.relay import ENV_VARS as RELAY_CLIENT_ENV_VARS
from tooldock.keys import ENV_VARS as KEYS_ENV_VARS
from tooldock.runtime.relay.config import ENV_VARS as RELAY_ENV_VARS
from tooldock.cli import main
from tooldock.manager.settings import ENV_VARS as MANAGER_ENV_VARS
from tooldock.manager.analysis import ENV_VARS as ANALYSIS_ENV_VARS
from tooldock.runtime.settings import ENV_VARS
from tooldock.secrets import ENV_VARS as SECRETS_ENV_VARS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _options(group: click.Group = main, prefix: str = ""):
    for name, command in group.commands.items():
        yield prefix + name, None
        for param in command.params:
            if isinstance(param, click.Option):
                yield prefix + name, max(param.opts, key=len)
        if isinstance(command, click.Group):
            yield from _options(command, f"{prefix}{name} ")


@pytest.mark.parametrize("command, option", list(_options()))
def test_cli_commands_and_options_are_documented(command, option):
    assert f"tooldock {command}" in README
    if option:
        assert f"`{option}`" in README, f"{option} of `tooldock {command}` is not in the README"


@pytest.mark.parametrize("variable", ENV_VARS + BUILD_ENV_VARS + SECRETS_ENV_VARS + MANAGER_ENV_VARS + KEYS_ENV_VARS
                         + RELAY_ENV_VARS + RELAY_CLIENT_ENV_VARS + ANALYSIS_ENV_VARS)
def test_settings_are_documented(variable):
    assert f"`{variable}`" in README


def test_endpoints_are_documented():
    from tooldock.runtime.http.rest import create_router
    from tooldock.runtime.settings import Settings

    router = create_router(None, Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16}))
    # As a user writes them: `/tools/{name}`, not Starlette's `{name:path}` (a tool name may hold "/").
    paths = {route.path.replace(":path}", "}") for route in router.routes} | {"/mcp"}
    assert len(paths) >= 7
    for path in paths:
        assert f"`{path}`" in README, f"endpoint {path} is not in the README"


def test_quick_start_commands_match_ci():
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "exec ./scripts/test" in ci
    assert "```bash\n./scripts/test\n```" in README
    assert ".venv/bin/tooldock serve examples" in README


def _manager_tools() -> list[str]:
    import asyncio

    from tooldock.manager.app import build_manager, mcp_server
    from tooldock.manager.settings import ManagerSettings

    settings = ManagerSettings.from_env(Path("."), env={"TOOLDOCK_BEARER_TOKEN": "x" * 16})
    server = mcp_server(build_manager(settings, Path("."), 8001))
    return [tool.name for tool in asyncio.run(server.list_tools())]


@pytest.mark.parametrize("tool", _manager_tools())
def test_every_manager_tool_is_documented(tool):
    assert f"| `{tool}` |" in README, f"manager tool {tool} has no row in the README's manager table"


def test_every_tools_toml_key_is_documented():
    from tooldock.namespace.toolsfile import SERVER_KEYS, TOP_KEYS

    for key in (*TOP_KEYS, *SERVER_KEYS):
        assert f"| `{key}` |" in README, f"tools.toml key {key} has no row in the README's upstream table"
