"""`registry = "..."` servers in tools.toml (seed 003): the entry is fetched from an MCP Registry (a fake one on
loopback, MCP_REGISTRY_URL), turned into a command or a remote, run with the namespace's secrets, kept on disk
for when the registry is down; and every way it cannot run is reported on the namespace, naming what to do."""

from __future__ import annotations

import copy
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import Gateway, tooldock_cli
from fixtures.registry_server import DOCS_REMOTE, TIME, FakeRegistry
from test_upstream import DEMO, run, session, text, write_upstream
from test_upstream_http import UPSTREAM_TOKEN, secrets_set, served  # noqa: F401  (served: a fixture)

pytestmark = pytest.mark.slow

ENV_SECRET = "registry-env-secret-7f3e1d"


def demo_entry() -> dict[str, Any]:
    """A PyPI package entry; the test's `uvx` on PATH runs the demo server with what it was given."""
    entry = copy.deepcopy(TIME)
    entry["server"].update(name="io.github.example/demo", version="1.2.3", description="the demo server")
    entry["server"]["packages"] = [
        {
            "registryType": "pypi",
            "identifier": "demo-server",
            "version": "1.2.3",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "named", "name": "--flavor", "value": "registry"}],
            "environmentVariables": [
                {"name": "SECRET_VALUE", "description": "a token", "isRequired": True, "isSecret": True},
                {"name": "DEMO_MODE", "description": "which mode", "isRequired": True},
            ],
        }
    ]
    return entry


def remote_entry(url: str) -> dict[str, Any]:
    entry = copy.deepcopy(DOCS_REMOTE)
    entry["server"]["name"] = "io.github.example/calc-remote"
    entry["server"]["remotes"][0]["url"] = url
    entry["server"]["remotes"][0]["headers"] = entry["server"]["remotes"][0]["headers"][:1]  # Authorization only
    return entry


@pytest.fixture
def uvx_shim(tmp_path: Path) -> tuple[Path, Path]:
    """A `uvx` that records its arguments and then runs the demo server (no download from PyPI in a test)."""
    bin_dir, args_file = tmp_path / "bin", tmp_path / "uvx-args.txt"
    bin_dir.mkdir()
    shim = bin_dir / "uvx"
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{args_file}"\nshift\nexec {DEMO} "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return bin_dir, args_file


def store_env(tmp: Path) -> dict[str, str]:
    store = {
        "TOOLDOCK_SECRETS_DIR": str(tmp / "store"),
        "TOOLDOCK_AGE_KEY_FILE": str(tmp / "age.key"),
        "TOOLDOCK_STATE_DIR": str(tmp / "state"),  # its own registry cache
    }
    tooldock_cli("secrets", "init", env=store)
    return store


def server_status(gw: Gateway, namespace: str) -> dict[str, Any]:
    """The namespace's first server once it has started or failed (a failed one is retried: caught as seen)."""
    seen: list[dict[str, Any]] = []

    def settled() -> bool:
        seen.append(gw.namespace(namespace)["servers"][0])
        return seen[-1]["state"] != "starting"

    gw.wait_for(settled, what=f"{namespace} to start")
    return seen[-1]


