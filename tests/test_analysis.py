"""Repository analysis (issue 12, tooldock/manager/analysis): small git repositories made here, cloned over
file:// and read without running them. One repository per language and framework pattern (TypeScript on
the MCP SDK's McpServer and low-level ListTools tables, compiled JavaScript, FastMCP, the Python SDK's
low-level list_tools with pydantic models, mcp-go, the official Go SDK), plus one with no server, a huge
file, binaries, symlinks out of the clone, bad URLs, the size and time limits, and clone reuse."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tooldock.errors import AnalysisError, FetchFailed
from tooldock.manager.analysis import RepoWorkspace, analyze_tree

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=repo, env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout


def make_repo(root: Path, files: dict[str, str | bytes], links: dict[str, str] | None = None) -> str:
    """A git repository with these files (and symlinks), committed; returns its file:// URL."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    for rel, target in (links or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "commit")
    return f"file://{root}"


def analyze(tmp_path: Path, files: dict[str, str | bytes], **kw) -> dict:
    url = make_repo(tmp_path / "repo", files, kw.pop("links", None))
    return asyncio.run(RepoWorkspace(tmp_path / "ws", **kw).analyze(url))


def by_name(result: dict) -> dict[str, dict]:
    return {t["name"]: t for t in result["tools_found"]}


def params(tool: dict) -> dict[str, tuple]:
    return {p["name"]: (p["type"], p["required"], p["description"]) for p in tool["parameters"]}


TS_SCHEMAS = """
import { z } from "zod";
export const SearchSchema = z.object({
  query: z.string().describe("What to look for"),
  limit: z.number().int().optional().describe("At most this many"),
});
export const BaseShape = { owner: z.string().describe("Repository owner") };
"""

TS_SERVER = """
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { SearchSchema, BaseShape } from "./schemas.js";

const server = new McpServer({ name: "demo", version: "1.0.0" });
const token = process.env.GITHUB_TOKEN;
const { SLACK_BOT_TOKEN, REGION = "eu" } = process.env;
const base = process.env["API_BASE_URL"];

server.tool("list_issues", "List GitHub issues", {
  ...BaseShape,
  repo: z.string().describe("Repository name"),
  state: z.enum(["open", "closed", "all"]).default("open").describe("Issue state"),
  labels: z.array(z.string()).optional().describe("Label filter"),
  filter: z.object({ since: z.string() }).optional().describe("Nested filter"),
}, async ({ repo }) => {
  const r = await fetch(`https://api.github.com/repos/${repo}/issues`, { headers: { Authorization: token } });
  return { content: [{ type: "text", text: await r.text() }] };
});

server.tool("ping", async () => ({ content: [] }));

server.registerTool("search", {
  title: "Search",
  description: "Search " + "the index",
  inputSchema: SearchSchema.shape,
}, async (args) => ({ content: [] }));

const name = "add";
const config = { description: `Adds two numbers`, inputSchema: { a: z.number().describe("First"), b: z.number() } };
server.registerTool(name, config, async ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }] }));

const schemaUrl = "https://json-schema.org/draft/2020-12/schema";
fetch("https://slack.com/api/chat.postMessage");
"""


