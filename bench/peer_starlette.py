"""The REST benchmark's peer: a bare Starlette endpoint doing what the tool does, on the same uvicorn
stack as the gateway (loop and HTTP parser chosen the same way: uvloop and httptools when installed).

Prints the port it listens on (127.0.0.1 only), then serves until killed. With `--coalesce` it serves on
the gateway's own HTTP protocol (runtime/http/wire.py: a response's header and body in one write), so the
table can show what that alone is worth to a bare endpoint.
"""

import json
import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def echo_number(request: Request) -> Response:
    body = json.loads(await request.body())
    return Response(json.dumps({"result": body["x"]}), media_type="application/json")


app = Starlette(routes=[Route("/tools/echo_number", echo_number, methods=["POST"])])
sock = socket.socket()
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sock.bind(("127.0.0.1", 0))
sock.listen(2048)
print(sock.getsockname()[1], flush=True)
http = "auto"
if "--coalesce" in sys.argv:
    from tooldock.runtime.http.wire import GatewayHttpProtocol

    http = GatewayHttpProtocol
uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, http=http)).run(sockets=[sock])
