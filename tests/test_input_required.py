"""Input-required results (MCP 2026-07-28, SEP-2322) through real gateways, with the official SDK 2.x client.

The namespace is tests/fixtures/input/asking: `trip` asks imperatively (`ctx.elicit`, sampling, roots),
`survey`, `briefing` and `notes://{topic}` are fastmcp guards. A 2026-07-28 `Client` drives the rounds itself
(its callbacks answer the `inputRequests`); the low-level `client.session` calls take one round at a time
(`allow_input_required=True`) where a test needs the `requestState` in hand.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

FIXTURE = Path(__file__).parent / "fixtures" / "input"
NAMESPACE = "asking"
MODERN = "2026-07-28"


class Answers:
    """The client's side: what the user, the LLM and the file system answer, and how often each was asked."""

    def __init__(self, name: str = "Ada") -> None:
        self.name = name
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append("elicitation")
        schema = getattr(params, "requested_schema", {}) or {}
        field = next(iter(schema.get("properties") or {"value": None}))
        value = {"colour": "green", "audience": "the board", "reader": "Grace"}.get(field, self.name)
        return types.ElicitResult(action="accept", content={field: value})

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="the old bridge"), model="test-llm"
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/ada/trips", name="trips")])

    def callbacks(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.roots,
        }


def run_legacy(gateway, body, answers: Answers) -> tuple[str, Any]:
    """`body(session)` in an SDK 2.x `ClientSession` that speaks the initialize handshake, with `answers`
    answering the questions sent over it: (the protocol version negotiated, what `body` returned)."""

    async def main():
        async with httpx2.AsyncClient(headers=gateway.headers(NAMESPACE), timeout=60) as http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write, **answers.callbacks()) as session:
                    init = await session.initialize()
                    return init.protocol_version, await body(session)

    return asyncio.run(main())