def test_typescript_mcp_sdk_server(tmp_path):
    result = analyze(tmp_path, {
        "package.json": '{"dependencies": {"@modelcontextprotocol/sdk": "^1.0.0", "zod": "^3.23.0"},'
                        ' "devDependencies": {"typescript": "^5"}}',
        "src/index.ts": TS_SERVER,
        "src/schemas.ts": TS_SCHEMAS,
        "src/index.test.ts": 'server.tool("mock_tool", "not real", {}, async () => ({}));',
    })
    assert result["language"] == "typescript"
    assert result["framework"] == "mcp-sdk"
    assert {"src/index.ts", "src/schemas.ts", "package.json"} <= set(result["files"])
    tools = by_name(result)
    assert list(tools) == ["list_issues", "ping", "search", "add"]  # never the test file's mock
    issues = tools["list_issues"]
    assert issues["file"] == "src/index.ts" and issues["description"] == "List GitHub issues"
    assert params(issues) == {
        "owner": ("string", True, "Repository owner"),
        "repo": ("string", True, "Repository name"),
        "state": ("string", False, "Issue state"),
        "labels": ("array", False, "Label filter"),
        "filter": ("object", False, "Nested filter"),
    }
    assert next(p for p in issues["parameters"] if p["name"] == "state")["enum"] == ["open", "closed", "all"]
    assert tools["ping"]["parameters"] == []
    assert tools["search"]["description"] == "Search the index"
    assert params(tools["search"]) == {"query": ("string", True, "What to look for"),
                                       "limit": ("integer", False, "At most this many")}
    assert params(tools["add"]) == {"a": ("number", True, "First"), "b": ("number", True, "")}
    assert result["dependencies"] == {"@modelcontextprotocol/sdk": "^1.0.0", "zod": "^3.23.0"}
    assert result["apis_called"] == ["api.github.com", "slack.com"]  # json-schema.org is an identifier
    assert result["secrets_needed"] == ["GITHUB_TOKEN", "SLACK_BOT_TOKEN"]
    assert result["env_vars"] == ["API_BASE_URL", "GITHUB_TOKEN", "REGION", "SLACK_BOT_TOKEN"]


TS_LOWLEVEL = """
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { ListToolsRequestSchema, CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { zodToJsonSchema } from "zod-to-json-schema";
import { EchoSchema, AddSchema } from "./schemas.js";

enum ToolName { ECHO = "echo", ADD = "add", PRINT_ENV = "printEnv", RAW = "raw_json" }

const RAW_TOOL = {
  name: ToolName.RAW,
  description: "A JSON-schema tool",
  inputSchema: { type: "object", properties: { path: { type: "string", description: "A path" },
                 depth: { type: ["integer", "null"] } }, required: ["path"] },
};

export const createServer = () => {
  const server = new Server({ name: "x", version: "1" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools = [
      { name: ToolName.ECHO, description: "Echoes back the input", inputSchema: zodToJsonSchema(EchoSchema) as ToolInput },
      { name: ToolName.ADD, description: "Adds two numbers", inputSchema: zodToJsonSchema(AddSchema) as ToolInput },
      RAW_TOOL,
    ];
    if (process.env.DEBUG) tools.push({ name: ToolName.PRINT_ENV, description: "Prints env", inputSchema: { type: "object", properties: {} } });
    return { tools };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request) => ({ content: [] }));
  return server;
};
"""

TS_LOWLEVEL_SCHEMAS = """
import { z } from "zod";
export const EchoSchema = z.object({ message: z.string().describe("Message to echo") });
const Numbers = z.object({ a: z.number().describe("First number") });
export const AddSchema = Numbers.extend({ b: z.number().describe("Second number") });
"""


def test_typescript_low_level_list_tools_table(tmp_path):
    result = analyze(tmp_path, {"src/everything.ts": TS_LOWLEVEL, "src/schemas.ts": TS_LOWLEVEL_SCHEMAS})
    tools = by_name(result)
    assert set(tools) == {"echo", "add", "raw_json", "printEnv"}
    assert params(tools["echo"]) == {"message": ("string", True, "Message to echo")}
    assert params(tools["add"]) == {"a": ("number", True, "First number"), "b": ("number", True, "Second number")}
    assert params(tools["raw_json"]) == {"path": ("string", True, "A path"), "depth": ("integer", False, "")}
    assert tools["printEnv"]["parameters"] == []
    assert result["framework"] == "mcp-sdk"
    assert result["secrets_needed"] == [] and result["env_vars"] == ["DEBUG"]


