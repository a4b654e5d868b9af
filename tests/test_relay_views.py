"""`tooldock relay`'s memory of its client's activations (cli/relayviews.py), against a stand-in for the
socket connection: what it applies again on a new connection, what it retries, and that a restore never
comes between the client's own activation and its bookkeeping. The whole path runs against a real
gateway in test_upstream.py."""

from __future__ import annotations

import asyncio
from typing import Any

from tooldock.cli.relaysocket import RelayError
from tooldock.cli.relayviews import Activations

TOOL = "pick_toolman_activate"
NONE = {"tools_on": [], "tools_off": [], "resources_on": [], "resources_off": []}


class Socket:
    """Answers `oubliette_call_tool` as the gateway would: refused while `refusing`, else applied."""

    def __init__(self) -> None:
        self.connects = 1
        self.calls: list[tuple[int, dict[str, Any]]] = []
        self.refusing: str | None = None
        self.gate = asyncio.Event()
        self.gate.set()

    async def connect(self) -> int:
        return self.connects

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        assert method == "oubliette_call_tool" and params["tool"] == TOOL and params["api_key"] == "k"
        await self.gate.wait()
        self.calls.append((self.connects, params["arguments"]))
        if self.refusing == "rpc":
            raise RelayError(-32001, "invalid or expired API key", {"reason": "revoked"})
        if self.refusing:
            return {"content": [{"type": "text", "text": self.refusing}], "isError": True}
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_merged_state_is_applied_once_per_new_connection():
    async def go() -> None:
        views, socket, said = Activations(), Socket(), []
        await views.restore(socket, "k", said.append, retry=True)
        assert socket.calls == []  # nothing remembered: nothing sent
        views.remember(TOOL, {**NONE, "tools_on": ["a", "b"]}, 1)
        views.remember(TOOL, {**NONE, "tools_off": ["b"], "resources_on": ["r"], "tools_on": 7}, 1)  # later wins
        await views.restore(socket, "k", said.append, retry=True)
        assert socket.calls == []  # it is on this connection already
        socket.connects = 2
        await views.restore(socket, "k", said.append, retry=False)
        await views.restore(socket, "k", said.append, retry=True)
        assert socket.calls == [(2, {**NONE, "tools_on": ["a"], "tools_off": ["b"], "resources_on": ["r"]})]
        assert said == []

    run(go())


def test_a_refusal_is_warned_once_retried_on_lists_and_a_new_activation_starts_again():
    async def go() -> None:
        views, socket, said = Activations(), Socket(), []
        views.remember(TOOL, {**NONE, "tools_on": ["gone"]}, 1)
        socket.connects, socket.refusing = 2, "invalid_arguments: unknown name(s): 'gone'"
        await views.restore(socket, "k", said.append, retry=True)
        await views.restore(socket, "k", said.append, retry=False)  # a call: not tried again on this connection
        assert len(socket.calls) == 1
        await views.restore(socket, "k", said.append, retry=True)  # a list: tried again, not warned again
        assert len(socket.calls) == 2 and len(said) == 1
        assert "could not apply pick_toolman_activate again" in said[0] and "'gone'" in said[0]
        socket.refusing = "rpc"  # a JSON-RPC refusal is a refusal too, with its own warning
        await views.restore(socket, "k", said.append, retry=True)
        assert len(said) == 2 and "revoked" in said[1]
        socket.refusing = None
        views.remember(TOOL, {**NONE, "tools_on": ["new"]}, 2)  # what this connection has: defaults + this
        socket.connects = 3
        await views.restore(socket, "k", said.append, retry=True)
        assert socket.calls[-1] == (3, {**NONE, "tools_on": ["new"]})

    run(go())


def test_a_restore_waits_for_the_clients_activation_in_flight():
    """The gateway's announcement of an activation comes before its answer; the relist it causes must not
    apply the old state over the new one."""

    async def go() -> None:
        views, socket, said = Activations(), Socket(), []
        views.remember(TOOL, {**NONE, "tools_on": ["old"]}, 1)
        socket.connects = 2

        async def activation() -> None:  # as call_tool does it
            async with views.lock:
                await socket.request("oubliette_call_tool", {"api_key": "k", "tool": TOOL, "arguments": NONE})
                views.remember(TOOL, {**NONE, "tools_on": ["fresh"]}, socket.connects)

        socket.gate.clear()
        calling = asyncio.ensure_future(activation())
        await asyncio.sleep(0)
        restoring = asyncio.ensure_future(views.restore(socket, "k", said.append, retry=True))
        await asyncio.sleep(0.05)
        socket.gate.set()
        await asyncio.gather(calling, restoring)
        assert socket.calls == [(2, NONE)]  # the restore found the new state on this connection: nothing sent
        socket.connects = 3
        await views.restore(socket, "k", said.append, retry=True)
        assert socket.calls[-1] == (3, {**NONE, "tools_on": ["fresh"]}) and said == []

    run(go())
