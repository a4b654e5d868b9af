"""The pytest plugin `tooldock test` loads into a namespace's own tests: the `mcp_client` fixture.

`tooldock test` runs pytest in the namespace's environment (its virtualenv, where its tools' requirements
and fastmcp are) while a gateway serves the namespace as `tooldock serve` would, on a loopback port, and
tells this plugin where (`TOOLDOCK_TEST_URL`, `TOOLDOCK_TEST_TOKEN`, `TOOLDOCK_TEST_NAMESPACE`). The fixture
is a fastmcp `Client` connected to it over streamable HTTP, driven from plain (sync) test functions:

    def test_greet(mcp_client):
        assert mcp_client.call("greet", name="Ada").data == "Hello, Ada!"

`call(tool, **arguments)` is fastmcp's `Client.call_tool` (a tool error raises `fastmcp.exceptions.ToolError`;
`call_raw` returns the result with `is_error` set instead); `list_tools()`, `read_resource(uri)`,
`get_prompt(name, **arguments)` as fastmcp's; `run(coroutine_function, *args)` runs any other coroutine of
`client` (the fastmcp Client itself) on the fixture's event loop.

With `tooldock test --image` the tests run in a container with no network but its own loopback: there the
gateway is a unix socket (`TOOLDOCK_TEST_SOCKET`), which this plugin forwards the gateway's loopback address
to, so the URL is the same inside as outside.

Only pytest, anyio and fastmcp here (and the standard library): this file is imported inside the namespace's
environment.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

URL, TOKEN, NAMESPACE = "TOOLDOCK_TEST_URL", "TOOLDOCK_TEST_TOKEN", "TOOLDOCK_TEST_NAMESPACE"
SOCKET = "TOOLDOCK_TEST_SOCKET"


def forward(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept on `listener` (in a daemon thread) and pipe each connection both ways to a new `connect()`."""

    def pipe(src: socket.socket, dst: socket.socket, done: list[int]) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        done.append(1)
        if len(done) == 2:  # both ways ended
            src.close()
            dst.close()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed
                return
            try:
                upstream = connect()
            except OSError:
                conn.close()
                continue
            done: list[int] = []
            threading.Thread(target=pipe, args=(conn, upstream, done), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, conn, done), daemon=True).start()

    threading.Thread(target=accept, daemon=True, name="tooldock-forward").start()


def pytest_configure(config: Any) -> None:
    """In `tooldock test --image`'s container: the gateway's loopback address, forwarded to its socket."""
    path, url = os.environ.get(SOCKET), os.environ.get(URL)
    if not path or not url:
        return
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", urlsplit(url).port or 80))
    listener.listen(64)

    def connect() -> socket.socket:
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(path)
        return upstream

    forward(listener, connect)


class NamespaceClient:
    """A connected fastmcp `Client` to the namespace, with sync methods for tests."""

    def __init__(self, portal: Any, client: Any, namespace: str) -> None:
        self.portal, self.client, self.namespace = portal, client, namespace

    def run(self, func: Callable[..., Any], *args: Any) -> Any:
        return self.portal.call(func, *args)

    def call(self, tool: str, /, **arguments: Any) -> Any:
        return self.portal.call(lambda: self.client.call_tool(tool, arguments))

    def call_raw(self, tool: str, /, **arguments: Any) -> Any:
        return self.portal.call(lambda: self.client.call_tool(tool, arguments, raise_on_error=False))

    def list_tools(self) -> list[Any]:
        return list(self.portal.call(self.client.list_tools))

    def read_resource(self, uri: str) -> Any:
        return self.portal.call(self.client.read_resource, uri)

    def get_prompt(self, name: str, /, **arguments: Any) -> Any:
        return self.portal.call(lambda: self.client.get_prompt(name, arguments))


@pytest.fixture
def mcp_client() -> Iterator[NamespaceClient]:
    """A client to the namespace under test, served as ToolDock serves it (run the tests with `tooldock test`)."""
    if not os.environ.get(URL):
        pytest.fail("mcp_client needs the namespace served: run these tests with `tooldock test NAMESPACE_DIR`")
    from anyio.from_thread import start_blocking_portal
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    namespace = os.environ[NAMESPACE]
    headers = {"Authorization": f"Bearer {os.environ[TOKEN]}", "X-Namespace": namespace}
    transport = StreamableHttpTransport(f"{os.environ[URL]}/mcp", headers=headers)
    client = Client(transport, timeout=120)
    with start_blocking_portal() as portal:
        portal.call(client.__aenter__)
        try:
            yield NamespaceClient(portal, client, namespace)
        finally:
            portal.call(client.__aexit__, None, None, None)