JS_COMPILED = """
"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
const types_js_1 = require("@modelcontextprotocol/sdk/types.js");
var ToolName;
(function (ToolName) {
    ToolName["GET_TIME"] = "get_time";
    ToolName["SLEEP"] = "sleep";
})(ToolName || (ToolName = {}));
const TOOLS = [
    { name: ToolName.GET_TIME, description: "Current time", inputSchema: { type: "object", properties: { tz: { type: "string", description: "Zone" } } } },
    { name: ToolName.SLEEP, description: "Sleep a while", inputSchema: { type: "object", properties: { ms: { type: "number" } }, required: ["ms"] } },
];
server.setRequestHandler(types_js_1.ListToolsRequestSchema, async () => ({ tools: TOOLS }));
const key = process.env.TIME_API_KEY;
"""


def test_compiled_javascript_enum_and_table(tmp_path):
    result = analyze(tmp_path, {"dist/index.js": JS_COMPILED, "package.json": '{"name": "x"}'})
    assert result["language"] == "javascript" and result["framework"] == "mcp-sdk"
    tools = by_name(result)
    assert params(tools["get_time"]) == {"tz": ("string", False, "Zone")}
    assert params(tools["sleep"]) == {"ms": ("number", True, "")}
    assert result["secrets_needed"] == ["TIME_API_KEY"]


PY_FASTMCP = '''
import os
from typing import Annotated, Literal
import httpx
from fastmcp import FastMCP, Context
from pydantic import Field

mcp = FastMCP("slack")
SLACK = "https://slack.com/api/"
TOKEN = os.environ["SLACK_BOT_TOKEN"]
SEARCH_DESCRIPTION = "Search " + "messages"


@mcp.tool()
def post_message(channel: str, text: str, thread_ts: str | None = None) -> dict:
    """Post a message to a channel.

    Args:
        channel: The channel id, e.g. C123
        text: The message text
        thread_ts: Reply in this thread
    """
    return httpx.post(SLACK + "chat.postMessage", json={"channel": channel}).json()


@mcp.tool(name="search", description=SEARCH_DESCRIPTION)
async def search_messages(
    ctx: Context,
    query: Annotated[str, Field(description="Search terms")],
    sort: Literal["score", "timestamp"] = "score",
    count: Annotated[int, Field(description="Results per page", ge=1)] = 20,
) -> list[dict]:
    key = os.getenv("SLACK_USER_TOKEN")
    debug = os.environ.get("DEBUG")
    return httpx.get(f"https://slack.com/api/search.messages?query={query}").json()


@mcp.tool
def whoami() -> str:
    """Who the bot is."""
    return "bot"
'''


def test_python_fastmcp_server(tmp_path):
    result = analyze(tmp_path, {
        "server.py": PY_FASTMCP,
        "pyproject.toml": '[project]\nname = "x"\ndependencies = ["fastmcp>=2.0", "httpx[http2]>=0.27", "pydantic"]\n'
                          '[project.optional-dependencies]\ntest = ["pytest"]\n',
    })
    assert result["language"] == "python" and result["framework"] == "fastmcp"
    tools = by_name(result)
    assert list(tools) == ["post_message", "search", "whoami"]
    post = tools["post_message"]
    assert post["description"].startswith("Post a message to a channel.")
    assert params(post) == {
        "channel": ("string", True, "The channel id, e.g. C123"),
        "text": ("string", True, "The message text"),
        "thread_ts": ("string", False, "Reply in this thread"),
    }
    search = tools["search"]
    assert search["description"] == "Search messages"
    assert params(search) == {  # ctx: Context is not a parameter
        "query": ("string", True, "Search terms"),
        "sort": ("string", False, ""),
        "count": ("integer", False, "Results per page"),
    }
    assert next(p for p in search["parameters"] if p["name"] == "sort")["enum"] == ["score", "timestamp"]
    assert next(p for p in search["parameters"] if p["name"] == "count")["default"] == 20
    assert tools["whoami"]["parameters"] == []
    assert result["dependencies"] == {"fastmcp": ">=2.0", "httpx": "[http2]>=0.27", "pydantic": "*"}
    assert result["apis_called"] == ["slack.com"]
    assert result["secrets_needed"] == ["SLACK_BOT_TOKEN", "SLACK_USER_TOKEN"]
    assert result["env_vars"] == ["DEBUG", "SLACK_BOT_TOKEN", "SLACK_USER_TOKEN"]


