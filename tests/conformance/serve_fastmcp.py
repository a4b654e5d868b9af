"""Serve the conformance fixture namespace with plain FastMCP: the "peer" baseline.

    python tests/conformance/serve_fastmcp.py PORT [--fixture DIR] [--no-event-store]
        [--no-host-origin-protection] [--dereference-schemas] [--with-completion]

Imports every fixture file (``*.py`` not starting with ``_`` or ``.``), adds each object carrying
fastmcp's ``__fastmcp__`` metadata to one ``FastMCP("conformance-fixture")`` server (tools with
``add_tool``; resources with ``add_resource``, which itself turns a URI with ``{params}`` into a
resource template; prompts with ``add_prompt``) and serves streamable HTTP at
``http://127.0.0.1:PORT/mcp``. It only ever binds the loopback interface.

Defaults are the most conformant plain-FastMCP setup, each one switchable for comparison:

* an in-memory ``EventStore`` with a 500 ms retry interval (SSE priming events, resumability via
  ``Last-Event-ID`` and ``ctx.close_sse_stream()``; see scenario server-sse-polling);
* ``host_origin_protection=True``: Host/Origin headers that are not localhost get HTTP 421/403
  (scenario dns-rebinding-protection); FastMCP's own default is off;
* ``dereference_schemas=False``: FastMCP's default inlines ``$ref`` and drops ``$defs`` from tool
  schemas, which fails scenario json-schema-2020-12;
* no completion handler: a standalone-decorator namespace cannot declare one, so completion/complete
  is unanswered. ``--with-completion`` registers a server-level handler (``FastMCP.completion``) to
  show what a passing answer looks like.

Run the suite against it with
``node .../conformance/dist/index.js server --url http://127.0.0.1:PORT/mcp --suite all``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import uvicorn
from fastmcp import FastMCP
from fastmcp.decorators import get_fastmcp_meta
from fastmcp.prompts.function_prompt import PromptMeta
from fastmcp.resources.function_resource import ResourceMeta
from fastmcp.server.event_store import EventStore
from fastmcp.tools.function_tool import ToolMeta

HOST = "127.0.0.1"  # loopback only, never configurable
DEFAULT_FIXTURE = Path(__file__).resolve().parent / "fixture"
RETRY_INTERVAL_MS = 500


def _import_file(path: Path) -> ModuleType:
    """Import one fixture file under its stem, as ToolDock's worker does (files may import `_helpers`)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def fixture_files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.glob("*.py")) if not p.name.startswith(("_", "."))]


def build_server(folder: Path, *, dereference_schemas: bool = False) -> FastMCP:
    """A FastMCP server holding every decorated object defined in the fixture files."""
    folder = folder.resolve()
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    mcp = FastMCP("conformance-fixture", dereference_schemas=dereference_schemas)
    for path in fixture_files(folder):
        module = _import_file(path)
        for obj in list(vars(module).values()):
            if getattr(obj, "__module__", None) != module.__name__:
                continue  # imported from elsewhere (e.g. a `_helper`): registered by its own file
            meta = get_fastmcp_meta(obj)
            if isinstance(meta, ToolMeta):
                mcp.add_tool(obj)
            elif isinstance(meta, ResourceMeta):
                mcp.add_resource(obj)  # a URI template or function parameters -> ResourceTemplate
            elif isinstance(meta, PromptMeta):
                mcp.add_prompt(obj)
            elif meta is not None:
                raise TypeError(f"{path.name}: unsupported fastmcp metadata {type(meta).__name__}")
    return mcp


def add_demo_completion(mcp: FastMCP) -> None:
    """Completion for the suite's only request: ref/prompt test_prompt_with_arguments, argument arg1."""
    import mcp_types

    suggestions = {"arg1": ["paris", "park", "party", "test", "testValue1"], "arg2": ["testValue2", "world"]}

    @mcp.completion
    def complete(ref: Any, argument: mcp_types.CompletionArgument, context: Any) -> list[str] | None:
        if isinstance(ref, mcp_types.PromptReference) and ref.name == "test_prompt_with_arguments":
            return [v for v in suggestions.get(argument.name, []) if v.startswith(argument.value)]
        if isinstance(ref, mcp_types.ResourceTemplateReference) and argument.name == "id":
            return [v for v in ("1", "123", "42") if v.startswith(argument.value)]
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int, help="TCP port on 127.0.0.1")
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE, help="fixture namespace folder")
    parser.add_argument("--no-event-store", action="store_true", help="no SSE resumability / priming events")
    parser.add_argument(
        "--no-host-origin-protection", action="store_true", help="FastMCP's default: no Host/Origin checks"
    )
    parser.add_argument(
        "--dereference-schemas", action="store_true", help="FastMCP's default: inline $ref, drop $defs"
    )
    parser.add_argument("--with-completion", action="store_true", help="register a demo completion handler")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)

    mcp = build_server(args.fixture, dereference_schemas=args.dereference_schemas)
    if args.with_completion:
        add_demo_completion(mcp)
    app = mcp.http_app(
        path="/mcp",
        transport="http",
        event_store=None if args.no_event_store else EventStore(),
        retry_interval=None if args.no_event_store else RETRY_INTERVAL_MS,
        host_origin_protection=not args.no_host_origin_protection,
    )
    uvicorn.run(app, host=HOST, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=2)


if __name__ == "__main__":
    main()
