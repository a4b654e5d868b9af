"""The benchmark's peer: the same tool file served directly by FastMCP over streamable HTTP.

Prints the port it listens on (127.0.0.1 only), then serves until killed. `--json` answers POSTs with JSON
instead of an SSE stream (FastMCP's `json_response`, its fastest setting for plain tools).
"""

import asyncio
import importlib.util
import socket
import sys
from pathlib import Path

from fastmcp import FastMCP
from fastmcp.tools import Tool

path = Path(__file__).parent / "tools" / "bench" / "trivial.py"
spec = importlib.util.spec_from_file_location("trivial", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

server = FastMCP("fastmcp-peer")
server.add_tool(Tool.from_function(module.echo_number))
server.add_tool(Tool.from_function(module.echo_progress))

sock = socket.socket()
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections
sock.bind(("127.0.0.1", 0))
sock.listen(1024)
print(sock.getsockname()[1], flush=True)
asyncio.run(server.run_http_async(show_banner=False, host="127.0.0.1", log_level="warning", sockets=[sock],
                                  json_response="--json" in sys.argv))
