"""The manager's installer tools (seed 000's "Installer (registry integration)" and `install_pip_packages`):
find servers in the MCP Registry and either start a translation (the analysis is the builder's,
`translate`) or, ToolDock's `mode="upstream"`, serve the server as it is behind a namespace.
Descriptions follow the seed's text; ToolDock's additions are said where they are."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer

from tooldock.errors import InvalidInput
from tooldock.manager import installer
from tooldock.manager.context import JsonObject, Manager, edge
from tooldock.manager.ownenv import OwnEnvironment

Mode = Literal["translate", "upstream"]
# Fetches a registry entry's source and analyzes it: the analysis, plus "source" and "next_steps".
Translate = Callable[[dict[str, Any]], Awaitable[JsonObject]]


def register(server: MCPServer, m: Manager, translate: Translate | None = None) -> None:
    ws = m.workspace
    own = OwnEnvironment(m.settings.runtime.state_dir / "manager" / "env")
    own.activate()  # what earlier install_pip_packages calls installed

    @server.tool()
    @edge
    async def install_pip_packages(packages: list[str]) -> JsonObject:
        """Install Python packages into the manager's own environment. Use this only if you need a package for
        analysis (e.g. a parser for a specific language). For namespace tool dependencies, use add_requirement
        instead. (ToolDock: a virtualenv of the manager's own under its data directory, never the gateway's or
        a namespace's; index packages only, no URLs or pip options.)

        Args:
            packages: Package specifiers. Example: ["tree-sitter", "tree-sitter-typescript"]

        Returns {"installed": true, "packages": ["tree-sitter", "tree-sitter-typescript"]}"""
        return await own.install(packages)

    @server.tool()
    @edge
    async def search_registry(query: str) -> list[JsonObject]:
        """Search the MCP server registry for installable tool servers. Returns a list of matching servers with
        their name, description, package type, and source URL. Use this when the user wants to find and install
        existing MCP servers. (ToolDock: the registry at MCP_REGISTRY_URL, default the official one; each result
        also has title, version, status, and its packages and remotes with the inputs and secrets they need.)

        Args:
            query: Search term. Examples: "github", "slack", "database"

        Returns a list of objects: [{"name": "io.github.modelcontextprotocol/server-github",
        "description": "GitHub API tools", "package": "@modelcontextprotocol/server-github",
        "package_type": "npm", "source_url": "https://github.com/modelcontextprotocol/servers", ...}]"""
        return await installer.search_registry(query)

    @server.tool()
    @edge
    async def install_from_registry(
        package: str,
        namespace: str,
        mode: Mode = "translate",
        prefix: str | None = None,
        env: dict[str, str] | None = None,
    ) -> JsonObject:
        """Begin the translation process for a package from the MCP registry. This clones/downloads the source
        code and runs analyze_repo on it. It does NOT automatically translate — you must then use
        read_repo_file and write_tool to translate each tool to Python.

        ToolDock's mode="upstream" instead serves the server as it is, behind the namespace: it adds the
        registry entry to the namespace's tools.toml (run with npx / uvx, or its remote URL), prepares a
        placeholder for each secret it needs, and returns what to tell the user; after reload_core() its tools
        work at once (prefixed "<prefix>_"), and translation can follow later. The namespace must be new or
        already hold upstream servers (not tool files).

        Args:
            package: Package name from search results. Example: "@modelcontextprotocol/server-github"
                (the registry name, e.g. "io.github.modelcontextprotocol/server-github", works too)
            namespace: Target namespace name for the translated tools. Example: "github"
            mode: "translate" (default, the seed's behaviour) or "upstream".
            prefix: upstream mode: the prefix of its tool names (default: from the server's name).
            env: upstream mode: values for the non-secret inputs the server requires, e.g. {"ROOT_DIR": "/data"}.
                Never put a secret here: secrets are set by the user in a terminal.

        Returns (translate): the same as analyze_repo, plus "namespace", "source" (what was fetched) and
        "next_steps". (upstream): {"namespace", "mode", "server", "version", "prefix", "runs", "tools_toml",
        "secrets": [{"key", "status", "instructions"}], "next_steps"}.

        Next steps: Follow the translation workflow (read source → write Python tools → test)."""
        entry = await installer.find_entry(package)
        if mode == "upstream":
            async with m.writes:
                return installer.install_upstream(ws, m.store, entry, namespace, prefix, env)
        if mode != "translate":
            raise InvalidInput(f"mode must be 'translate' or 'upstream', got {mode!r}")
        name = ws.namespace_name(namespace)
        if translate is None:
            raise InvalidInput(
                "mode='translate' needs the repository analysis (analyze_repo), which this ToolDock does not have "
                "yet; use mode='upstream' to serve the server as it is"
            )
        return {**await translate(entry), "namespace": name}