PY_MODELS = '''
from enum import Enum
from typing import Annotated, Optional
from pydantic import BaseModel, Field


class TimeTools(str, Enum):
    GET_CURRENT_TIME = "get_current_time"
    CONVERT_TIME = "convert_time"


class RepoPath(BaseModel):
    repo_path: str


class GitLog(RepoPath):
    max_count: int = 10
    since: Optional[str] = Field(None, description="Only commits after this date")
    author: Annotated[str, Field(description="Author filter")] = ""
    files: list[str] = Field(..., description="Paths to include")
'''

PY_LOWLEVEL = '''
import mcp.types as types
from mcp.server import Server
from mcp.types import Tool
from models import TimeTools, GitLog

server = Server("mcp-time")
TZ = "Europe/Paris"


@server.list_tools()
async def list_tools() -> list[Tool]:
    return [
        Tool(
            name=TimeTools.GET_CURRENT_TIME.value,
            description="Get current time in a specific timezone",
            inputSchema={
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": f"IANA name; use '{TZ}' if none"}},
                "required": ["timezone"],
            },
        ),
        types.Tool(name="git_log", description="Shows the commit logs", inputSchema=GitLog.model_json_schema()),
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list:
    return []
'''


def test_python_low_level_list_tools_with_models_and_enums(tmp_path):
    result = analyze(tmp_path, {"src/pkg/server.py": PY_LOWLEVEL, "src/pkg/models.py": PY_MODELS,
                                "requirements.txt": "mcp>=1.0\n# a comment\n-e .\ngitpython==3.1.43\n"})
    assert result["framework"] == "mcp-python"
    tools = by_name(result)
    assert list(tools) == ["get_current_time", "git_log"]
    assert params(tools["get_current_time"]) == {"timezone": ("string", True, "IANA name; use 'Europe/Paris' if none")}
    assert params(tools["git_log"]) == {
        "repo_path": ("string", True, ""),
        "max_count": ("integer", False, ""),
        "since": ("string", False, "Only commits after this date"),
        "author": ("string", False, "Author filter"),
        "files": ("array", True, "Paths to include"),
    }
    assert result["dependencies"] == {"mcp": ">=1.0", "gitpython": "==3.1.43"}


GO_MCPGO = """
package main

import (
	"context"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const forecastTool = "get_forecast"
const apiBase = "https://api.weather.gov"

func main() {
	s := server.NewMCPServer("weather", "1.0.0")
	tool := mcp.NewTool(forecastTool,
		mcp.WithDescription("Get the " + "weather forecast"),
		mcp.WithNumber("latitude", mcp.Required(), mcp.Description("Latitude of the location")),
		mcp.WithNumber("longitude", mcp.Required(), mcp.Description("Longitude")),
		mcp.WithString("units", mcp.Enum("metric", "imperial"), mcp.Description("Unit system")),
		mcp.WithBoolean("verbose"),
	)
	s.AddTool(tool, handler)
	key := os.Getenv("WEATHER_API_KEY")
	_ = key
}

func handler(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	resp, err := http.Get("https://api.weather.gov/points/1,2")
	return nil, nil
}
"""


