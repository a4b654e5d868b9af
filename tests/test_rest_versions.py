"""REST runs any version of a versioned tool (`@tool(version=...)`): `POST /tools/{name}?version=1`, its result
shaped by that version's own output schema, and `GET /tools/{name}/schema?version=1` describes it; a version
the tool does not have is refused (404) in the words MCP uses, and the namespace's OpenAPI document offers the
versions as a query parameter. Before, REST ran and described the highest version only and ignored the
parameter."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import VERSIONED_CALC

FILE = (
    VERSIONED_CALC
    + '''

@tool(name="shape", version="1")
def shape_v1(x: int) -> dict:
    """A dict (not wrapped)."""
    return {"a": x, "result": "kept"}


@tool(name="shape", version="2")
def shape_v2(x: int) -> int:
    """An int (wrapped as {"result": ...})."""
    return x


@tool
def plain(x: int) -> int:
    """No versions."""
    return x
'''
)


@pytest.fixture(params=["hot route", "FastAPI route"])
def gateway(request, make_gateway, tmp_path: Path):
    (tmp_path / "src" / "ver").mkdir(parents=True)
    (tmp_path / "src" / "ver" / "ver.py").write_text(FILE)
    env = {"TOOLDOCK_LEAN_REST": "false"} if request.param == "FastAPI route" else {}
    return make_gateway(tmp_path / "src", env=env)


def _result(gateway, path: str) -> tuple[int, object]:
    answer = gateway.post(path, "ver", {"x": 3})
    return answer.status_code, answer.json()


def test_each_version_runs_with_its_own_result_shape(gateway):
    assert _result(gateway, "/tools/calc") == (200, {"result": 6})
    assert _result(gateway, "/tools/calc?version=2") == (200, {"result": 6})
    assert _result(gateway, "/tools/calc?version=1") == (200, {"result": 3})
    assert _result(gateway, "/ns/ver/tools/calc?version=1") == (200, {"result": 3})
    # version 1 returns a dict (fastmcp does not wrap it); version 2 an int (wrapped): each unwrapped as its own
    assert _result(gateway, "/tools/shape") == (200, {"result": 3})
    assert _result(gateway, "/tools/shape?version=1") == (200, {"result": {"a": 3, "result": "kept"}})


def test_a_version_the_tool_does_not_have_is_refused(gateway):
    status, body = _result(gateway, "/tools/calc?version=3")
    assert status == 404 and body["error"]["code"] == "tool_not_found"  # type: ignore[index]
    assert body["error"]["message"] == (  # type: ignore[index]
        "tool 'calc' has no version '3' here: its versions are '2', '1'; call it without a version (the "
        "highest), or with one of them"
    )
    status, body = _result(gateway, "/tools/plain?version=1")
    assert status == 404, body
    assert "has no versions here" in body["error"]["message"]  # type: ignore[index]
    for query in ("version=1&version=2", "version="):
        status, body = _result(gateway, f"/tools/calc?{query}")
        assert status == 400 and "names one version" in body["error"]["message"], body  # type: ignore[index]
    assert _result(gateway, "/tools/calc?other=1") == (200, {"result": 6})  # other parameters: as before


def test_openapi_offers_the_versions(gateway):
    document = gateway.get("/openapi.json", "ver").json()
    calc = document["paths"]["/tools/calc"]["post"]
    version = next(p for p in calc["parameters"] if p["name"] == "version")
    assert version["in"] == "query" and not version["required"] and version["schema"]["enum"] == ["2", "1"]
    plain = document["paths"]["/tools/plain"]["post"]
    assert all(p["name"] != "version" for p in plain.get("parameters", []))


def test_the_schema_of_a_version(gateway):
    """`GET /tools/{name}/schema?version=1` describes that version; without it, the highest."""
    assert gateway.get("/tools/calc/schema", "ver").json()["description"] == "Version 2."
    older = gateway.get("/tools/shape/schema?version=1", "ver").json()
    assert older["description"] == "A dict (not wrapped)." and older["_meta"]["fastmcp"]["version"] == "1"
    assert gateway.get("/tools/calc/schema?version=7", "ver").status_code == 404
