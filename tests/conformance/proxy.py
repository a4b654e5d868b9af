"""A loopback proxy that adds the gateway's bearer token to every request.

The conformance suite's CLI cannot send custom headers, and the gateway requires `Authorization`
(the namespace goes in the path: `/ns/{namespace}/mcp`). Each client connection carries one request:
the proxy rewrites its head (token in, `Connection: close`), then copies bytes both ways until either
side closes, so request bodies and SSE response streams pass through untouched. Everything else the
client sent (Host, Origin, Accept, MCP headers) reaches the gateway as it was, so the suite's DNS
rebinding checks test the gateway, not the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib

DROP = (b"authorization:", b"connection:", b"keep-alive:", b"proxy-connection:")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()


class TokenProxy:
    def __init__(self, upstream_port: int, token: str) -> None:
        self.upstream_port, self.token = upstream_port, token
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head[:-4].split(b"\r\n")
        kept = [line for line in lines[1:] if not line.lower().startswith(DROP)]
        auth = f"Authorization: Bearer {self.token}".encode()
        rewritten = b"\r\n".join([lines[0], *kept, auth, b"Connection: close"]) + b"\r\n\r\n"
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        up_writer.write(rewritten)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        for w in (writer, up_writer):
            w.close()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


if __name__ == "__main__":  # python tests/conformance/proxy.py UPSTREAM_PORT TOKEN: for running the suite by hand
    import sys

    async def main() -> None:
        proxy = TokenProxy(int(sys.argv[1]), sys.argv[2])
        print(f"http://127.0.0.1:{await proxy.start()}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
