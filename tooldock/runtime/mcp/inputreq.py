"""Input-required results (MCP 2026-07-28, SEP-2322) for `tools/call`, `prompts/get` and `resources/read`.

A 2026-07-28 client has no session the server could send `elicitation/create`, `sampling/createMessage`
or `roots/list` over. Instead the server answers `{"resultType": "input_required", "inputRequests",
"requestState"}` and the client retries the same request with `inputResponses` and the `requestState`.
`InputRounds` (server middleware, inside the SDK's `RequestStateBoundary`, see state.py) does it for
both ways a tool can ask:

* a guard (fastmcp's pattern) returns an `InputRequiredResult` and reads `ctx.input_responses` /
  `ctx.request_state` on the next round. The worker hands the result over in `_meta` (worker/guard.py);
  here it becomes the `input_required` answer, with the guard's own `requestState` kept inside ours.
* an imperative tool awaits `ctx.elicit()`, sampling or roots/list. Its question reaches the gateway's
  relay, which answers it from the answers recorded in `requestState` for that same question (method and
  parameters; the same question asked twice takes the recorded answers in turn). A question with no
  answer yet stops the call once the tool's questions in flight have arrived (those asked together, as
  with `asyncio.gather`, go in one round), the worker is told to cancel it, and the questions become the
  `input_required` answer under the keys `tooldock.ask.<n>`. The retry runs the tool again from the start
  with the new answers recorded: what a tool does before a question is done again on every round (put
  side effects after the questions).

For a 2025-11-25 client imperative questions go over its session as before (relay.py), and a guard's
`input_required` is answered by asking that client over its session, then running the next round here.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.methods import INPUT_REQUIRED_METHODS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from tooldock.runtime.questions import declared, unmet
from tooldock.runtime.workerclient import round_fields, round_relay
from tooldock.worker.protocol import INPUT_REQUIRED

ASK_PREFIX = "tooldock.ask."  # the inputRequests key of a recorded (imperative) question: tooldock.ask.<n>
MAX_ANSWERS = 50  # questions one request may ask before it is refused
MAX_STATE_BYTES = 512 * 1024  # the plaintext requestState (recorded answers) of one request
MAX_LEGACY_ROUNDS = 20  # guard rounds run for a 2025-11-25 client before giving up
GATHER_QUIET, GATHER_MAX = 0.05, 0.5  # seconds: a round takes the questions asked until none came for QUIET
RESULTS: dict[str, Any] = {  # what answers each question, to validate inputResponses
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult | types.CreateMessageResultWithTools,
    "roots/list": types.ListRootsResult,
}


def digest(method: str, params: dict[str, Any]) -> str:
    """Which question this is: its method and parameters (an answer is only ever given to the same one)."""
    text = json.dumps({"method": method, "params": params or {}}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class Round:
    """One 2026-07-28 request's imperative questions: the recorded answers, and the questions still open."""

    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by question digest, in turn
    used: dict[str, int] = field(default_factory=dict)
    needed: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> the request to send the client
    open: dict[str, list[str]] = field(default_factory=dict)  # key -> [method, digest], kept in requestState
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    over: asyncio.Event = field(default_factory=asyncio.Event)

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The recorded answer to this question, or (none yet) hold it for the client; the call is stopped."""
        question = digest(method, params)
        turn = self.used.get(question, 0)
        self.used[question] = turn + 1
        recorded = self.answers.get(question, [])
        if turn < len(recorded):
            return dict(recorded[turn])
        key = f"{ASK_PREFIX}{len(self.needed)}"
        self.needed[key] = {"method": method, **({"params": params} if params else {})}
        self.open[key] = [method, question]
        self.asked.set()
        await self.over.wait()  # the call is being cancelled
        raise MCPError(types.INVALID_REQUEST, "the client is being asked; the call runs again on its retry")


current: contextvars.ContextVar[Round | None] = contextvars.ContextVar("input_round", default=None)


def _invalid(message: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, message)


def _state_of(plain: Any) -> dict[str, Any]:
    """Our requestState (already opened by the SDK's boundary, so it is one we minted)."""
    if plain is None:
        return {}
    try:
        state = json.loads(plain) if isinstance(plain, str) else None
    except ValueError:
        state = None
    if not isinstance(state, dict) or state.get("v") != 2 or not isinstance(state.get("answers", {}), dict):
        raise _invalid("Invalid or expired requestState")
    return state


def _answer(key: str, method: str, response: Any) -> dict[str, Any]:
    try:
        model = TypeAdapter(RESULTS[method]).validate_python(response) if method in RESULTS else None
    except ValidationError as err:
        raise _invalid(f"inputResponses[{key!r}] is not a valid {method} result: {err.errors()[0]['msg']}") from None
    if model is None:
        raise _invalid(f"inputResponses[{key!r}] answers an unknown request")
    result: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return result


def _carried(result: Any) -> dict[str, Any] | None:
    """A guard's InputRequiredResult, handed over by the worker in the result's `_meta` (worker/guard.py)."""
    meta = result.get("_meta") if isinstance(result, dict) else None
    carried = meta.get(INPUT_REQUIRED) if isinstance(meta, dict) else None
    return carried if isinstance(carried, dict) else None


def _check_declared(ctx: Any, requests: dict[str, Any]) -> None:
    """A guard's questions go only to a client that declared what they need: else MCP's -32021 naming it.
    (An imperative question is refused in the worker, where the tool may catch it: worker/direct.py.)"""
    have = declared(getattr(ctx.session, "client_capabilities", None))
    error = unmet(have, requests)
    if error is not None:
        raise error


def _capability_error(ctx: Any, result: Any) -> MCPError | None:
    """A tool that raised MCPError(-32021, data={"requiredCapabilities": ...}) because the client did not
    declare what it needs: that JSON-RPC error (HTTP 400), as FastMCP sends it, not a failed result."""
    if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
        return None
    error = (result.get("structuredContent") or {}).get("error") or {}
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, dict) or details.get("rpc_code") != types.MISSING_REQUIRED_CLIENT_CAPABILITY:
        return None
    return MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, str(details.get("rpc_message")), details.get("rpc_data"))


