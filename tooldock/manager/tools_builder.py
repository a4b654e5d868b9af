"""The manager's builder and installer tools (seed 000: "Builder (LLM-driven translation)" and "Installer
(registry integration)"): read a repository or a published package without running it, find servers in
the MCP Registry, and either start a translation or (ToolDock's `mode="upstream"`) serve the server as it is.
Descriptions follow the seed's text; ToolDock's additions are said where they are."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from tooldock.errors import InvalidInput
from tooldock.manager.analysis import RepoWorkspace, analyze_tree, fetch_package
from tooldock.manager.context import JsonObject, Manager, edge
from tooldock.manager.tools_install import Translate

NEXT = (
    "Next: follow the translation workflow: read_repo_file for each file that defines tools -> create_namespace "
    "-> add_requirement -> write_tool (one Python file per group of tools) -> install_requirements -> "
    "reload_core -> test_tool for each tool -> check_secrets / prepare_secret for the secrets_needed."
)


def register(server: MCPServer, m: Manager) -> Translate:
    """Register the builder's tools; returns how install_from_registry translates an entry."""
    ws = m.workspace
    data = m.settings.runtime.state_dir / "manager"
    repos = Sources(data / "repos")

    @server.tool()
    @edge
    async def analyze_repo(repo_url: str) -> JsonObject:
        """Clone a git repository and analyze its structure. Returns information about the repository's
        language, framework, what tools it defines, what dependencies it has, and what external APIs it
        calls. Use this as the first step when translating a tool repository to Python.

        The repo is cloned to a temporary working area. It is NOT installed or executed. (ToolDock: a shallow
        clone under the manager's data directory, with size and time limits, reused for the same URL and
        commit; https, ssh, file:// URLs and local paths.)

        Args:
            repo_url: Git repository URL. Examples: "https://github.com/modelcontextprotocol/server-github",
                "https://github.com/someone/my-mcp-server"

        Returns {"repo_url": "...", "language": "typescript", "framework": "mcp-sdk",
        "files": ["src/index.ts", ...], "tools_found": [{"name": "list_issues", "file": "src/tools/issues.ts",
        "description": "List GitHub issues", "parameters": [...]}, ...],
        "dependencies": {"@octokit/rest": "^20.0.0"}, "apis_called": ["api.github.com"],
        "secrets_needed": ["GITHUB_TOKEN"]}"""
        return await repos.analyze(repo_url)

    @server.tool()
    @edge
    async def read_repo_file(repo_url: str, path: str) -> JsonObject:
        """Read the source code of a specific file from a previously analyzed repository. Use this to understand
        the implementation details of each tool before translating it to Python. (ToolDock: text files only,
        inside the clone, size-limited; a published package fetched by install_from_registry is read with the
        repo_url its analysis returned.)

        Args:
            repo_url: Same repo URL used in analyze_repo.
            path: File path within the repo. Example: "src/tools/issues.ts"

        Returns {"path": "src/tools/issues.ts", "content": "import { Octokit } from..."}"""
        return repos.read_file(repo_url, path)

    @server.tool()
    @edge
    async def install_from_repo(repo_url: str, namespace: str) -> JsonObject:
        """Begin the translation process for a git repository URL. Clones the repo and runs analyze_repo. Same
        as install_from_registry but takes a URL instead of a package name.

        Args:
            repo_url: Git URL. Example: "https://github.com/someone/my-tools"
            namespace: Target namespace name.

        Returns: Same as analyze_repo (plus "namespace" and "next_steps").

        Next steps: Follow the translation workflow."""
        name = ws.namespace_name(namespace)
        return {**await repos.analyze(repo_url), "namespace": name, "next_steps": NEXT}

    async def translate(entry: dict[str, Any]) -> JsonObject:
        source, analysis = await _fetch_and_analyze(repos, entry, data)
        return {**analysis, "source": source, "next_steps": NEXT}

    return translate


class Sources(RepoWorkspace):
    """The clones, plus the published packages install_from_registry fetched: read_repo_file reads either,
    a package by the `repo_url` its analysis answered (`npm:<name>@<version>`, `pypi:<name>@<version>`)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.packages: dict[str, Path] = {}

    def clone_dir(self, repo_url: object) -> Path:
        found = self.packages.get(repo_url) if isinstance(repo_url, str) else None
        return found if found is not None else super().clone_dir(repo_url)


async def _fetch_and_analyze(repos: Sources, entry: dict[str, Any], data: Path) -> tuple[JsonObject, JsonObject]:
    """The entry's published package source (npm or PyPI), else its repository."""
    server = entry["server"]
    for package in server.get("packages") or []:
        kind = package.get("registryType")
        if kind in ("npm", "pypi") and isinstance(package.get("identifier"), str):
            fetched = await fetch_package(
                kind, package["identifier"], package.get("version") or None, data / "packages"
            )
            ref = f"{kind}:{fetched.name}@{fetched.version}"
            repos.packages[ref] = fetched.path
            analysis = await asyncio.to_thread(analyze_tree, fetched.path, ref)
            source = {
                "kind": kind,
                "package": fetched.name,
                "version": fetched.version,
                "archive_url": fetched.archive_url,
                "repository": fetched.repository,
            }
            return source, analysis
    repository = (server.get("repository") or {}).get("url")
    if isinstance(repository, str) and repository:
        return {"kind": "repository", "url": repository}, await repos.analyze(repository)
    raise InvalidInput(
        f"{server.get('name')} has no npm or PyPI package and no source repository to analyze; "
        "try install_from_registry with mode='upstream' to serve it as it is"
    )
