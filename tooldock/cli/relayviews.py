"""What `tooldock relay`'s client turned on and off in upstream namespaces (`<namespace>_toolman_activate`),
applied again on a new connection to the relay socket.

The gateway keeps a relay connection's activation as long as the connection, as it keeps an MCP session's.
The relay's own client does not see the socket connection drop (a gateway restart, a reload of the socket),
so the relay keeps its client's view: it remembers the merged result of the activations that succeeded
(name -> on/off, per namespace) and, on a new connection, applies it again before anything else is asked.
One the gateway refuses (its upstream server not up yet after a restart, or its names gone since) is tried
again whenever the tools are listed (a gateway of this version announces an upstream server's new list), with
one warning; until then that namespace shows its defaults. A new activation in a namespace whose state could
not be applied on this connection starts its state again from what the gateway then has: the defaults.
Light on imports: it runs in sandbox images.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tooldock.cli.relaysocket import RelayError, SocketClient
from tooldock.runtime.relay.protocol import CALL

ACTIVATED = "_toolman_activate"  # an upstream namespace's tool that changes what a connection sees
KINDS = ("tools", "resources")
TIMEOUT = 30.0


class Activations:
    def __init__(self) -> None:
        self._state: dict[str, dict[str, dict[str, bool]]] = {}  # tool -> kind -> name -> on
        self._applied: dict[str, int] = {}  # tool -> the connection (SocketClient.connects) its state is on
        self._tried: dict[str, int] = {}  # tool -> the connection it was last tried on
        self._said: dict[str, str] = {}  # tool -> the last refusal warned about
        # Held while restoring and around the client's own activation calls: neither comes between the
        # other's call and its bookkeeping (a restore of the old state must not follow a newer activation).
        self.lock = asyncio.Lock()

    def remember(self, tool: str, arguments: dict[str, Any], connection: int) -> None:
        """An activation that succeeded on `connection` (the caller holds `lock`): merged into what that
        connection has (later calls win, as on the gateway), or, when the remembered state is not on it, the
        start of a new state."""
        if self._applied.get(tool) != connection:  # also a tool never remembered: never applied anywhere
            self._state[tool] = {kind: {} for kind in KINDS}
        state = self._state[tool]
        for kind in KINDS:
            for on in (True, False):
                names = arguments.get(f"{kind}_{'on' if on else 'off'}")
                for name in names if isinstance(names, list) else ():
                    if isinstance(name, str):
                        state[kind][name] = on
        self._applied[tool] = self._tried[tool] = connection
        self._said.pop(tool, None)

    def calls(self) -> list[tuple[str, dict[str, list[str]]]]:
        """One `toolman_activate` call per namespace that puts its remembered state back."""
        return [
            (
                tool,
                {
                    f"{kind}_{'on' if on else 'off'}": sorted(n for n, v in state[kind].items() if v is on)
                    for kind in KINDS
                    for on in (True, False)
                },
            )
            for tool, state in self._state.items()
        ]

    async def restore(self, client: SocketClient, key: str, warn: Callable[[str], None], retry: bool) -> None:
        """Apply each remembered state not on the current connection yet (connecting if needed); one refused
        on this connection is tried again only with `retry`. A socket that cannot be reached raises OSError."""
        if not self._state:
            return  # nothing remembered: nothing to connect for (a call or a list connects itself)
        async with self.lock:
            connection = await client.connect()
            for tool, arguments in self.calls():
                if self._applied.get(tool) == connection or (self._tried.get(tool) == connection and not retry):
                    continue
                self._tried[tool] = connection
                params = {"api_key": key, "tool": tool, "arguments": arguments}
                try:
                    refused = _refusal(await asyncio.wait_for(client.request(CALL, params), TIMEOUT))
                except RelayError as err:
                    refused = str(err)
                if refused is None:
                    self._applied[tool] = connection
                    self._said.pop(tool, None)
                elif self._said.get(tool) != refused:
                    self._said[tool] = refused
                    namespace = tool.removesuffix(ACTIVATED)
                    warn(
                        f"could not apply {tool} again on the new connection ({refused}); {namespace} shows its "
                        "default tools until it can (tried again whenever the tools are listed)"
                    )


def _refusal(answer: Any) -> str | None:
    if isinstance(answer, dict) and not answer.get("isError"):
        return None
    content = answer.get("content") if isinstance(answer, dict) else None
    texts = [c.get("text") for c in content if isinstance(c, dict)] if isinstance(content, list) else []
    return " ".join(t for t in texts if isinstance(t, str)) or "refused"
