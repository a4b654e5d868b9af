"""The MCP Registry client (`tooldock.upstream.registry`) against a fake registry on 127.0.0.1, and the step
from a registry entry to the `UpstreamServer` that runs it."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
from typing import Any

import pytest
from fixtures.registry_server import BRAVE, DOCS_REMOTE, EVERYTHING, GITHUB_OCI, TIME, FakeRegistry, registry_server

from tooldock.errors import RegistryError
from tooldock.namespace.toolsfile import UpstreamServer, parse_tools_file
from tooldock.upstream.registry import (
    DEFAULT_REGISTRY_URL,
    InvalidQuery,
    RegistryClient,
    registry_url,
    requirements,
    to_upstream,
)


def search(url: str, query: str, limit: int = 10, **kw: Any) -> list[dict[str, Any]]:
    return asyncio.run(RegistryClient(url, **kw).search(query, limit))


def get(url: str, name: str, version: str = "latest", **kw: Any) -> dict[str, Any]:
    return asyncio.run(RegistryClient(url, **kw).get(name, version))


# -- registry_url ------------------------------------------------------------------------------------------------


def test_registry_url_defaults_and_strips_the_trailing_slash() -> None:
    assert registry_url({}) == DEFAULT_REGISTRY_URL
    assert registry_url({"MCP_REGISTRY_URL": "  "}) == DEFAULT_REGISTRY_URL
    assert registry_url({"MCP_REGISTRY_URL": "http://127.0.0.1:8080/"}) == "http://127.0.0.1:8080"
    assert registry_url({"MCP_REGISTRY_URL": "https://reg.example.com/mcp//"}) == "https://reg.example.com/mcp"


def test_registry_url_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_REGISTRY_URL", "http://127.0.0.1:9/")
    assert registry_url() == "http://127.0.0.1:9"
    assert RegistryClient().base_url == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("ftp://registry.example.com", "http:// or https://"),
        ("registry.example.com", "http:// or https://"),
        ("http://", "http:// or https://"),
        ("https://user:hunter2@registry.example.com", "credentials"),
        ("https://token@registry.example.com", "credentials"),
        ("https://registry.example.com/?x=1", "without ?query"),
        ("https://registry.example.com:99999", "not a valid URL"),
        ("http://[::1", "not a valid URL"),
    ],
)
def test_bad_registry_urls_are_refused(value: str, says: str) -> None:
    with pytest.raises(RegistryError, match="MCP_REGISTRY_URL") as caught:
        registry_url({"MCP_REGISTRY_URL": value})
    assert says in str(caught.value)
    assert "hunter2" not in str(caught.value)
    with pytest.raises(RegistryError):
        RegistryClient(value)


# -- search ------------------------------------------------------------------------------------------------------


def test_search_returns_the_seed_shape_plus_packages_and_remotes() -> None:
    with FakeRegistry() as fake:
        hits = search(fake.url, "time")
    assert [h["name"] for h in hits] == ["io.github.modelcontextprotocol/server-time"]  # latest version only
    hit = hits[0]
    assert hit["description"] == "Time and timezone conversion capabilities"
    assert hit["package"] == "mcp-server-time" and hit["package_type"] == "pypi"
    assert hit["source_url"] == "https://github.com/modelcontextprotocol/servers"
    assert hit["version"] == "2026.10.19" and hit["status"] == "active"
    assert hit["packages"] == [
        {
            "registryType": "pypi",
            "identifier": "mcp-server-time",
            "version": "2026.10.19",
            "runtimeHint": "uvx",
            "transport": {"type": "stdio"},
            "packageArguments": [
                {
                    "type": "named",
                    "name": "--local-timezone",
                    "description": "IANA timezone used when none is given",
                    "default": "Europe/Paris",
                }
            ],
        }
    ]
    assert hit["remotes"] == []
    json.dumps(hits)  # plain JSON, ready for an MCP tool result
    assert fake.requests == ["/v0.1/servers?search=time&limit=10&version=latest"]


def test_search_matches_descriptions_and_describes_remotes() -> None:
    with registry_server() as url:
        hits = search(url, "DOCUMENTATION")
    assert [h["name"] for h in hits] == ["com.example/docs-search"]
    assert hits[0]["package_type"] == "remote" and hits[0]["package"] == "https://mcp.example.com/docs/mcp"
    assert hits[0]["source_url"] == "" and hits[0]["title"] == "Docs search"
    assert [r["type"] for r in hits[0]["remotes"]] == ["streamable-http", "sse"]
    assert hits[0]["remotes"][0]["headers"][0] == {
        "name": "Authorization",
        "description": "Bearer token for the docs index",
        "isRequired": True,
        "value": "Bearer {token}",
        "variables": {"token": {"description": "API token", "isRequired": True, "isSecret": True}},
    }


def test_search_lists_secrets_of_packages() -> None:
    with registry_server() as url:
        (hit,) = search(url, "brave")
    assert hit["source_url"] == "https://github.com/brave/brave-search-mcp-server"
    env = hit["packages"][0]["environmentVariables"]
    assert env[0] == {
        "name": "BRAVE_API_KEY",
        "description": "Brave Search API key",
        "isRequired": True,
        "isSecret": True,
    }


def test_search_follows_cursors_up_to_the_limit() -> None:
    with FakeRegistry(page_size=2) as fake:
        everything = search(fake.url, "io.", limit=100)
        three = search(fake.url, "io.", limit=3)
        nothing = search(fake.url, "no-such-server")
    names = [h["name"] for h in everything]
    assert len(names) == len(set(names)) == 4  # four latest io.* servers; the old server-time version is not listed
    assert [h["name"] for h in three] == names[:3]
    assert nothing == []
    cursors = [r for r in fake.requests if "cursor=" in r]
    assert cursors and all("cursor=io.github." in r for r in cursors)


def test_search_keeps_the_latest_version_when_the_registry_lists_several() -> None:
    old, new = copy.deepcopy(TIME), copy.deepcopy(TIME)
    old["server"]["version"] = "1.0.0"
    old["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] = False
    with FakeRegistry() as fake:  # a registry that ignores version=latest
        fake.respond_with(200, json.dumps({"servers": [new, old], "metadata": {"count": 2}}).encode())
        (hit,) = search(fake.url, "time")
        assert hit["version"] == "2026.10.19"
        fake.respond_with(200, json.dumps({"servers": [old, new]}).encode())
        (hit,) = search(fake.url, "time")
        assert hit["version"] == "2026.10.19"


@pytest.mark.parametrize(
    ("query", "limit"),
    [("", 10), ("   ", 10), ("x" * 201, 10), ("a\nb", 10), ("time", 0), ("time", 101), ("time", True)],
)
def test_bad_queries_are_refused_before_anything_is_sent(query: str, limit: int) -> None:
    with FakeRegistry() as fake:
        with pytest.raises(InvalidQuery):
            search(fake.url, query, limit)
        assert fake.requests == []


def test_bad_names_and_versions_are_refused() -> None:
    with FakeRegistry() as fake:
        for name in ("", "no-slash", "a/b c", "../etc/passwd", "x" * 300):
            with pytest.raises(InvalidQuery, match="server name"):
                get(fake.url, name)
        for version in ("", "1.0\n", "x" * 256):
            with pytest.raises(InvalidQuery, match="version"):
                get(fake.url, "io.github.a/b", version)
        assert fake.requests == []
    assert issubclass(InvalidQuery, RegistryError)


# -- get ---------------------------------------------------------------------------------------------------------


def test_get_latest_and_an_exact_version() -> None:
    with FakeRegistry() as fake:
        latest = get(fake.url, "io.github.modelcontextprotocol/server-time")
        old = get(fake.url, "io.github.modelcontextprotocol/server-time", "2025.9.25")
    assert latest == TIME
    assert old["server"]["version"] == "2025.9.25"
    assert old["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] is False
    assert fake.requests == [
        "/v0.1/servers/io.github.modelcontextprotocol%2Fserver-time/versions/latest",
        "/v0.1/servers/io.github.modelcontextprotocol%2Fserver-time/versions/2025.9.25",
    ]


def test_the_v0_paths_answer_the_same() -> None:
    with FakeRegistry() as fake:
        entry = get(fake.url, EVERYTHING["server"]["name"], api_version="v0")
        hits = search(fake.url, "everything", api_version="v0")
    assert entry == EVERYTHING and hits[0]["name"] == EVERYTHING["server"]["name"]
    assert all(r.startswith("/v0/servers") for r in fake.requests)


def test_get_an_unknown_server_says_so_and_suggests_search() -> None:
    with registry_server() as url:
        with pytest.raises(RegistryError, match=r"has no server io\.github\.nobody/nothing; search") as caught:
            get(url, "io.github.nobody/nothing")
        assert not isinstance(caught.value, InvalidQuery)
        with pytest.raises(RegistryError, match=r"version 9\.9\.9"):
            get(url, "io.github.modelcontextprotocol/server-time", "9.9.9")


# -- a registry that fails -----------------------------------------------------------------------------------


def test_an_unreachable_registry() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RegistryError) as caught:
        search(f"http://127.0.0.1:{port}", "time")
    message = str(caught.value)
    assert f"cannot reach the MCP Registry at http://127.0.0.1:{port}/v0.1/servers" in message
    assert "MCP_REGISTRY_URL" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_slow_registry_times_out() -> None:
    with FakeRegistry() as fake:
        fake.respond_with(200, b"{}", delay=2)
        with pytest.raises(RegistryError, match=r"did not answer within 0\.3s; check MCP_REGISTRY_URL"):
            get(fake.url, "io.github.a/b", timeout=0.3)


@pytest.mark.parametrize(
    ("body", "content_type", "says"),
    [
        (b"<html>Welcome to nginx</html>", "text/html", "did not answer JSON"),
        (b"", "application/json", "did not answer JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json", "did not answer JSON"),
        (b'{"items": []}', "application/json", "without a 'servers' list"),
        (b'{"servers": {}}', "application/json", "without a 'servers' list"),
        (b'{"servers": [{"server": {"description": "no name"}}]}', "application/json", "no server name"),
        (b'{"servers": [], "metadata": "x"}', "application/json", "without a 'servers' list"),
    ],
)
def test_unusable_list_answers(body: bytes, content_type: str, says: str) -> None:
    with FakeRegistry() as fake:
        fake.respond_with(200, body, content_type)
        with pytest.raises(RegistryError, match=says) as caught:
            search(fake.url, "time")
    assert fake.url in str(caught.value) and "MCP_REGISTRY_URL" in str(caught.value)


@pytest.mark.parametrize("body", [b"[]", b'"text"', b'{"server": {"name": ""}}', b"{}"])
def test_unusable_get_answers(body: bytes) -> None:
    with FakeRegistry() as fake:
        fake.respond_with(200, body)
        with pytest.raises(RegistryError, match="no server name"):
            get(fake.url, "io.github.a/b")


@pytest.mark.parametrize("length", [True, False])
def test_an_oversized_answer_is_refused(length: bool) -> None:
    huge = json.dumps({"servers": [], "padding": "x" * (6 * 1024 * 1024)}).encode()
    with FakeRegistry() as fake:
        fake.respond_with(200, huge, length=length)
        with pytest.raises(RegistryError, match="answered more than 5242880 bytes"):
            search(fake.url, "time")
        with pytest.raises(RegistryError, match="answered more than 1000 bytes"):
            search(fake.url, "time", max_bytes=1000)


def test_error_statuses_carry_the_registry_message() -> None:
    with FakeRegistry() as fake:
        body = json.dumps({"title": "Internal Server Error", "status": 500, "detail": "Failed to get registry list"})
        fake.respond_with(500, body.encode(), "application/problem+json")
        with pytest.raises(RegistryError, match="answered HTTP 500: Failed to get registry list; check"):
            search(fake.url, "time")
        fake.respond_with(502, b"Bad gateway\r\nmore", "text/plain")
        with pytest.raises(RegistryError, match="answered HTTP 502: Bad gateway; check"):
            search(fake.url, "time")
        fake.respond_with(404, b"")  # no registry API at this URL (a 404 on a list is not "no such server")
        with pytest.raises(
            RegistryError, match=r"/v0\.1/servers\?search=time&limit=10&version=latest answered HTTP 404;"
        ):
            search(fake.url, "time")


def test_a_registry_below_a_path_prefix() -> None:
    with FakeRegistry() as fake:
        with pytest.raises(RegistryError, match="HTTP 404"):
            search(fake.url + "/registry/", "time")
        assert fake.requests == ["/registry/v0.1/servers?search=time&limit=10&version=latest"]


# -- to_upstream and requirements -----------------------------------------------------------------------------


def toml_round_trip(spec: UpstreamServer) -> UpstreamServer:
    """The spec as tools.toml would hold it, parsed back: what to_upstream makes must be a valid [[servers]]."""
    table: dict[str, Any] = {"namespace": spec.namespace}
    if spec.command:
        table["command"] = spec.command
        if spec.env:
            table["env"] = dict(spec.env)
    else:
        table |= {"url": spec.url, "transport": spec.transport}
        if spec.headers:
            table["headers"] = dict(spec.headers)
    return parse_tools_file({"servers": [table]}).servers[0]


def test_an_npm_stdio_package() -> None:
    spec = to_upstream(EVERYTHING, "everything")
    assert spec == UpstreamServer(
        namespace="everything", command="npx -y @modelcontextprotocol/server-everything@2026.8.31"
    )
    assert spec.argv == ["npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"]
    assert toml_round_trip(spec) == spec
    assert requirements(EVERYTHING) == {
        "name": "io.github.modelcontextprotocol/server-everything",
        "version": "2026.8.31",
        "kind": "npm",
        "runtime": "npx",
        "secrets": [],
        "missing": [],
    }
    assert to_upstream(EVERYTHING["server"], "") == UpstreamServer(
        namespace="", command=spec.command
    )  # bare server.json


def test_a_pypi_package_with_a_named_argument() -> None:
    spec = to_upstream(TIME, "time")
    assert spec.argv == ["uvx", "mcp-server-time==2026.10.19", "--local-timezone", "Europe/Paris"]
    assert spec.env == () and spec.transport == "stdio"
    assert toml_round_trip(spec) == spec
    assert requirements(TIME)["runtime"] == "uvx" and requirements(TIME)["kind"] == "pypi"


def test_secrets_defaults_and_missing_environment_variables() -> None:
    spec = to_upstream(BRAVE, "brave")
    assert spec.argv == ["npx", "-y", "@brave/brave-search-mcp-server@2.0.1", "--stdio"]
    assert spec.env == (("BRAVE_API_KEY", "${secret:BRAVE_API_KEY}"), ("BRAVE_MCP_LOG_LEVEL", "info"))
    assert spec.secret_names() == ("BRAVE_API_KEY",)
    assert toml_round_trip(spec) == spec
    needs = requirements(BRAVE)
    assert needs["secrets"] == [{"name": "BRAVE_API_KEY", "description": "Brave Search API key", "required": True}]
    assert needs["missing"] == [
        {
            "name": "BRAVE_SEARCH_COUNTRY",
            "description": "Two-letter country code",
            "where": "environmentVariables",
            "secret": False,
        }
    ]


def test_a_remote_with_a_secret_header() -> None:
    spec = to_upstream(DOCS_REMOTE, "docs")
    assert spec == UpstreamServer(
        namespace="docs",
        url="https://mcp.example.com/docs/mcp",
        transport="streamable-http",
        headers=(("Authorization", "Bearer ${secret:TOKEN}"), ("X-Docs-Space", "public")),
    )
    assert toml_round_trip(spec) == spec
    needs = requirements(DOCS_REMOTE)
    assert needs["kind"] == "remote" and needs["runtime"] is None and needs["missing"] == []
    assert needs["secrets"] == [{"name": "TOKEN", "description": "API token", "required": True}]
    sse_only = copy.deepcopy(DOCS_REMOTE)
    sse_only["server"]["remotes"] = sse_only["server"]["remotes"][1:]
    assert to_upstream(sse_only, "docs") == UpstreamServer(
        namespace="docs", url="https://mcp.example.com/docs/sse", transport="sse"
    )


def test_a_package_is_preferred_to_a_remote() -> None:
    both = copy.deepcopy(TIME)
    both["server"]["remotes"] = DOCS_REMOTE["server"]["remotes"]
    assert to_upstream(both, "t").command.startswith("uvx mcp-server-time==")


def test_oci_and_other_packages_are_refused() -> None:
    with pytest.raises(RegistryError, match="oci packages are not supported yet"):
        to_upstream(GITHUB_OCI, "github")
    with pytest.raises(RegistryError, match="oci packages are not supported yet"):
        requirements(GITHUB_OCI)
    with_remote = copy.deepcopy(GITHUB_OCI)
    with_remote["server"]["remotes"] = [{"type": "streamable-http", "url": "https://api.githubcopilot.com/mcp/"}]
    assert to_upstream(with_remote, "gh").url == "https://api.githubcopilot.com/mcp/"
    nuget = {"name": "io.github.a/b", "packages": [{"registryType": "nuget", "identifier": "A.B", "version": "1.0"}]}
    with pytest.raises(RegistryError, match=r"no stdio npm or PyPI package .* \(it offers: nuget\)"):
        to_upstream(nuget, "b")
    http_package = {
        "name": "io.github.a/b",
        "packages": [
            {
                "registryType": "npm",
                "identifier": "b",
                "transport": {"type": "streamable-http", "url": "http://localhost:3000/mcp"},
            }
        ],
    }
    with pytest.raises(RegistryError, match="it offers: npm"):
        to_upstream(http_package, "b")
    with pytest.raises(RegistryError, match="the entry is not a registry entry") as caught:
        to_upstream({"server": {"description": "x"}}, "b")
    assert "MCP_REGISTRY_URL" not in str(caught.value)


def test_arguments_quoting_variables_and_secrets_on_the_command_line() -> None:
    server: dict[str, Any] = {
        "name": "io.github.a/fs",
        "version": "1.0.0",
        "packages": [
            {
                "registryType": "npm",
                "identifier": "@a/fs-server",
                "version": "1.0.0",
                "runtimeHint": "npx",
                "runtimeArguments": [{"type": "named", "name": "--node-options", "value": "--max-old-space-size=512"}],
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {"type": "positional", "value": "/data/my files"},
                    {"type": "positional", "valueHint": "root", "isRequired": True, "description": "Folder to serve"},
                    {"type": "named", "name": "--mode", "value": "{mode}", "variables": {"mode": {"default": "ro"}}},
                    {"type": "named", "name": "--token", "isSecret": True, "isRequired": True, "description": "Token"},
                    {"type": "named", "name": "--level", "description": "optional, no value: left out"},
                    {"type": "named", "name": "--key", "value": "{key}", "variables": {"key": {"isSecret": True}}},
                    {"type": "positional", "value": "$(rm -rf ~); echo"},
                ],
            }
        ],
    }
    spec = to_upstream(server, "fs")
    assert spec.argv == [
        "npx",
        "-y",
        "--node-options",
        "--max-old-space-size=512",
        "@a/fs-server@1.0.0",
        "/data/my files",
        "--mode",
        "ro",
        "$(rm -rf ~); echo",
    ]
    assert "'$(rm -rf ~); echo'" in spec.command  # shell-quoted
    assert "secret" not in spec.command
    assert toml_round_trip(spec) == spec
    needs = requirements(server)
    assert needs["secrets"] == []  # --key's secret variable is not used: it would show on the command line
    missing = needs["missing"]
    assert [(m["name"], m["where"], m["secret"]) for m in missing] == [
        ("root", "packageArguments", False),
        ("--token", "packageArguments", True),
        ("--key", "packageArguments", True),
    ]
    other_runtime = copy.deepcopy(server)
    other_runtime["packages"][0]["runtimeHint"] = "bunx"  # runtime arguments for another runtime are dropped
    assert to_upstream(other_runtime, "fs").argv[:3] == ["npx", "-y", "@a/fs-server@1.0.0"]


def test_an_entry_cannot_smuggle_secret_references_or_bad_names() -> None:
    def npm(**package: Any) -> dict[str, Any]:
        base = {"registryType": "npm", "identifier": "x", "version": "1", "transport": {"type": "stdio"}}
        return {"name": "io.github.a/x", "packages": [base | package]}

    steal = npm(environmentVariables=[{"name": "LOG", "default": "${secret:OTHER_NAMESPACE_KEY}"}])
    with pytest.raises(RegistryError, match=r"LOG holds a line break or a \$\{secret:...\} reference"):
        to_upstream(steal, "x")
    with pytest.raises(RegistryError, match="line break"):
        to_upstream(npm(environmentVariables=[{"name": "A", "value": "1\nB=2"}]), "x")
    with pytest.raises(RegistryError, match="invalid name 'BAD-NAME'"):
        to_upstream(npm(environmentVariables=[{"name": "BAD-NAME", "default": "1"}]), "x")
    with pytest.raises(RegistryError, match="not a valid package name"):
        to_upstream(npm(identifier="x; rm -rf /"), "x")
    with pytest.raises(RegistryError, match="invalid flag name"):
        to_upstream(npm(packageArguments=[{"type": "named", "name": "--a b", "value": "1"}]), "x")
    remote: dict[str, Any] = {
        "name": "io.github.a/r",
        "remotes": [{"type": "streamable-http", "url": "https://{tenant}.example.com/mcp"}],
    }
    with pytest.raises(RegistryError, match="needs values"):
        to_upstream(remote, "r")
    remote["remotes"][0]["url"] = "https://user:pw@example.com/mcp"
    with pytest.raises(RegistryError, match="credentials"):
        to_upstream(remote, "r")
    remote["remotes"][0]["url"] = "file:///etc/passwd"
    with pytest.raises(RegistryError, match="http:// or https://"):
        to_upstream(remote, "r")
    with pytest.raises(InvalidQuery, match="prefix"):
        to_upstream(EVERYTHING, "bad prefix")


def test_search_results_feed_get_and_to_upstream() -> None:
    """The flow a manager tool follows: search, pick a name, get it, turn it into a [[servers]] table."""

    async def flow(url: str) -> tuple[UpstreamServer, dict[str, Any]]:
        client = RegistryClient(url)
        (hit,) = await client.search("brave")
        entry = await client.get(hit["name"])
        return to_upstream(entry, "brave"), requirements(entry)

    with registry_server() as url:
        spec, needs = asyncio.run(flow(url))
    assert spec.command == "npx -y @brave/brave-search-mcp-server@2.0.1 --stdio"
    assert [s["name"] for s in needs["secrets"]] == ["BRAVE_API_KEY"]
