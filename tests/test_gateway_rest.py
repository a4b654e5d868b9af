"""REST surface against a real `tooldock serve` with real workers: the seed's endpoints and status codes."""

from __future__ import annotations

import concurrent.futures
import json

import httpx
import pytest

from conftest import FIXTURES


def test_health_needs_no_auth(gateway):
    reply = httpx.get(gateway.url + "/health")
    assert reply.status_code == 200
    assert reply.json()["status"] == "ok"


@pytest.mark.parametrize("path", ["/tools", "/namespaces", "/tools/add/schema"])
def test_everything_else_needs_the_bearer_token(gateway, path):
    for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic abc"}):
        reply = httpx.get(gateway.url + path, headers={"X-Namespace": "multi-tool", **headers})
        assert reply.status_code == 401
        assert reply.headers["www-authenticate"].startswith("Bearer")
        assert reply.json()["error"]["code"] == "unauthorized"


def test_say_hello(gateway):
    reply = gateway.call("basic-tool", "say_hello", name="Ada")
    assert reply.status_code == 200
    assert reply.json() == {"result": "Hello, Ada!"}
    assert gateway.post("/tools/say_hello", "basic-tool").json() == {"result": "Hello, World!"}


def test_list_tools_and_schema(gateway):
    tools = gateway.get("/tools", "multi-tool").json()
    assert tools["namespace"] == "multi-tool"
    assert [t["name"] for t in tools["tools"]] == ["add", "multiply", "reverse_text", "word_count"]
    schema = gateway.get("/tools/add/schema", "multi-tool").json()
    assert schema["inputSchema"]["required"] == ["a", "b"]
    assert schema["inputSchema"]["properties"]["a"]["type"] == "number"


def test_namespaces_report_tools_problems_and_skipped_folders(gateway):
    listing = gateway.get("/namespaces").json()
    by_name = {n["name"]: n for n in listing["namespaces"]}
    assert {"async-tool", "basic-tool", "multi-tool", "testing", "broken-file", "limited"} <= set(by_name)
    assert by_name["multi-tool"]["state"] == "ready" and by_name["multi-tool"]["tool_count"] == 4
    broken = by_name["broken-file"]
    assert sorted(broken["tools"]) == ["half_served", "still_works"]
    problems = {p["file"]: p for p in broken["problems"]}
    half = [p for p in broken["problems"] if p["file"] == "half_good.py"]
    assert [(p["code"], p["line"]) for p in half] == [("unsupported_parameter", 11), ("missing_docstring", 17)]
    assert all(p["message"].endswith("(not served until then)") for p in half)
    assert problems["bad_syntax.py"]["code"] == "syntax_error" and problems["bad_syntax.py"]["line"] == 5
    assert problems["no_doc.py"]["code"] == "missing_docstring"
    assert problems["no_hint.py"]["code"] == "missing_type_hint"
    assert problems["import_fails.py"]["code"] == "dependency_error"
    assert [p["file"] for p in listing["problems"]] == ["Bad_Name/"]


def test_file_with_syntax_error_does_not_stop_the_others(gateway):
    assert gateway.call("broken-file", "still_works", x=21).json() == {"result": 42}
    assert gateway.call("broken-file", "half_served", x=2).json() == {"result": 6}
    assert gateway.call("broken-file", "undocumented", x=2).status_code == 404


