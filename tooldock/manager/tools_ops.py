"""The manager's reload, secrets, test and introspection tools (seed 000: `reload_core`, "Secrets (values
never pass through chat)", `test_tool`, "Introspection"). No tool here accepts or returns a secret value,
a token or a key."""

from __future__ import annotations

import json
import platform
import time
from typing import Any

from mcp.server.mcpserver import MCPServer

from tooldock.errors import InvalidInput
from tooldock.manager import secrets, upstreamtools
from tooldock.manager.context import JsonObject, Manager, edge, uptime


def register(server: MCPServer, m: Manager) -> None:
    ws = m.workspace

    @server.tool()
    @edge
    async def reload_core() -> JsonObject:
        """Make every change live: tell the gateway to rescan all namespaces and reload tools. Call this after
        any change: creating or deleting namespaces, writing or deleting tools, installing dependencies, or
        after the user set a secret. The gateway will:
          1) rescan the namespace folders,
          2) make sure each namespace's environment exists,
          3) sync an environment whose requirements.txt changed,
          4) restart only the workers whose namespace changed,
          5) swap in the new registry snapshot atomically (calls in flight finish on the old workers).
        On the docker backend it first rebuilds the image of every namespace whose folder changed (cached
        layers), starts it as a new container generation and hot-swaps it in with no dropped calls.
        The gateway stays up throughout; a namespace whose new version fails (validation, install, build or
        start) keeps serving its previous version, and the result says which and why under "failed".

        Reloads run one at a time: if one is already running, this call waits and gets the answer of the
        next reload (which sees every change made before it started).

        Returns {"reloaded": true, "namespaces": ["shared", "github"], "workers_restarted": ["github"],
        "deps_synced": ["github"], "removed": [], "failed": {"ns": "why"}, "seconds": 1.2}
        plus, on the docker backend, "images_built": {"github": "sha256:..."}. ToolDock adds "problems":
        {"ns": ["file:line: message"]} for a namespace this reload started that serves its other files (a
        file that failed to import: its tools are missing until you fix it and reload).
        Next: call test_tool (or list_tools) to check the result."""
        return await m.reloader.reload_core()

    @server.tool()
    @edge
    async def prepare_secret(key: str, namespace: str | None = None) -> JsonObject:
        """Create a placeholder entry for a secret in the secrets store. This updates the status metadata only;
        the user sets the real value in a terminal. This tool NEVER accepts or returns secret values: never ask
        the user to paste a secret into the chat.

        IMPORTANT: After calling this, you MUST tell the user to run the command in "instructions", e.g.
          tooldock secrets set GITHUB_TOKEN --namespace github
        (it prompts for the value without echoing it). After the user has set it, call reload_core().

        Args:
            key: Secret name: letters, digits and underscores. Examples: "GITHUB_TOKEN", "OPENAI_API_KEY"
            namespace: If set, the secret is scoped to this namespace only, and the name is declared in the
                namespace's tooldock.yaml (a worker receives only the secrets its namespace declares; when the
                global scope already has a value, the namespace is only declared and receives that value). If
                null/omitted, the secret is global (available to every namespace that declares it).

        Returns {"key": "GITHUB_TOKEN", "scope": "github", "status": "placeholder", "meta_file": "...",
        "declared_in": "github/tooldock.yaml", "instructions": "Run: tooldock secrets set GITHUB_TOKEN ..."}"""
        return secrets.prepare_secret(ws, m.store, key, namespace)

    @server.tool()
    @edge
    async def list_secrets(namespace: str | None = None) -> list[JsonObject]:
        """List configured secrets and their status: key names and whether each has a value ("set") or is
        still a "placeholder". NEVER shows values.

        Args:
            namespace: Only this namespace's own secrets. If null/omitted: all (global and every namespace).

        Returns [{"key": "GITHUB_TOKEN", "scope": "global", "status": "set"},
                 {"key": "AWS_KEY", "scope": "devops", "status": "placeholder"}]"""
        rows: list[JsonObject] = list(secrets.list_secrets(m.store, ws, namespace))
        return rows

    @server.tool()
    @edge
    async def remove_secret(key: str, namespace: str | None = None) -> JsonObject:
        """Remove a secret (its value and its status entry) from the secrets store entirely. After removing,
        call reload_core() to apply the change.

        Args:
            key: Secret key to remove.
            namespace: Scope. Null/omitted = global.

        Returns {"removed": true, "key": "GITHUB_TOKEN", "scope": "global"} ("removed": false when there was
        no such secret in that scope)."""
        return secrets.remove_secret(ws, m.store, key, namespace)

    @server.tool()
    @edge
    async def check_secrets(namespace: str) -> JsonObject:
        """Check whether a namespace has all the secrets it needs. Reads the secret names the namespace
        declares in its tooldock.yaml (`secrets: [GITHUB_TOKEN]`) and the secret-like names its code reads from
        the environment, then checks the secrets store (a value in the namespace's scope or the global scope
        counts). Use this after installing or writing a namespace to
        know whether the user must configure secrets.

        Args:
            namespace: Namespace to check.

        Returns {"namespace": "github", "satisfied": ["GITHUB_TOKEN"], "missing": ["SLACK_TOKEN"],
        "placeholders": ["AWS_KEY"], "undeclared": ["OPENAI_API_KEY"], "next_steps": ["..."]}
          - satisfied: secrets that are configured
          - missing: secrets that do not exist in the store at all
          - placeholders: secrets with a placeholder but no value yet
          - undeclared: secrets the namespace's code reads from the environment but does not declare (its
            worker would not receive them): call prepare_secret(key, namespace), which declares them
        Next steps based on the result:
          - for each "missing": call prepare_secret(key, namespace), then tell the user to run
            `tooldock secrets set KEY --namespace NAMESPACE`
          - for each "placeholder": tell the user to run that command
          - when all are "satisfied": call reload_core() and the namespace is ready"""
        return secrets.check_secrets(ws, m.store, namespace)

    @server.tool()
    @edge
    async def test_tool(namespace: str, tool_name: str, input: dict[str, Any] | None = None) -> JsonObject:
        """Execute one tool with test input through the gateway and return the result. The tool runs exactly
        as clients will run it: in its namespace's worker, with its dependencies and secrets. Use this to
        verify a tool you wrote (after reload_core()).

        If the tool fails, the error message and traceback are returned (secret values masked) so you can fix
        the code with write_tool, call reload_core() and test again.

        Args:
            namespace: Namespace the tool is in.
            tool_name: Name of the tool to test. Example: "list_issues"
            input: Input arguments as a JSON object. Example: {"owner": "octocat", "repo": "hello-world"}

        Returns on success: {"success": true, "result": ...tool output...}; a result over 256 KB comes back
        as its first characters: {"success": true, "truncated": true, "result_bytes": 1048576,
        "result_preview": "..."}. In a namespace of upstream MCP servers the tool is activated first (on a
        session of the test's own), so inactive tools run too.
        Returns on error: {"success": false, "error": "KeyError: 'GITHUB_TOKEN'", "code": "internal_error",
        "traceback": "Traceback (most recent call last): ..."}"""
        name = ws.namespace_name(namespace)
        if not isinstance(tool_name, str) or not tool_name:
            raise InvalidInput("tool_name must be the name of a tool, e.g. 'list_issues' (see list_tools)")
        if ws.serves_upstream(name):  # over MCP: an inactive upstream tool is activated for the test
            return _bounded(await upstreamtools.test_tool(m.gateway, name, tool_name, input or {}))
        status, body = await m.gateway.call_tool(name, tool_name, input or {})
        if status == 200 and isinstance(body, dict) and "result" in body:
            return _bounded({"success": True, "result": body["result"]})
        error = body.get("error", {}) if isinstance(body, dict) else {}
        details = error.get("details") or {}
        answer: JsonObject = {
            "success": False,
            "error": error.get("message") or f"HTTP {status}",
            "code": error.get("code") or "http_error",
        }
        if details.get("traceback"):
            answer["traceback"] = details["traceback"]
        if error.get("code") in ("namespace_not_found", "tool_not_found"):
            answer["hint"] = "call reload_core() after writing tools, then list_tools to see the names"
        return answer

    @server.tool()
    @edge
    async def health() -> JsonObject:
        """Check the health of both the manager and the gateway. Returns the manager's uptime, its Python
        version, whether the gateway is reachable, and how many namespaces and tools the gateway serves.

        Returns {"manager_uptime": "2h 15m", "core_reachable": true, "python_version": "3.12.1",
        "namespaces_loaded": 5, "total_tools": 23, "reloads": 3}"""
        served = await m.gateway.namespaces()
        reachable = bool(served) or (await m.gateway.health()) is not None
        return {
            "manager_uptime": uptime(time.monotonic() - m.started),
            "core_reachable": reachable,
            "python_version": platform.python_version(),
            "namespaces_loaded": len(served),
            "total_tools": sum(int(n.get("tool_count", 0)) for n in served.values()),
            "reloads": m.reloader.count,
        }

    @server.tool()
    @edge
    async def server_config() -> JsonObject:
        """Show the manager's configuration: non-sensitive values only (never the bearer token, the manager
        token, secrets or keys).

        Returns {"tools_dir": "/data/tools", "data_dir": "...", "gateway_url": "http://127.0.0.1:8000",
        "core_port": 8000, "manager_port": 8001, "backend": "process", "fs_watcher": false, ...}"""
        return {**m.settings.public(), "manager_port": m.port}


MAX_RESULT = 256 * 1024  # bytes of JSON: an answer past ~1 MiB breaks MCP clients' SSE readers (the SDK's)
PREVIEW = 4000  # characters of a result too large to pass on


def _bounded(answer: JsonObject) -> JsonObject:
    """`answer` as it is, or, when its result is over MAX_RESULT bytes of JSON, the start of it: a tool
    tested here may return anything, and the whole of a large result would fail the manager's own answer."""
    encoded = json.dumps(answer.get("result"), ensure_ascii=False, default=str)
    size = len(encoded.encode())
    if not answer.get("success") or size <= MAX_RESULT:
        return answer
    return {
        "success": True,
        "truncated": True,
        "result_bytes": size,
        "result_preview": encoded[:PREVIEW],
        "note": f"the result is {size} bytes of JSON; shown: its first {PREVIEW} characters. Clients get it whole.",
    }