def run_client(
    gateway, body, *, mode: str = MODERN, calls: list[str] | None = None, token: str | None = None, **callbacks: Any
) -> Any:
    """`body(client)` in an SDK 2.x `Client` against one gateway; `calls` collects the MCP methods posted."""

    async def record(request) -> None:
        if calls is not None and request.method == "POST":
            calls.append(request.headers.get("mcp-method", ""))

    async def main() -> Any:
        headers = gateway.headers(NAMESPACE)
        if token is not None:  # an API key instead of the bearer token
            headers["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient(headers=headers, timeout=60, event_hooks={"request": [record]}) as http:
            async with Client(
                streamable_http_client(f"{gateway.url}/mcp", http_client=http), mode=mode, **callbacks
            ) as c:
                return await body(c)

    try:
        return asyncio.run(main())
    except BaseExceptionGroup as group:  # the client's task group wraps what the body raised
        error = group
        while isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
        raise error from None


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    from conftest import Gateway

    tmp = tmp_path_factory.mktemp("input")
    shutil.copytree(FIXTURE, tmp / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"TOOLDOCK_STATE_TTL_SECONDS": "3", "TOOLDOCK_KEYS_DIR": str(tmp / "keys")}
    gw = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    gw.keys_env = {"TOOLDOCK_KEYS_DIR": str(tmp / "keys")}
    assert gw.namespace(NAMESPACE)["state"] == "ready", gw.logs()
    yield gw
    gw.stop()


def test_an_imperative_tool_asks_a_2026_client_through_input_required_rounds(gateway):
    """`ctx.elicit()`, sampling and roots/list in one tool: each question is one `input_required` round, and
    the tool runs again with the recorded answers, so every question reaches the client exactly once."""
    answers, calls = Answers(), []

    async def body(client):
        assert client.protocol_version == MODERN
        return await client.call_tool("trip", {"city": "Lisbon"})

    result = run_client(gateway, body, calls=calls, **answers.callbacks())
    assert not result.is_error, result
    assert result.structured_content == {
        "traveller": "Ada",
        "sight": "the old bridge",
        "roots": ["file:///home/ada/trips"],
    }
    assert answers.asked == ["elicitation", "sampling", "roots"]
    assert calls.count("tools/call") == 4  # three questions, then the answer


def test_questions_asked_together_go_in_one_round_and_repeated_ones_get_their_own_answers(gateway):
    class Numbers(Answers):
        async def elicit(self, context, params):
            self.asked.append("elicitation")
            value = str(len(self.asked)) if params.message == "Pick a number" else "Ada"
            return types.ElicitResult(action="accept", content={"value": value})

    answers, calls = Numbers(), []

    async def body(client):
        first = await client.session.call_tool("pair", {}, allow_input_required=True)
        return first, await client.call_tool("pair", {}), await client.call_tool("twice", {})

    first, pair, twice = run_client(gateway, body, calls=calls, **answers.callbacks())
    assert isinstance(first, types.InputRequiredResult)
    assert sorted(r.method for r in first.input_requests.values()) == ["elicitation/create", "sampling/createMessage"]
    assert pair.content[0].text == "Ada goes to the old bridge"
    assert twice.content[0].text == "3 then 4"  # "Ada" was the 1st elicitation, the sampling the 2nd ask
    assert calls.count("tools/call") == 1 + 2 + 3


def test_the_same_tool_still_asks_a_2025_client_over_its_session(gateway):
    answers = Answers("Grace")

    async def trip(session):
        return await session.call_tool("trip", {"city": "Porto"})

    version, result = run_legacy(gateway, trip, answers)
    assert version == "2025-11-25"
    assert result.structured_content == {
        "traveller": "Grace",
        "sight": "the old bridge",
        "roots": ["file:///home/ada/trips"],
    }
    assert answers.asked == ["elicitation", "sampling", "roots"]


def test_guards_take_several_rounds_on_tools_prompts_and_resources(gateway):
    answers = Answers("Alan")

    async def body(client):
        survey = await client.call_tool("survey", {})
        prompt = await client.get_prompt("briefing")
        notes = await client.read_resource("notes://budget")
        return survey, prompt, notes

    survey, prompt, notes = run_client(gateway, body, **answers.callbacks())
    assert survey.content[0].text == "Alan likes green"
    assert prompt.messages[0].content.text == "Brief the board on the plan."
    assert notes.contents[0].text == "budget notes for Grace"
    assert answers.asked == ["elicitation"] * 4


def test_prompts_and_resources_may_ask_imperatively_too(gateway):
    """`ctx.elicit()` in a prompt and roots/list in a resource: input_required rounds for a 2026-07-28 client,
    requests over the session for a 2025-11-25 one."""
    modern = Answers("Ada")

    async def body(client):
        return await client.get_prompt("welcome"), await client.read_resource("roots://count")

    prompt, roots = run_client(gateway, body, **modern.callbacks())
    assert prompt.messages[0].content.text == "Welcome Ada!"
    assert roots.contents[0].text == "1 root(s)"
    assert modern.asked == ["elicitation", "roots"]

    legacy = Answers("Grace")

    async def both(session):
        return await session.get_prompt("welcome"), await session.read_resource("roots://count")

    _, (prompt, roots) = run_legacy(gateway, both, legacy)
    assert prompt.messages[0].content.text == "Welcome Grace!" and roots.contents[0].text == "1 root(s)"
    assert legacy.asked == ["elicitation", "roots"]


def test_a_guard_round_then_an_imperative_question(gateway):
    """The guard's answers are kept while the tool's imperative question takes its own round."""

    class Both(Answers):
        async def elicit(self, context, params):
            self.asked.append(params.message)
            field = next(iter(params.requested_schema["properties"]))
            return types.ElicitResult(action="accept", content={field: "tides" if field == "topic" else "Rachel"})

    answers = Both()

    async def body(client):
        return await client.call_tool("mixed", {})

    assert run_client(gateway, body, **answers.callbacks()).content[0].text == "tides by Rachel"
    assert answers.asked == ["Which topic?", "Who writes about tides?"]


def test_a_guard_also_works_for_a_2025_client(gateway):
    """FastMCP refuses an InputRequiredResult on a 2025-11-25 connection; the gateway asks that client over
    its session and runs the guard's next round itself."""
    answers = Answers("Edsger")

    async def survey(session):
        return await session.call_tool("survey", {})

    assert run_legacy(gateway, survey, answers)[1].content[0].text == "Edsger likes green"
    assert answers.asked == ["elicitation", "elicitation"]


def _first_round(
    gateway, tool: str = "survey", arguments: dict | None = None, token: str | None = None
) -> types.InputRequiredResult:
    async def body(client):
        return await client.session.call_tool(tool, arguments or {}, allow_input_required=True)

    first = run_client(gateway, body, token=token, **Answers().callbacks())
    assert isinstance(first, types.InputRequiredResult), first
    assert first.request_state and '"step"' not in first.request_state  # sealed: the tool's state is not readable
    return first


def _retry(
    gateway, first: types.InputRequiredResult, state: str | None = None, tool: str = "survey", token: str | None = None
) -> Any:
    name = types.ElicitResult(action="accept", content={"name": "Barbara"})

    async def body(client):
        return await client.session.call_tool(
            tool,
            {},
            input_responses={"name": name},
            request_state=state or first.request_state,
            allow_input_required=True,
        )

    return run_client(gateway, body, token=token, **Answers().callbacks())


def test_a_tampered_or_misdirected_request_state_is_refused(gateway):
    first = _first_round(gateway)
    flipped = first.request_state[:-3] + ("A" if first.request_state[-3] != "A" else "B") + first.request_state[-2:]
    for state, tool in ((flipped, "survey"), ("not a sealed state", "survey"), (first.request_state, "trip")):
        with pytest.raises(MCPError) as caught:
            _retry(gateway, first, state, tool)
        assert caught.value.error.code == types.INVALID_PARAMS
        assert caught.value.error.message == "Invalid or expired requestState"
    second = _retry(gateway, first)  # the untouched state still works
    assert isinstance(second, types.InputRequiredResult) and set(second.input_requests) == {"colour"}


def test_an_expired_request_state_is_refused(gateway):
    first = _first_round(gateway)
    time.sleep(3.5)  # TOOLDOCK_STATE_TTL_SECONDS=3 for this gateway
    with pytest.raises(MCPError) as caught:
        _retry(gateway, first)
    assert caught.value.error.message == "Invalid or expired requestState"
    assert "requestState rejected on tools/call: expired" in gateway.logs


def test_a_retry_may_reach_another_gateway_holding_the_same_key(make_gateway):
    key = secrets.token_urlsafe(32)
    one = make_gateway(FIXTURE, env={"TOOLDOCK_STATE_KEY": key})
    two = make_gateway(FIXTURE, env={"TOOLDOCK_STATE_KEY": f"{secrets.token_urlsafe(32)},{key}"})  # rotated
    other = make_gateway(FIXTURE)  # a key of its own, generated for this run
    first = _first_round(one)
    second = _retry(two, first)
    assert isinstance(second, types.InputRequiredResult) and set(second.input_requests) == {"colour"}
    with pytest.raises(MCPError) as caught:
        _retry(other, first)
    assert caught.value.error.message == "Invalid or expired requestState"
    assert key not in one.logs + two.logs


def test_bad_input_responses_get_a_clear_error(gateway):
    from test_mcp_clients import envelope, modern_post

    first = _first_round(gateway, "trip", {"city": "Oslo"})
    (key,) = first.input_requests
    assert key == "tooldock.ask.0" and first.input_requests[key].method == "elicitation/create"
    caps = {"elicitation": {}, "sampling": {}, "roots": {}}
    meta = {"io.modelcontextprotocol/clientCapabilities": caps, "io.modelcontextprotocol/protocolVersion": MODERN}
    for responses, expected in (
        ({key: {"roots": "nope"}}, "inputResponses['tooldock.ask.0'] is not a valid elicitation/create result"),
        ([1, 2], "inputResponses must be an object"),
    ):
        params = {"name": "trip", "arguments": {"city": "Oslo"}, "inputResponses": responses}
        body = envelope("tools/call", {**params, "requestState": first.request_state})
        body["params"]["_meta"].update(meta)
        reply = modern_post(gateway, "/mcp", NAMESPACE, body, name="trip")
        text = reply.text
        error = (
            json.loads(text[text.index("{") :].splitlines()[0])["error"]
            if reply.status_code == 200
            else reply.json()["error"]
        )
        assert error["code"] == types.INVALID_PARAMS and expected in error["message"], text
    assert "Traceback" not in gateway.logs


def test_a_2026_client_without_the_capability_gets_missing_required_client_capability(gateway):
    """MCP's -32021 naming the capability the tool asked for (as the SDK's own resolvers answer it), a
    JSON-RPC error rather than a failed result; a tool that catches it goes on without asking."""

    async def body(client):
        refusals = []
        for name in ("trip", "survey"):  # an imperative question; a guard's
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {"city": "Rome"} if name == "trip" else {})
            refusals.append(refused.value)
        return refusals, await client.call_tool("greet", {})

    refusals, fallback = run_client(gateway, body)  # no callbacks: no elicitation capability declared
    for refused in refusals:
        assert refused.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY, refused.error
        assert "elicitation" in refused.error.message
        assert refused.error.data == {"requiredCapabilities": {"elicitation": {}}}
    assert not fallback.is_error and fallback.content[0].text == "hello, whoever you are"
    answered = run_client(gateway, lambda client: client.call_tool("greet", {}), **Answers("Ada").callbacks())
    assert answered.content[0].text == "hello, Ada"


