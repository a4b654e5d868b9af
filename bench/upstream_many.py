"""A stdio MCP server with 60 tools shaped like a real API's (a GitHub-like surface), for the context figure
in bench/upstream.py: how many bytes of tool definitions a client receives with `active_toolsets` narrowed
against all tools active. Built on the official SDK; every tool just echoes its arguments."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

app = MCPServer("many-tools")
AREAS = ["issue", "pull_request", "repository", "branch", "release", "workflow", "gist", "team", "project", "label"]
VERBS = {
    "list": "List the {area}s of a repository, newest first, with paging; filter by state, author or label.",
    "get": "Get one {area} by its number or name, with its metadata, timestamps and the people involved.",
    "create": "Create a {area} in a repository; returns the new {area} with its number and web URL.",
    "update": "Change the title, body, state or labels of a {area}; fields left out keep their values.",
    "delete": "Delete a {area} for good (where the API allows it); the caller needs admin rights.",
    "search": "Search {area}s across repositories with the search syntax (qualifiers like is:open, author:).",
}


def make(area: str, verb: str) -> None:
    def tool(owner: str, repo: str, number: int | None = None, query: str | None = None,
             per_page: int = 30, page: int = 1) -> dict[str, Any]:
        return {"owner": owner, "repo": repo, "number": number, "query": query, "page": page, "per_page": per_page}

    app.tool(name=f"{verb}_{area}", description=VERBS[verb].format(area=area.replace("_", " ")))(tool)


for area in AREAS:
    for verb in VERBS:
        make(area, verb)

if __name__ == "__main__":
    app.run("stdio")