def test_go_mcp_go_server(tmp_path):
    result = analyze(tmp_path, {
        "main.go": GO_MCPGO,
        "go.mod": "module example.com/weather\n\ngo 1.22\n\nrequire (\n\tgithub.com/mark3labs/mcp-go v0.32.0 // indirect\n)\n"
                  "require golang.org/x/text v0.3.0\n",
    })
    assert result["language"] == "go" and result["framework"] == "mcp-go"
    forecast = by_name(result)["get_forecast"]
    assert forecast["description"] == "Get the weather forecast"
    assert params(forecast) == {
        "latitude": ("number", True, "Latitude of the location"),
        "longitude": ("number", True, "Longitude"),
        "units": ("string", False, "Unit system"),
        "verbose": ("boolean", False, ""),
    }
    assert result["dependencies"] == {"github.com/mark3labs/mcp-go": "v0.32.0", "golang.org/x/text": "v0.3.0"}
    assert result["apis_called"] == ["api.weather.gov"]
    assert result["secrets_needed"] == ["WEATHER_API_KEY"]


GO_SDK = """
package main

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type HiArgs struct {
	Name   string   `json:"name" jsonschema:"the name of the person to greet"`
	Polite bool     `json:"polite,omitempty" jsonschema:"say please"`
	Tags   []string `json:"tags,omitempty"`
	secret string
}

func SayHi(ctx context.Context, req *mcp.CallToolRequest, args HiArgs) (*mcp.CallToolResult, any, error) {
	return nil, nil, nil
}

func main() {
	server := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "v1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "say hi"}, SayHi)
	mcp.AddTool(server, &mcp.Tool{Name: "count", Description: "count things"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
}
"""


def test_go_official_sdk_server(tmp_path):
    result = analyze(tmp_path, {"cmd/greeter/main.go": GO_SDK})
    assert result["language"] == "go" and result["framework"] == "go-sdk"
    tools = by_name(result)
    assert tools["greet"]["description"] == "say hi"
    assert params(tools["greet"]) == {
        "name": ("string", True, "the name of the person to greet"),
        "polite": ("boolean", False, "say please"),
        "tags": ("array", False, ""),
    }
    assert tools["count"]["parameters"] == []


def test_repository_without_an_mcp_server(tmp_path):
    result = analyze(tmp_path, {
        "README.md": "# a library\nSee https://docs.example.com/x\n",
        "lib/util.py": 'def tool_like(x: int) -> int:\n    """Not a tool."""\n    return x\n',
        "web/app.js": "export const tool = (a) => a;\nconsole.log(tool(1));\n",
    })
    assert result["tools_found"] == []
    assert result["framework"] == "unknown"
    assert result["language"] in ("python", "javascript")
    assert result["apis_called"] == [] and result["secrets_needed"] == []


def test_huge_binary_and_broken_files_are_skipped(tmp_path):
    huge = "from fastmcp import FastMCP\nmcp = FastMCP('x')\n@mcp.tool()\ndef hidden() -> str:\n    return 'x'\n"
    huge += "# padding\n" * 120_000  # ~1.2 MB: over the per-file limit
    result = analyze(tmp_path, {
        "server.py": "from fastmcp import FastMCP\nmcp = FastMCP('x')\n\n@mcp.tool()\ndef visible(n: int) -> int:\n"
                     "    '''A tool.'''\n    return n\n",
        "generated.py": huge,
        "blob.py": b"\x00\x01binary\x00" * 100,
        "logo.png": bytes(range(256)) * 10,
        "broken.py": "def (:\n",
        "broken.ts": "server.tool(('x', {\n",
    })
    assert [t["name"] for t in result["tools_found"]] == ["visible"]
    reasons = {s["path"]: s["reason"] for s in result["skipped"]}
    assert reasons["generated.py"].startswith("larger than")
    assert reasons["blob.py"] == "binary"
    assert "logo.png" not in result["files"]