def test_a_2025_client_without_the_capability_gets_the_sdks_refusal(gateway):
    async def body(session):
        return await session.call_tool("trip", {"city": "Rome"}), await session.call_tool("greet", {})

    async def main():
        async with httpx2.AsyncClient(headers=gateway.headers(NAMESPACE), timeout=60) as http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:  # no callbacks: nothing declared
                    await session.initialize()
                    return await body(session)

    failed, fallback = asyncio.run(main())
    assert failed.is_error and "Elicitation not supported" in failed.content[0].text
    assert fallback.content[0].text == "hello, whoever you are"


def test_a_guard_called_over_rest_fails_clearly(gateway):
    reply = httpx2.post(f"{gateway.url}/tools/survey", json={}, headers=gateway.headers(NAMESPACE), timeout=60)
    assert reply.status_code == 500, reply.text
    assert "asks the client for input; this call has no MCP client to ask: call it over MCP" in reply.text


def test_a_request_state_belongs_to_the_api_key_that_got_it(gateway):
    from conftest import tooldock_cli

    alice, bob = (
        tooldock_cli("keys", "create", "--name", name, "--scope", "write", env=gateway.keys_env).stdout.strip()
        for name in ("alice", "bob")
    )
    first = _first_round(gateway, token=alice)
    for other in (bob, None):  # another key, and the bearer token
        with pytest.raises(MCPError) as caught:
            _retry(gateway, first, token=other)
        assert caught.value.error.message == "Invalid or expired requestState"
    assert isinstance(_retry(gateway, first, token=alice), types.InputRequiredResult)