@pytest.mark.parametrize(
    "namespace, tool, body, status, code",
    [
        (None, "add", {"a": 1, "b": 2}, 400, "missing_namespace"),
        ("nope", "add", {"a": 1, "b": 2}, 404, "namespace_not_found"),
        ("../etc", "add", {}, 404, "namespace_not_found"),
        ("multi-tool", "nope", {}, 404, "tool_not_found"),
        ("multi-tool", "add", {"a": "two", "b": 2}, 422, "invalid_arguments"),
        ("multi-tool", "add", {"a": 1}, 422, "invalid_arguments"),
        ("multi-tool", "add", [1, 2], 422, "invalid_arguments"),
        ("testing", "boom", {"message": "kaput"}, 500, "internal_error"),
    ],
)
def test_error_statuses(gateway, namespace, tool, body, status, code):
    reply = gateway.post(f"/tools/{tool}", namespace, body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code and error["message"]


def test_a_missing_namespace_names_the_ones_there_are(gateway):
    error = gateway.post("/tools/add", None, {"a": 1, "b": 2}).json()["error"]
    available = error["details"]["available"]
    assert "multi-tool" in available and "testing" in available
    assert f"'X-Namespace: {available[0]}'" in error["message"] and f"/ns/{available[0]}/" in error["message"]
    assert "multi-tool" in error["message"].partition("available: ")[2]


def test_arguments_that_are_not_an_object_are_named_in_jsons_words(gateway):
    for body, kind in ((None, "null"), ([1, 2], "an array"), ("x", "a string"), (3, "a number")):
        reply = gateway.post("/tools/add", "multi-tool", content=json.dumps(body).encode())
        assert reply.status_code == 422 and reply.json()["error"]["message"] == (
            f"arguments must be a JSON object of parameter names to values, got {kind}"), reply.text


def test_malformed_json_body(gateway):
    reply = gateway.post("/tools/add", "multi-tool", content=b'{"a": 1,')
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "invalid_json"
    assert gateway.call("multi-tool", "add", a=1, b=1).json() == {"result": 2}


def test_tool_exception_message_reaches_the_caller(gateway):
    error = gateway.call("testing", "boom", message="kaput").json()["error"]
    assert error["message"] == "ValueError: kaput"


def test_unknown_route_uses_the_same_error_shape(gateway):
    reply = gateway.get("/nothing-here")
    assert reply.status_code == 404 and reply.json()["error"]["code"] == "not_found"


def test_timeout_is_504_and_the_gateway_keeps_serving(gateway):
    reply = gateway.call("limited", "nap", seconds=5)
    assert reply.status_code == 504
    assert reply.json()["error"] == {
        "code": "execution_timeout",
        "message": "tool 'nap' in namespace 'limited' did not finish within 1s",
        "details": {"timeout_seconds": 1.0},
    }
    assert gateway.call("multi-tool", "add", a=1, b=1).status_code == 200


def test_per_namespace_concurrency_limit(gateway):
    # limited/ allows 1 call at a time (tooldock.yaml), testing/ the default 16: the tool reports the
    # most calls it ever saw running at once.
    def burst(namespace: str) -> list[httpx.Response]:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            return list(pool.map(lambda _: gateway.call(namespace, "probe", hold=0.2), range(4)))

    limited = burst("limited")
    assert all(r.status_code == 200 for r in limited), [r.text for r in limited]
    assert max(r.json()["result"] for r in limited) == 1
    unlimited = burst("testing")
    assert max(r.json()["result"] for r in unlimited) > 1


def test_worker_environment_holds_no_gateway_secrets(gateway):
    keys = gateway.call("testing", "env_keys").json()["result"]
    assert "TOOLDOCK_BEARER_TOKEN" not in keys
    assert not any("TOKEN" in k or "SECRET" in k for k in keys)
    assert gateway.token not in gateway.get("/namespaces").text


def test_reload_is_guarded(gateway):
    # No MANAGER_INTERNAL_TOKEN configured: reload over HTTP is disabled, with a message saying so.
    reply = gateway.post("/reload", headers={"X-Manager-Token": "anything"})
    assert reply.status_code == 403 and "MANAGER_INTERNAL_TOKEN" in reply.json()["error"]["message"]
    assert httpx.post(gateway.url + "/reload").status_code == 401


def test_namespace_in_the_path_for_clients_without_headers(gateway):
    plain = {"Authorization": f"Bearer {gateway.token}"}
    listed = httpx.get(f"{gateway.url}/ns/multi-tool/tools", headers=plain)
    assert [t["name"] for t in listed.json()["tools"]] == ["add", "multiply", "reverse_text", "word_count"]
    called = httpx.post(f"{gateway.url}/ns/multi-tool/tools/add", headers=plain, json={"a": 1, "b": 2})
    assert called.json() == {"result": 3}
    assert httpx.get(f"{gateway.url}/ns/multi-tool/tools/add/schema", headers=plain).json()["name"] == "add"
    unknown = httpx.get(f"{gateway.url}/ns/nope/tools", headers=plain)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "namespace_not_found"
    assert httpx.get(f"{gateway.url}/ns/multi-tool/tools").status_code == 401


def test_tool_vault_aliases(gateway):
    listed = gateway.get("/tools/list", "basic-tool").json()
    assert [t["name"] for t in listed["tools"]] == ["say_hello"]
    called = gateway.post("/tools/call", "basic-tool", {"name": "say_hello", "arguments": {"name": "Vault"}})
    assert called.json() == {"result": "Hello, Vault!"}
    bad = gateway.post("/tools/call", "basic-tool", {"arguments": {}})
    assert bad.status_code == 400 and "name" in bad.json()["error"]["message"]
    plain = {"Authorization": f"Bearer {gateway.token}"}
    via_path = httpx.post(f"{gateway.url}/ns/multi-tool/tools/call", headers=plain,
                          json={"name": "multiply", "arguments": {"a": 3, "b": 4}})
    assert via_path.json() == {"result": 12.0}


def test_typed_openapi_per_namespace(gateway):
    plain = {"Authorization": f"Bearer {gateway.token}"}
    doc = httpx.get(f"{gateway.url}/ns/testing/openapi.json", headers=plain).json()
    assert doc["openapi"] == "3.1.0" and doc["servers"] == [{"url": f"{gateway.url}/ns/testing"}]
    shift = doc["paths"]["/tools/shift"]["post"]
    body = shift["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["p"]["$ref"] == "#/components/schemas/Shift_Point"
    assert "$defs" not in body
    assert doc["components"]["schemas"]["Shift_Point"]["required"] == ["x", "y"]
    result = shift["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["result"]
    assert result["properties"]["x"]["type"] == "number"
    assert shift["responses"]["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    # The document is true: calling the operation it describes works.
    called = httpx.post(f"{doc['servers'][0]['url']}/tools/shift", headers=plain, json={"p": {"x": 1, "y": 2}, "dx": 3})
    assert called.json() == {"result": {"x": 4.0, "y": 2.0}}

    by_header = gateway.get("/openapi.json", "multi-tool").json()
    add = by_header["paths"]["/tools/add"]["post"]
    assert add["parameters"][0]["name"] == "X-Namespace"
    assert add["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["result"] == {"type": "number"}
    own = gateway.get("/openapi.json").json()
    assert "/namespaces" in own["paths"] and "/tools/{name}" in own["paths"]
    # The call endpoints read their bodies themselves: the document still declares them (Swagger UI's
    # "Try it out" sends only a declared body), and /reload its X-Manager-Token header.
    for path in ("/tools/call", "/ns/{namespace}/tools/call"):
        vault = own["paths"][path]["post"]["requestBody"]
        assert vault["required"] is True
        assert vault["content"]["application/json"]["schema"]["required"] == ["name"]
    for path in ("/tools/{name}", "/ns/{namespace}/tools/{name}"):
        body = own["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body["type"] == "object"
    for path in ("/tools/call", "/tools/{name}"):  # ToolDock's answers, not FastAPI's validation error
        answers = own["paths"][path]["post"]["responses"]
        assert answers["200"]["content"]["application/json"]["schema"]["required"] == ["result"]
        assert {"401", "403", "404", "422", "429", "504"} <= set(answers)
        assert answers["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    assert own["components"]["schemas"]["Error"]["required"] == ["error"]
    reload = own["paths"]["/reload"]["post"]["parameters"]
    assert [(p["name"], p["in"], p["required"]) for p in reload] == [
        ("retry_failed", "query", False),
        ("X-Manager-Token", "header", True),
    ]
    assert next(p for p in reload if p["name"] == "retry_failed")["schema"]["type"] == "boolean"
    assert httpx.get(f"{gateway.url}/ns/testing/openapi.json").status_code == 401
    assert httpx.get(f"{gateway.url}/ns/nope/openapi.json", headers=plain).status_code == 404


def test_the_gateways_document_types_what_its_other_endpoints_answer(gateway):
    """/health, /namespaces (problems included: the fixtures have skipped files), the tool lists and a
    tool's descriptor, by header and by path, each checked against the 200 schema the document gives."""
    import jsonschema

    gateway.conforms("/health", "get", httpx.get(gateway.url + "/health").json())
    listing = gateway.get("/namespaces").json()
    assert listing["problems"] or any(n["problems"] for n in listing["namespaces"])
    gateway.conforms("/namespaces", "get", listing)
    for path, namespace in (("/tools", "multi-tool"), ("/tools/list", "multi-tool"), ("/ns/testing/tools", None),
                            ("/ns/multi-tool/tools/list", None)):
        gateway.conforms(path.replace("testing", "{namespace}").replace("multi-tool", "{namespace}"), "get",
                         gateway.get(path, namespace).json())
    gateway.conforms("/tools/{name}/schema", "get", gateway.get("/tools/add/schema", "multi-tool").json())
    gateway.conforms("/ns/{namespace}/tools/{name}/schema", "get", gateway.get("/ns/testing/tools/shift/schema").json())
    own = gateway.get("/openapi.json").json()
    assert set(own["paths"]["/tools"]["get"]["responses"]) == {"200", "400", "401", "403", "404", "503"}
    assert "security" not in own["paths"]["/namespaces"]["get"] and own["paths"]["/health"]["get"]["security"] == []
    with pytest.raises(jsonschema.ValidationError):  # the schemas say something: a wrong answer fails
        gateway.conforms("/health", "get", {"status": "fine", "namespaces": 1, "unhealthy": {}, "generation": 1})
    with pytest.raises(jsonschema.ValidationError):
        gateway.conforms("/tools", "get", {"namespace": "x", "tools": [{"name": "t"}]})


@pytest.mark.parametrize("path", ["/ns/multi-tool/openapi.json", "/openapi.json"])
def test_schemathesis_finds_no_server_error(gateway, path):
    """schemathesis generates requests from the documents (a namespace's typed tools; the gateway's own
    API) and checks that none gets a 5xx. Bounded: 25 examples per operation."""
    import shutil as sh
    import subprocess
    import sys
    from pathlib import Path

    st = sh.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    proc = subprocess.run(
        [st, "run", f"{gateway.url}{path}", "-H", f"Authorization: Bearer {gateway.token}",
         "--checks", "not_a_server_error", "--max-examples", "25", "--request-timeout", "20"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "passed" in proc.stdout


def test_huge_bodies_are_413_on_rest_and_mcp(gateway):
    huge = b'{"text": "' + b"x" * (5 * 1024 * 1024) + b'"}'
    rest = gateway.post("/tools/word_count", "multi-tool", content=huge)
    assert rest.status_code == 413 and rest.json()["error"]["code"] == "payload_too_large"
    mcp = httpx.post(f"{gateway.url}/mcp", content=huge, headers={
        **gateway.headers("multi-tool"), "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"})
    assert mcp.status_code == 413
    assert gateway.call("multi-tool", "word_count", text="still serving").json() == {"result": 2}


@pytest.mark.parametrize("lean", ["1", "0"], ids=["hot-route", "fastapi-route"])
def test_every_tool_name_has_a_working_rest_path(make_gateway, lean):
    """A name with a space or "/" (sent as is or as %2F), and tools named like Tool Vault's aliases:
    `POST /tools/call` reaches the tool `call` unless the body is a Vault call."""
    gw = make_gateway(FIXTURES / "odd-names", env={"TOOLDOCK_LEAN_REST": lean})
    paths = gw.get("/openapi.json", "odd").json()["paths"]
    assert sorted(paths) == ["/tools/a/b", "/tools/call", "/tools/list", "/tools/two words"]
    for path, name, added in (("two%20words", "two words", 1), ("a/b", "a/b", 2), ("a%2Fb", "a/b", 2),
                              ("call", "call", 3), ("list", "list", 4)):
        for prefix, namespace in (("", "odd"), ("/ns/odd", None)):
            assert gw.post(f"{prefix}/tools/{path}", namespace, {"x": 1}).json() == {"result": 1 + added}, path
        schema = gw.get(f"/tools/{path}/schema", "odd").json()
        assert schema["name"] == name and schema["inputSchema"]["required"] == ["x"]
    vault = gw.post("/tools/call", "odd", {"name": "a/b", "arguments": {"x": 5}}).json()
    assert vault == {"result": 7}
    assert gw.post("/tools/call", "odd", {"name": "call", "arguments": {"x": 5}}).json() == {"result": 8}
    refused = gw.post("/tools/call", "odd", {"y": 1})
    assert refused.status_code == 422, refused.text
    said = refused.json()["error"]["message"]  # each argument's problem, without pydantic's links and internals
    assert said == "argument 'x': Missing required argument; argument 'y': Unexpected keyword argument (got 1)"