def test_symlinks_out_of_the_clone_are_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret_server.py").write_text(
        "from fastmcp import FastMCP\nmcp = FastMCP('x')\n@mcp.tool()\ndef leaked() -> str:\n    return 'x'\n")
    (outside / "passwords.txt").write_text("hunter2\n")
    url = make_repo(tmp_path / "repo", {"server.py": "x = 1\n"}, links={
        "evil.py": str(outside / "secret_server.py"),
        "outside_dir": str(outside),
        "docs/passwords.txt": str(outside / "passwords.txt"),
        "inside.py": "server.py",
    })
    ws = RepoWorkspace(tmp_path / "ws")
    result = asyncio.run(ws.analyze(url))
    assert result["tools_found"] == []
    reasons = {s["path"]: s["reason"] for s in result["skipped"]}
    assert reasons["evil.py"].startswith("symbolic link") and reasons["inside.py"].startswith("symbolic link")
    for path in ("evil.py", "docs/passwords.txt", "outside_dir/secret_server.py", "inside.py"):
        with pytest.raises(AnalysisError, match="symbolic link"):
            ws.read_file(url, path)
    assert ws.read_file(url, "server.py") == {"path": "server.py", "content": "x = 1\n"}


def test_read_repo_file_is_confined_and_text_only(tmp_path):
    url = make_repo(tmp_path / "repo", {"src/index.ts": "export {};\n", "img.bin": b"\x89PNG\x00\x00",
                                        "big.txt": "a" * 2000})
    ws = RepoWorkspace(tmp_path / "ws", max_read_bytes=1000)
    with pytest.raises(AnalysisError, match="call analyze_repo"):
        ws.read_file(url, "src/index.ts")
    asyncio.run(ws.analyze(url))
    assert ws.read_file(url, "./src//index.ts") == {"path": "src/index.ts", "content": "export {};\n"}
    for path, message in [("../repo/src/index.ts", r"\.\."), ("/etc/passwd", "relative"), (".git/config", "not a file"),
                          ("src", "not a regular file"), ("nope.ts", "not in the repository"), ("img.bin", "binary"),
                          ("big.txt", "over the 1000-byte limit"), ("", "must be a file path"), (None, "must be")]:
        with pytest.raises(AnalysisError, match=message):
            ws.read_file(url, path)


@pytest.mark.parametrize("url, message", [
    ("http://github.com/owner/repo", "plain http"),
    ("ftp://example.com/repo.git", "scheme 'ftp'"),
    ("git://github.com/owner/repo", "scheme 'git'"),
    ("ext::sh -c touch% /tmp/pwned", "spaces"),
    ("ext::sh", "remote helper"),
    ("-uhelp", "starts with '-'"),
    ("--upload-pack=touch /tmp/x", "starts with '-'"),
    ("git@github.com:-oProxyCommand=x", "path starting with '-'"),
    ("ssh://-oProxyCommand=x/repo", "needs a host"),
    ("relative/path", "not a URL"),
    ("file://otherhost/srv/repo", "file:///absolute"),
    ("/srv/../etc", r"'\.\.'"),
    ("https://github.com/owner/repo\nx", "control characters"),
    ("", "must be a git repository URL"),
    (42, "must be a git repository URL"),
])
def test_bad_urls_are_refused_before_git_runs(tmp_path, url, message):
    with pytest.raises(AnalysisError, match=message):
        asyncio.run(RepoWorkspace(tmp_path / "ws").analyze(url))
    assert not (tmp_path / "ws").exists()


def test_credentials_in_a_url_are_refused_and_never_echoed(tmp_path):
    with pytest.raises(AnalysisError) as err:
        asyncio.run(RepoWorkspace(tmp_path / "ws").analyze("https://me:s3cretpw@github.com/owner/repo"))
    assert "credentials" in err.value.message and "s3cretpw" not in err.value.message


def test_nonexistent_repository_is_a_fetch_error(tmp_path):
    for url in (f"file://{tmp_path}/missing", str(tmp_path / "missing")):
        with pytest.raises(FetchFailed, match="failed") as err:
            asyncio.run(RepoWorkspace(tmp_path / "ws").analyze(url))
        assert err.value.status == 502