async def legacy_rounds(
    call: Callable[[], Awaitable[Any]], ask: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
) -> Any:
    """A guard's rounds for a 2025-11-25 client: `call()` runs the request (with this round's answers in
    `round_fields`); each question of a guard's `input_required` goes to the client through `ask(method,
    params)`, then the guard runs again with the answers and its requestState. The SDK path's loop and the
    lean path's (lean.py)."""
    fields: dict[str, Any] = {}
    for _ in range(MAX_LEGACY_ROUNDS):
        token = round_fields.set(fields or None)
        try:
            result = await call()
        finally:
            round_fields.reset(token)
        carried = _carried(result)
        if carried is None:
            return result
        answers = {}
        for key, request in (carried.get("inputRequests") or {}).items():
            method = str(request.get("method")) if isinstance(request, dict) else ""
            answers[key] = await ask(method, request.get("params") or {})
        fields = {"inputResponses": answers}
        if isinstance(carried.get("requestState"), str):
            fields["requestState"] = carried["requestState"]
    raise MCPError(types.INTERNAL_ERROR, f"the request still asked for input after {MAX_LEGACY_ROUNDS} rounds")


def _input_required(requests: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    plain = json.dumps(state, separators=(",", ":"))
    if len(plain) > MAX_STATE_BYTES:
        raise MCPError(types.INVALID_REQUEST, "this request asked for more input than one requestState may carry")
    return {"resultType": "input_required", "inputRequests": requests, "requestState": plain}


class InputRounds:
    """Server middleware: input-required rounds for the methods that may answer `input_required`."""

    def __init__(self, ask: Any, relay: Any) -> None:
        self._ask = ask  # (ctx, method, params) -> result: a question over a 2025-11-25 client's session
        self._relay = relay  # (ctx, log level) -> McpRelay: who answers a prompt's or a resource's questions

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method not in INPUT_REQUIRED_METHODS:
            return await call_next(ctx)
        params = dict(ctx.params or {})
        if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            return await self._legacy(ctx, call_next)
        responses = params.pop("inputResponses", None)
        if responses is not None and not isinstance(responses, dict):
            raise _invalid("inputResponses must be an object of input request keys to the client's results")
        responses = responses or {}
        state = _state_of(params.pop("requestState", None))
        answers = {question: list(given) for question, given in state.get("answers", {}).items()}
        for key, (method, question) in sorted((state.get("open") or {}).items()):
            if key in responses:
                answers.setdefault(question, []).append(_answer(key, method, responses[key]))
        if sum(len(given) for given in answers.values()) > MAX_ANSWERS:
            raise MCPError(types.INVALID_REQUEST, f"a request may ask the client at most {MAX_ANSWERS} questions")
        guard = {k: v for k, v in responses.items() if not k.startswith(ASK_PREFIX)}
        for name, value in guard.items():
            if not isinstance(value, dict):
                raise _invalid(f"inputResponses[{name!r}] must be an object (the client's result)")
        if not guard and isinstance(state.get("held"), dict):
            guard = state["held"]  # the guard's answers of an earlier round, while imperative questions went on
        fields: dict[str, Any] = {}
        if guard:
            fields["inputResponses"] = params["inputResponses"] = guard
        if isinstance(state.get("guard"), str):
            fields["requestState"] = params["requestState"] = state["guard"]

        round_ = Round(answers)
        tokens = current.set(round_), round_fields.set(fields or None)
        relayed = round_relay.set(self._relay(ctx, None) if ctx.method != "tools/call" else None)
        try:
            task = asyncio.ensure_future(call_next(replace(ctx, params=params)))
        finally:
            round_relay.reset(relayed)
            round_fields.reset(tokens[1])
            current.reset(tokens[0])
        asked = asyncio.ensure_future(round_.asked.wait())
        try:
            await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
            deadline, seen = asyncio.get_running_loop().time() + GATHER_MAX, 0
            while round_.needed and len(round_.needed) != seen and asyncio.get_running_loop().time() < deadline:
                seen = len(round_.needed)  # the tool's other questions in flight join this round
                await asyncio.wait({task}, timeout=GATHER_QUIET)
        finally:  # the call first (the worker is told to cancel the tool), then the questions still waiting
            asked.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            round_.over.set()
        kept: dict[str, Any] = {"v": 2, "answers": round_.answers}
        if round_.needed:  # imperative questions without an answer: ask the client
            more = {"open": round_.open, "guard": state.get("guard"), "held": guard or None}
            return _input_required(round_.needed, {**kept, **{k: v for k, v in more.items() if v}})
        result = task.result()
        refused = _capability_error(ctx, result)
        if refused is not None:
            raise refused
        carried = _carried(result)
        if carried is None:
            return result
        if carried.get("requestState") is not None:
            kept["guard"] = carried["requestState"]
        requests = dict(carried.get("inputRequests") or {})
        _check_declared(ctx, requests)
        return _input_required(requests, kept)

    async def _legacy(self, ctx: Any, call_next: Any) -> Any:
        """A 2025-11-25 client: a guard's questions go over its session, then the guard runs again."""

        async def once() -> Any:
            relayed = round_relay.set(self._relay(ctx, None) if ctx.method != "tools/call" else None)
            try:
                return await call_next(ctx)
            finally:
                round_relay.reset(relayed)

        return await legacy_rounds(once, lambda method, params: self._ask(ctx, method, params))


def install(server: Any, settings: Any, namespace: str, relay: Any) -> None:
    """The SDK's request-state boundary (state.py), then the rounds inside it, on a namespace's server.
    `relay`: (ctx, log level) -> the McpRelay that answers a prompt's or a resource's questions."""
    from tooldock.runtime.mcp.relay import ask_client  # relay.py reads this module's `current`
    from tooldock.runtime.mcp.state import boundary

    server.middleware.extend([boundary(settings, namespace), InputRounds(ask_client, relay)])
