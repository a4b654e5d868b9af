"""The REST benchmark's peer: a bare Starlette endpoint doing what the tool does, on the same uvicorn
stack as the gateway (loop and HTTP parser chosen the same way: uvloop and httptools when installed).

Prints the port it listens on (127.0.0.1 only), then serves until killed.
"""

import json
import socket

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
uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
