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
from tooldock.manager import installer
from tooldock.manager.analysis import RepoWorkspace, analyze_tree, fetch_package
from tooldock.manager.context import JsonObject, Manager, edge
from tooldock.manager.repo_runner import install_repo_upstream
from tooldock.manager.tools_install import Mode, Translate

NEXT = (
    "Next: follow the translation workflow: read_repo_file for each file that defines tools -> create_namespace "
    "-> add_requirement -> write_tool (one Python file per group of tools) -> install_requirements -> "
    "reload_core -> test_tool for each tool -> check_secrets / prepare_secret for the secrets_needed."
)


def register(server: MCPServer, m: Manager) -> Translate:
    """Register the builder's tools; returns how install_from_registry translates an entry."""
    ws = m.workspace
    data = m.settings.runtime.state_dir / "manager"
    cfg = m.settings
    repos = Sources(data / "repos", cfg.clone_timeout, cfg.max_repo_bytes, cfg.max_read_bytes, cfg.max_workspace_bytes)

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
    async def install_from_repo(
        repo_url: str,
        namespace: str,
        mode: Mode = "translate",
        prefix: str | None = None,
        env: dict[str, str] | None = None,
        secrets: list[str] | None = None,
        subfolder: str | None = None,
    ) -> JsonObject:
        """Begin the translation process for a git repository URL. Clones the repo and runs analyze_repo. Same
        as install_from_registry but takes a URL instead of a package name.

        ToolDock's mode="upstream" instead serves the repository's MCP server as it is, behind the namespace:
        it adds a server to the namespace's tools.toml that runs the analyzed commit (package.json "bin" with
        npx, pyproject.toml [project.scripts] with uvx), so after reload_core() its tools work at once
        (prefixed "<prefix>_") and translation can follow later. The namespace must be new or already hold
        upstream servers (not tool files). In a monorepo, name the server's folder with subfolder (Python
        servers only: npm cannot run a package from a folder of a git repository).

        Args:
            repo_url: Git URL. Example: "https://github.com/someone/my-tools"
            namespace: Target namespace name.
            mode: "translate" (default, the seed's behaviour) or "upstream".
            prefix: upstream mode: the prefix of its tool names (default: from the repository's name).
            env: upstream mode: non-secret environment values the server needs, e.g. {"ROOT_DIR": "/data"}.
            secrets: upstream mode: names from the analysis' secrets_needed that the server must get as
                secrets, e.g. ["GITHUB_TOKEN"]: a placeholder is prepared for each and the user sets the
                value in a terminal. Never put a secret's value anywhere.
            subfolder: upstream mode: the server's folder in a monorepo, e.g. "src/time" of
                https://github.com/modelcontextprotocol/servers (default: the repository's root).

        Returns: Same as analyze_repo (plus "namespace" and "next_steps"); upstream: {"namespace", "mode",
        "repo_url", "commit", "subfolder" (when given), "prefix", "runs", "runtime", "secrets_needed",
        "tools_toml", "secrets", "next_steps"}.

        Next steps: Follow the translation workflow."""
        if mode not in ("translate", "upstream"):
            raise InvalidInput(f"mode must be 'translate' or 'upstream', got {mode!r}")
        if mode == "translate" and subfolder not in (None, ""):
            raise InvalidInput("subfolder is for mode='upstream'; to translate, read the folder's files instead")
        name = ws.namespace_name(namespace)
        if mode == "translate":
            return {**await repos.analyze(repo_url), "namespace": name, "next_steps": NEXT}
        values = installer.env_values(env)
        analysis = await repos.analyze(repo_url)
        async with m.writes:
            return install_repo_upstream(ws, m.store, analysis, namespace, prefix, values, secrets, subfolder)

    async def translate(entry: dict[str, Any]) -> JsonObject:
        source, analysis = await _fetch_and_analyze(repos, entry, data)
        return {**analysis, "source": source, "next_steps": NEXT}

    return translate


class Sources(RepoWorkspace):
    """The clones, plus the published packages install_from_registry fetched: read_repo_file reads either,
    a package by the `repo_url` its analysis answered (`npm:<name>@<version>`, `pypi:<name>@<version>`)."""

    def __init__(self, root: Path, timeout: float, max_bytes: int, max_read_bytes: int, max_total: int) -> None:
        super().__init__(root, timeout, max_bytes, max_read_bytes, max_total)
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
