"""The manager's namespace, tool-file and dependency tools (seed 000: "Namespace Management", "Tool File
Management", "Dependencies"). Descriptions follow the seed's text: what the tool does, the exact pattern to
follow, and which tool to call next; ToolDock's own rules are added where they are stricter."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from tooldock.manager import deps, files, upstreamtools
from tooldock.manager.context import JsonObject, Manager, edge
from tooldock.manager.hints import written_hint
from tooldock.manager.secrets import kept_after_delete, secrets_status

TOOL_PATTERN = '''
    from fastmcp.tools import tool

    @tool
    async def my_tool(param: str, count: int = 10) -> dict:
        """Clear description of what this tool does.

        Args:
            param: What this parameter is for.
            count: What this parameter controls. Defaults to 10.

        Returns:
            Description of what is returned.
        """
        # implementation here
        return {"result": "value"}
'''


def register(server: MCPServer, m: Manager) -> None:
    ws = m.workspace

    @server.tool()
    @edge
    async def list_namespaces() -> list[JsonObject]:
        """List all available tool namespaces. Returns each namespace's name, how many tools it contains,
        whether it has a requirements.txt file, and whether all required secrets are configured. Use this as
        your first step to understand what is currently installed.

        Returns a list of objects, each with: name (string, e.g. "github"); tool_count (integer: tools loaded
        in the gateway, or found in the files when the gateway has not loaded the namespace yet);
        has_requirements (boolean); secrets_status ("ok" | "missing" | "placeholders" | "no_secrets_needed");
        loaded (boolean: whether the gateway serves it now; if false, call reload_core(), and if it is still
        false, read "problems").

        ToolDock adds, once the gateway knows the namespace: state (the gateway's: "ready", "degraded",
        "failed", "empty", "sleeping", ...) and, when something is wrong, problems (strings "file:line:
        message": a file that failed to import or was skipped, an invalid tooldock.yaml or tools.toml; fix the
        file, then call reload_core()).

        Example: [{"name": "shared", "tool_count": 2, "has_requirements": false,
        "secrets_status": "no_secrets_needed", "loaded": true, "state": "ready"}]"""
        served = await m.gateway.namespaces()
        listed = []
        for name in ws.namespaces():
            live = served.get(name)
            count = live["tool_count"] if live else len(files.list_tools(ws, name))
            row: JsonObject = {
                "name": name,
                "tool_count": count,
                "has_requirements": bool(deps.read_requirements(ws.root / name / deps.REQUIREMENTS)),
                "secrets_status": secrets_status(ws, m.store, name),
                "loaded": live is not None and live.get("state") != "failed",
            }
            if live is not None:
                row["state"] = live.get("state")
                row.update(files.problems_of(live))
            listed.append(row)
        return listed

    @server.tool()
    @edge
    async def create_namespace(name: str) -> JsonObject:
        """Create a new empty namespace. This creates a directory in the tools directory where you can then
        write tool files. After creating a namespace, use write_tool to add tools, then reload_core to make
        them available.

        Args:
            name: Namespace name. Lowercase letters, digits and hyphens, starting with a letter or digit, at
                most 63 characters. Cannot be "_system" (reserved). Examples: "github", "my-tools", "devops".

        Returns {"created": true, "path": "/data/tools/github"}. Errors: the name already exists (the error
        gives its path), or the name is invalid (uppercase, dots, spaces, slashes)."""
        async with m.writes:
            return files.create_namespace(ws, name)

    @server.tool()
    @edge
    async def delete_namespace(name: str) -> JsonObject:
        """Permanently delete a namespace and all its tool files. This cannot be undone. The namespace
        disappears from the gateway after the next reload (on the docker backend, that reload also removes
        its containers).

        Args:
            name: Namespace to delete. Cannot be "_system".

        Returns {"deleted": true, "name": "github"}, plus "secrets_kept" and "next_steps" when the secrets
        store still holds secrets for that name (they are kept: remove_secret removes one). After calling:
        call reload_core() to update the gateway."""
        async with m.writes:
            result = files.delete_namespace(ws, name)
        if m.docker is not None:
            m.docker.forget(result["name"])
        return {**result, **kept_after_delete(m.store, result["name"])}

    @server.tool()
    @edge
    async def list_tools(namespace: str) -> list[JsonObject]:
        """List all tools in a specific namespace, read from its files. Returns each tool's name, its
        description (the first paragraph of its docstring), and which .py file defines it. Use this to
        understand what tools exist before modifying them.

        Args:
            namespace: Namespace to list tools for. Example: "github"

        Example return: [{"name": "list_issues", "description": "List GitHub issues for a repository.",
        "filename": "issues.py"}]

        ToolDock adds what the gateway serves, when it answers: "served": false for a tool it does not serve
        yet (call reload_core after writing it) and "problem": "..." when something keeps it from being
        served (its own: no docstring, a parameter without a type hint; or its file's: an import error),
        with its line. For a namespace that serves upstream MCP servers (its tools.toml):
        every tool of its catalog, from the gateway, with "filename": "tools.toml" and "active" (whether
        active_toolsets turns it on; test_tool runs inactive ones too)."""
        name = ws.namespace_dir(namespace).name
        if ws.serves_upstream(name):
            return await upstreamtools.list_tools(m.gateway, name)
        return files.list_tools(ws, name, (await m.gateway.namespaces()).get(name))

    @server.tool()
    @edge
    async def get_tool_source(namespace: str, filename: str) -> JsonObject:
        """Read the full Python source code of a tool file. Use this to inspect existing tools, understand
        their implementation, or before modifying them (then send the whole changed file to write_tool).

        Args:
            namespace: Namespace the file belongs to. Example: "github"
            filename: Python file name. Example: "issues.py"

        Returns {"filename": "issues.py", "source": "from fastmcp.tools import tool\\n..."}"""
        return files.get_tool_source(ws, namespace, filename)

    write_doc = f"""Write a Python tool file to a namespace (creating or replacing it). The file must contain at
        least one function decorated with @tool from fastmcp. The code is validated before writing:
          1. Syntax check (must be valid Python)
          2. Must contain at least one @tool decorator (on a module-level function)
          3. Must have type hints on all parameters (no *args / **kwargs)
          4. Must have a docstring on each @tool function
          5. Tool names must be unique in the namespace (not defined in another of its files)
          6. No credential written into the code (a token, a password, a key's value)
        If validation fails, the file is NOT written and the errors are returned with their line numbers.
        Files are written atomically: the gateway never sees half a file.

        IMPORTANT: Follow this exact pattern for every tool:
        {TOOL_PATTERN}
        Never write a secret's value into the code (a file holding one is refused, the value not repeated).
        Read secrets from the environment (os.environ["GITHUB_TOKEN"]); a worker receives only the secrets its
        namespace declares, and prepare_secret(key, namespace) declares one (see check_secrets). Third-party
        packages go in requirements.txt: see add_requirement.

        Args:
            namespace: Target namespace (it must exist: create_namespace). Example: "github"
            filename: File name: letters, digits and underscores, ending in .py, no folders. Example: "issues.py"
            code: Complete Python source code for the file (UTF-8, at most 256 KB).

        Returns on success: {{"written": true, "filename": "issues.py", "tools_found": ["list_issues"]}}, plus
        "undeclared_secrets" and "next_steps" when the namespace's code reads secrets it does not declare,
        "missing_packages" ([{{"module", "file", "line", "package"}}]) when it imports packages its environment
        does not have (add them with add_requirement), "no_network_for" (hosts) when it calls APIs from
        containers that have no network, and "name_warnings" when a tool's name is outside MCP's tool-name
        rules (letters, digits, '_', '-', '.'; at most 128): it is served, but clients may refuse it.
        Returns on validation error: {{"written": false, "error": "No @tool decorator found",
        "details": "line 3: ...", "problems": [{{"file", "line", "code", "message"}}]}}

        After calling: call reload_core() to make the changes live, then test_tool to try them."""

    async def write_tool(namespace: str, filename: str, code: str) -> JsonObject:
        async with m.writes:
            result = files.write_tool(ws, namespace, filename, code)
        if result.get("written"):  # secrets its worker would not receive, hosts its containers cannot reach
            result.update(written_hint(ws, ws.namespace_name(namespace), m.docker is not None, m.envs))
        return result

    server.add_tool(edge(write_tool), name="write_tool", description=write_doc)
    generate_doc = (
        "This is an alias for write_tool, specifically named for the translation workflow. Write a translated "
        "Python tool file to a namespace. Same validation rules as write_tool apply. See write_tool for full "
        "details.\n\nParameters: Same as write_tool (namespace, filename, code)\nReturns: Same as write_tool"
    )

    async def generate_tool(namespace: str, filename: str, code: str) -> JsonObject:
        return await write_tool(namespace, filename, code)

    server.add_tool(edge(generate_tool), name="generate_tool", description=generate_doc)

    @server.tool()
    @edge
    async def delete_tool(namespace: str, filename: str) -> JsonObject:
        """Delete a tool file from a namespace. This removes the .py file permanently; all tools defined in
        that file are removed. After deleting, call reload_core() to update the gateway.

        Args:
            namespace: Namespace. Example: "github"
            filename: File to delete. Example: "issues.py"

        Returns {"deleted": true, "filename": "issues.py"}"""
        async with m.writes:
            return files.delete_tool(ws, namespace, filename)

    @server.tool()
    @edge
    async def install_requirements(namespace: str) -> JsonObject:
        """Install all Python packages listed in a namespace's requirements.txt into that namespace's own
        environment (its virtualenv on the process backend; its image's dependency layer on the docker
        backend). Each namespace has its own interpreter and site-packages, so dependencies are fully isolated.

        This is an explicit sync; reload_core() also syncs automatically when requirements.txt changed.
        After installing, call reload_core() so the worker restarts with the updated dependencies.

        Args:
            namespace: Namespace whose requirements.txt to install.

        Returns on success: {"installed": true, "namespace": "github", "packages": ["httpx>=0.28.0"]}
        Returns on error: {"installed": false, "error": "pip install failed", "details": "..."}"""
        path = ws.metadata_file(namespace, deps.REQUIREMENTS)
        ws.refuse_upstream(namespace, "its requirements")
        return await deps.install(path, m.installer)

    @server.tool()
    @edge
    async def add_requirement(namespace: str, package: str) -> JsonObject:
        """Add a single Python package to a namespace's requirements.txt and sync the namespace's environment
        immediately. If requirements.txt does not exist yet, it is created; an existing line for the same
        package is replaced. If the package cannot be installed, requirements.txt is left as it was and the
        error is returned.

        Args:
            namespace: Target namespace.
            package: One PEP 508 specifier from the package index. Examples: "httpx", "httpx>=0.28.0",
                "beautifulsoup4==4.12.0". No pip options, URLs or paths.

        Returns {"added": true, "package": "httpx>=0.28.0", "namespace": "github"}, or
        {"added": false, "error": "pip install failed", "details": "..."}.
        After calling: call reload_core() to restart the worker with the updated environment."""
        async with m.writes:
            return await deps.add_requirement(ws, namespace, package, m.installer)

    @server.tool()
    @edge
    async def list_requirements(namespace: str) -> JsonObject:
        """Show the packages in a namespace's requirements.txt (comments and blank lines left out). Returns an
        empty list if the file does not exist.

        Args:
            namespace: Namespace to check.

        Returns {"namespace": "github", "packages": ["httpx>=0.28.0", "beautifulsoup4"]}"""
        result: dict[str, Any] = deps.list_requirements(ws, namespace)
        return result