def test_size_limit_stops_the_clone_and_cleans_up(tmp_path):
    url = make_repo(tmp_path / "repo", {"data/random.bin": os.urandom(3 * 1024 * 1024), "a.py": "x = 1\n"})
    ws = RepoWorkspace(tmp_path / "ws", max_bytes=1024 * 1024)
    with pytest.raises(AnalysisError, match="larger than 1 MB"):
        asyncio.run(ws.analyze(url))
    leftovers = [p.name for p in (tmp_path / "ws").rglob("*") if p.is_dir()]
    assert leftovers == [leftovers[0]] if leftovers else True  # only the URL's (empty) home directory
    assert not any(name.startswith(".tmp-") or len(name) == 40 for name in leftovers)


def test_time_limit_stops_a_remote_that_never_answers(tmp_path):
    """An https "remote" on loopback that accepts the connection and says nothing: git is stopped at the limit."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        with pytest.raises(AnalysisError, match="took longer than 1 s"):
            url = f"https://127.0.0.1:{listener.getsockname()[1]}/owner/repo.git"
            asyncio.run(RepoWorkspace(tmp_path / "ws", timeout=1).analyze(url))
    finally:
        for conn in accepted:
            conn.close()
        listener.close()
    assert time.monotonic() - started < 10


def test_clone_reused_per_url_and_commit(tmp_path):
    repo = tmp_path / "repo"
    url = make_repo(repo, {"server.py": "from fastmcp import FastMCP\nmcp = FastMCP('x')\n\n@mcp.tool()\n"
                                        "def one() -> str:\n    '''One.'''\n    return '1'\n"})
    ws = RepoWorkspace(tmp_path / "ws")
    first = asyncio.run(ws.analyze(url))
    assert first["reused"] is False and first["commit"] == git(repo, "rev-parse", "HEAD").strip()
    again = asyncio.run(ws.analyze(url))
    assert again["reused"] is True and again["path"] == first["path"]
    assert again["tools_found"] == first["tools_found"]
    (repo / "server.py").write_text((repo / "server.py").read_text() + "\n@mcp.tool()\ndef two() -> str:\n"
                                    "    '''Two.'''\n    return '2'\n")
    git(repo, "commit", "-qam", "two")
    moved = asyncio.run(ws.analyze(url))
    assert moved["reused"] is False and moved["commit"] != first["commit"]
    assert [t["name"] for t in moved["tools_found"]] == ["one", "two"]
    assert not Path(first["path"]).exists()  # one clone per URL: the newest
    assert "def two" in ws.read_file(url, "server.py")["content"]
    local = asyncio.run(ws.analyze(str(repo)))  # an absolute path is cloned as file:// (same key)
    assert local["reused"] is True and local["commit"] == moved["commit"]


def test_analyze_tree_on_a_plain_directory(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "tools.py").write_text("from tooldock import tool\n\n@tool\ndef hello(name: str) -> str:\n"
                                              "    '''Say hello.'''\n    return name\n")
    result = analyze_tree(tmp_path / "pkg", "pypi:hello")
    assert result["repo_url"] == "pypi:hello"
    assert [(t["name"], params(t)) for t in result["tools_found"]] == [("hello", {"name": ("string", True, "")})]
    with pytest.raises(AnalysisError, match="not a directory"):
        analyze_tree(tmp_path / "missing")


def test_the_managers_analysis_limits_come_from_its_settings(tmp_path):
    """ANALYZE_REPO_MAX_MB and READ_REPO_FILE_MAX_KB reach the manager's analyze_repo and read_repo_file;
    a bad value stops the manager at start with the variable named."""
    from tooldock.manager.app import build_manager, mcp_server
    from tooldock.manager.settings import ManagerSettings
    from tooldock.runtime.settings import SettingsError

    base = {"TOOLDOCK_BEARER_TOKEN": "x" * 16, "TOOLDOCK_STATE_DIR": str(tmp_path / "state")}
    for name, bad in [("ANALYZE_REPO_MAX_MB", "0"), ("READ_REPO_FILE_MAX_KB", "lots"),
                      ("ANALYZE_REPO_TIMEOUT_SECONDS", "-1")]:
        with pytest.raises(SettingsError, match=name):
            ManagerSettings.from_env(tmp_path, env={**base, name: bad})
    url = make_repo(tmp_path / "repo", {"server.py": "x = 1\n", "big.txt": "a" * 3000})
    (tmp_path / "tools").mkdir()

    async def run(**env: str) -> tuple[dict, dict | str]:
        settings = ManagerSettings.from_env(tmp_path / "tools", env={**base, **env})
        server = mcp_server(build_manager(settings, tmp_path / "cache", 8001))
        analyzed = await server.call_tool("analyze_repo", {"repo_url": url})
        try:
            read = await server.call_tool("read_repo_file", {"repo_url": url, "path": "big.txt"})
        except Exception as exc:  # in process, the SDK raises what a client would get as an error result
            return analyzed.structured_content or {}, str(exc)
        return analyzed.structured_content or {}, read.structured_content or {}

    analyzed, refused = asyncio.run(run(READ_REPO_FILE_MAX_KB="2"))
    assert analyzed.get("language") is not None
    assert isinstance(refused, str) and "over the 2048-byte limit" in refused
    _, read = asyncio.run(run(READ_REPO_FILE_MAX_KB="4"))
    assert isinstance(read, dict) and read.get("content") == "a" * 3000
    large = make_repo(tmp_path / "large", {"blob.bin": os.urandom(3 * 1024 * 1024)})

    async def clone_large(**env: str) -> str:
        settings = ManagerSettings.from_env(tmp_path / "tools", env={**base, **env})
        server = mcp_server(build_manager(settings, tmp_path / "cache", 8001))
        try:
            await server.call_tool("analyze_repo", {"repo_url": large})
        except Exception as exc:
            return str(exc)
        return "cloned"

    assert "larger than 1 MB" in asyncio.run(clone_large(ANALYZE_REPO_MAX_MB="1"))
    assert asyncio.run(clone_large(ANALYZE_REPO_MAX_MB="20")) == "cloned"
    config = ManagerSettings.from_env(tmp_path, env={**base, "ANALYZE_REPO_MAX_MB": "5"}).public()
    assert config["analyze_repo_max_mb"] == 5 and config["read_repo_file_max_kb"] == 512


def test_the_workspace_keeps_its_clones_under_a_total_size(tmp_path):
    """Past max_total_bytes the least recently analyzed URLs lose their clones (re-analyzing clones again);
    reading a removed one says why."""
    urls = {name: make_repo(tmp_path / name, {"blob.bin": os.urandom(100 * 1024), "a.py": "x = 1\n"})
            for name in ("a", "b", "c")}
    ws = RepoWorkspace(tmp_path / "ws", max_total_bytes=500 * 1024)
    for name in ("a", "b", "c"):
        assert asyncio.run(ws.analyze(urls[name]))["reused"] is False
    with pytest.raises(AnalysisError, match="removed to make room"):
        ws.read_file(urls["a"], "a.py")
    assert ws.read_file(urls["b"], "a.py")["content"] == "x = 1\n"
    assert asyncio.run(ws.analyze(urls["b"]))["reused"] is True  # b is now more recent than c
    again = asyncio.run(ws.analyze(urls["a"]))
    assert again["reused"] is False and ws.read_file(urls["a"], "a.py")["content"] == "x = 1\n"
    with pytest.raises(AnalysisError, match="removed to make room"):
        ws.read_file(urls["c"], "a.py")
    assert ws.read_file(urls["b"], "a.py")["content"] == "x = 1\n"
    assert not [p for p in (tmp_path / "ws").iterdir() if p.name.startswith(".")]
