"""`POST /tools/{name}` before FastAPI (runtime/http/hotrest.py, issue 16): every answer, good and bad, is
the FastAPI route's, checked against the same gateway with the hot route off (TOOLDOCK_LEAN_REST=false)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TOOLS = '''from fastmcp.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def greet(name: str) -> str:
    """Say hello."""
    return f"Hello, {name}!"


@tool
def boom() -> str:
    """Always fails."""
    raise ValueError("no luck")
'''


@pytest.fixture
def pair(make_gateway, tmp_path: Path):
    (tmp_path / "src" / "hot").mkdir(parents=True)
    (tmp_path / "src" / "hot" / "tools.py").write_text(TOOLS)
    env = {"TOOLDOCK_MAX_BODY_BYTES": "2048"}
    return make_gateway(tmp_path / "src", env=env), make_gateway(tmp_path / "src", env={**env, "TOOLDOCK_LEAN_REST": "false"})


CASES = [
    ("/tools/add", {"X-Namespace": "hot"}, b'{"a": 2, "b": 3}'),
    ("/ns/hot/tools/add", {}, b'{"a": 2, "b": 3}'),
    ("/tools/greet", {"X-Namespace": "hot"}, '{"name": "Zoë ✓"}'.encode()),
    ("/tools/add", {"X-Namespace": "hot"}, b'{"a": "two", "b": 3}'),
    ("/tools/add", {"X-Namespace": "hot"}, b"{not json"),
    ("/tools/add", {"X-Namespace": "hot"}, b'{"a": NaN, "b": 1}'),
    ("/tools/add", {"X-Namespace": "hot"}, b"[" * 5000),
    ("/tools/add", {"X-Namespace": "hot"}, b'{"a": 1, "b": 2, "pad": "' + b"x" * 4000 + b'"}'),
    ("/tools/add", {"X-Namespace": "hot"}, b""),
    ("/tools/add", {}, b'{"a": 1, "b": 2}'),
    ("/tools/add", {"X-Namespace": "nope"}, b'{"a": 1, "b": 2}'),
    ("/ns/nope/tools/add", {}, b'{"a": 1, "b": 2}'),
    ("/tools/missing", {"X-Namespace": "hot"}, b"{}"),
    ("/tools/boom", {"X-Namespace": "hot"}, b"{}"),
    ("/tools/boom", {"X-Namespace": "hot", "X-ToolDock-Traceback": "1"}, b"{}"),
    ("/tools/add", {"X-Namespace": "hot", "Authorization": "Bearer wrong-token"}, b"{}"),
]


def _shape(reply) -> tuple[int, object]:
    body = reply.json()
    if isinstance(body.get("error"), dict):  # request ids and tracebacks differ from run to run
        body["error"].pop("request_id", None)
        details = body["error"].get("details") or {}
        if "traceback" in details:
            details["traceback"] = "present"
    return reply.status_code, body


def test_the_hot_route_answers_as_the_fastapi_route(pair):
    hot, plain = pair
    for path, headers, body in CASES:
        answers = [
            gw.post(path, content=body, headers={"Content-Type": "application/json", **headers}) for gw in (hot, plain)
        ]
        assert _shape(answers[0]) == _shape(answers[1]), (path, headers, body[:40], answers[0].text[:300])
        assert answers[0].headers.get("x-request-id")
    ok = hot.post("/tools/add", "hot", {"a": 2, "b": 3})
    assert ok.json() == {"result": 5} and ok.headers["content-type"] == "application/json"
    assert json.loads(hot.post("/tools/greet", "hot", {"name": "Zoë"}).content) == {"result": "Hello, Zoë!"}
    # what the hot route leaves to FastAPI: other methods and the Tool Vault call
    assert hot.get("/tools/add", "hot").status_code == plain.get("/tools/add", "hot").status_code == 405
    vault = hot.post("/tools/call", "hot", {"name": "add", "arguments": {"a": 1, "b": 1}})
    assert vault.json() == {"result": 2}