@pytest.mark.parametrize(
    "extra",
    [
        {"inputResponses": "yes"},
        {"inputResponses": {"name": None}},
        {"inputResponses": {"name": 5}},
        {"inputResponses": {"tooldock.ask.0": {"action": "accept"}}},
        {"requestState": 5},
        {"requestState": ""},
        {"requestState": "v1." + "A" * 5000},
        {"requestState": None, "inputResponses": {}},
    ],
)
def test_malformed_rounds_get_a_4xx_and_a_json_rpc_error(gateway, extra):
    from test_mcp_clients import CAPS_KEY, INFO_KEY, MODERN, PV_KEY, envelope, modern_post

    meta = {PV_KEY: MODERN, CAPS_KEY: {"elicitation": {}}, INFO_KEY: {"name": "raw-httpx", "version": "0"}}
    body = envelope("tools/call", {"name": "survey", "arguments": {}, **extra}, meta=meta)
    reply = modern_post(gateway, "/mcp", NAMESPACE, body, name="survey")
    assert reply.status_code < 500, reply.text
    text = reply.text
    message = json.loads(text[text.index("{") :].splitlines()[0])
    if "error" in message:
        assert message["error"]["code"] == types.INVALID_PARAMS, text
    else:  # nothing to refuse: a fresh first round
        assert message["result"]["resultType"] == "input_required", text