def test_a_registry_package_runs_with_its_inputs_and_secrets(tmp_path, make_gateway, uvx_shim):
    bin_dir, args_file = uvx_shim
    store = store_env(tmp_path)
    secrets_set(store, "SECRET_VALUE", ENV_SECRET, "reg")
    folder = write_upstream(
        tmp_path / "src",
        "reg",
        'active_toolsets = ["demo_*"]\n[[servers]]\nnamespace = "demo"\nregistry = "io.github.example/demo"\n'
        'version = "1.2.3"\nenv = { DEMO_MODE = "strict" }\n',
    )
    (folder / "tooldock.yaml").write_text("secrets: [SECRET_VALUE]\n")
    with FakeRegistry([demo_entry()]) as fake:
        env = {**store, "MCP_REGISTRY_URL": fake.url, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        gw = make_gateway(tmp_path / "src", env=env)
        server = server_status(gw, "reg")
        assert server["state"] == "ready", server
        assert server["registry"] == "io.github.example/demo" and server["version"] == "1.2.3"
        assert server["target"] == "uvx demo-server==1.2.3 --flavor registry"
        assert any("/v0.1/servers/io.github.example%2Fdemo/versions/1.2.3" in r for r in fake.requests)
    assert args_file.read_text().split() == ["demo-server==1.2.3", "--flavor", "registry"]

    async def check() -> None:
        async with session(gw, "reg") as client:
            assert text(await client.call_tool("demo_add", {"a": 2, "b": 3})) == "5"
            assert text(await client.call_tool("demo_getenv", {"name": "DEMO_MODE"})) == "strict"
            # the server has the value (what it answers is exactly it, masked by the gateway)
            assert text(await client.call_tool("demo_getenv", {"name": "SECRET_VALUE"})) == "***"

    run(check())
    assert ENV_SECRET not in str(gw.namespace("reg")) and ENV_SECRET not in gw.logs


def test_a_registry_remote_runs_with_its_secret_header(tmp_path, make_gateway, served):  # noqa: F811
    store = store_env(tmp_path)
    secrets_set(store, "TOKEN", UPSTREAM_TOKEN, "remote")
    folder = write_upstream(
        tmp_path / "src", "remote", 'active_toolsets = ["calc_*"]\n[[servers]]\nnamespace = "calc"\n'
        'registry = "io.github.example/calc-remote"\n',
    )
    (folder / "tooldock.yaml").write_text("secrets: [TOKEN]\n")
    with FakeRegistry([remote_entry(f"{served.url}/ns/multi-tool/mcp")]) as fake:
        gw = make_gateway(tmp_path / "src", env={**store, "MCP_REGISTRY_URL": fake.url})
        server = server_status(gw, "remote")
    assert server["state"] == "ready", server
    assert server["transport"] == "streamable-http" and server["target"] == f"{served.url}/ns/multi-tool/mcp"

    async def check() -> None:
        async with session(gw, "remote") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert "calc_add" in names
            assert float(text(await client.call_tool("calc_add", {"a": 20, "b": 22}))) == 42

    run(check())
    assert UPSTREAM_TOKEN not in str(gw.namespace("remote")) and UPSTREAM_TOKEN not in gw.logs


def test_a_registry_that_is_down_uses_the_entry_fetched_before(tmp_path, make_gateway, uvx_shim):
    bin_dir, _ = uvx_shim
    store = store_env(tmp_path)
    secrets_set(store, "SECRET_VALUE", ENV_SECRET, "reg")
    folder = write_upstream(
        tmp_path / "src", "reg", '[[servers]]\nnamespace = "demo"\nregistry = "io.github.example/demo"\n'
        'env = { DEMO_MODE = "x" }\n',
    )
    (folder / "tooldock.yaml").write_text("secrets: [SECRET_VALUE]\n")
    env = {**store, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    with FakeRegistry([demo_entry()]) as fake:
        first = make_gateway(tmp_path / "src", env={**env, "MCP_REGISTRY_URL": fake.url})
        assert server_status(first, "reg")["state"] == "ready"
        first.stop()
        down = fake.url
    # the registry is gone now: the second gateway starts the server from the entry it kept
    second = make_gateway(tmp_path / "src", env={**env, "MCP_REGISTRY_URL": down})
    server = server_status(second, "reg")
    assert server["state"] == "ready", server
    assert "using the entry fetched before (version 1.2.3)" in second.logs
    assert "cannot reach the MCP Registry" in second.logs


def test_an_unreachable_registry_without_a_kept_entry_fails_only_that_namespace(tmp_path, make_gateway):
    store = store_env(tmp_path)
    write_upstream(tmp_path / "src", "reg", '[[servers]]\nnamespace = "x"\nregistry = "io.github.example/nothing"\n')
    write_upstream(tmp_path / "src", "ok", f'[[servers]]\nnamespace = "demo"\ncommand = "{DEMO}"\n')
    with FakeRegistry([]) as fake:
        down = fake.url
    gw = make_gateway(tmp_path / "src", env={**store, "MCP_REGISTRY_URL": down})
    server = server_status(gw, "reg")
    assert server["state"] == "failed"
    assert "cannot reach the MCP Registry" in server["last_error"] and "MCP_REGISTRY_URL" in server["last_error"]
    assert server_status(gw, "ok")["state"] == "ready"


@pytest.mark.parametrize(
    ("toml_extra", "yaml", "says"),
    [
        ("", "secrets: [SECRET_VALUE]\n", "needs values nobody gave: DEMO_MODE (environmentVariables: which mode)"),
        ('env = { DEMO_MODE = "x" }\n', "", "needs the secret(s) SECRET_VALUE (a token), which this namespace does"),
        ('headers = { X = "y" }\n', "", "runs as a local command: give it env in tools.toml, not headers"),
    ],
    ids=["missing-input", "undeclared-secret", "headers-for-a-command"],
)
def test_what_a_registry_entry_lacks_is_named(tmp_path, make_gateway, toml_extra, yaml, says):
    store = store_env(tmp_path)
    folder = write_upstream(
        tmp_path / "src", "reg", f'[[servers]]\nnamespace = "d"\nregistry = "io.github.example/demo"\n{toml_extra}'
    )
    if yaml:
        (folder / "tooldock.yaml").write_text(yaml)
    with FakeRegistry([demo_entry()]) as fake:
        gw = make_gateway(tmp_path / "src", env={**store, "MCP_REGISTRY_URL": fake.url})
        server = server_status(gw, "reg")
    assert server["state"] == "failed" and says in server["last_error"], server


def test_an_unknown_registry_server_says_so(tmp_path, make_gateway):
    store = store_env(tmp_path)
    write_upstream(tmp_path / "src", "reg", '[[servers]]\nnamespace = "d"\nregistry = "io.github.example/missing"\n')
    with FakeRegistry([demo_entry()]) as fake:
        gw = make_gateway(tmp_path / "src", env={**store, "MCP_REGISTRY_URL": fake.url})
        server = server_status(gw, "reg")
    assert server["state"] == "failed"
    assert "has no server io.github.example/missing; search for it" in server["last_error"]
