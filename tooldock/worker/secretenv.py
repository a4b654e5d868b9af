"""Secrets in a worker: received before the namespace is imported, and masked in everything it prints.

A worker container must not carry secret values in its configuration (`docker inspect` shows a
container's environment), so the docker backend starts it with `TOOLDOCK_SECRETS_VIA=socket`: before
importing any tool file the worker listens on its socket and greets the first connection with
    {"op": "hello", "protocol": 2, "namespace": "ns", "needs": "secrets", "names": ["GITHUB_TOKEN"]}
The gateway answers with one line
    {"op": "secrets", "env": {"GITHUB_TOKEN": "..."}, "token": "..."}
and the worker closes that connection, puts the values into its environment, imports the namespace and
serves as usual; its ready handshake carries the token back, so the gateway can tell a worker started
with other values. (A process worker gets its values in its environment from the start.)

Whatever the values came by, the worker replaces each with `***` in its stdout, stderr and error replies.
Only the standard library here.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from tooldock.worker import protocol

MASK = "***"
MIN_MASKED_LENGTH = 4  # shorter values would mask ordinary words; such values are refused by the store anyway


def declared_secrets() -> list[str]:
    """The secret names the namespace declares, as the gateway (or `tooldock deploy`) passed them in
    `TOOLDOCK_SECRET_NAMES` (comma-separated names, never values)."""
    raw = os.environ.get("TOOLDOCK_SECRET_NAMES", "")
    return [name for name in (part.strip() for part in raw.split(",")) if name]


def via_socket() -> bool:
    return os.environ.get("TOOLDOCK_SECRETS_VIA") == "socket"


def from_files() -> dict[str, str]:
    """`TOOLDOCK_SECRETS_VIA=files:DIR` (a worker on Docker Swarm: its secrets mounted as files, one per
    declared name, e.g. /run/secrets/ns/GITHUB_TOKEN): the values read from DIR; nothing for any other way."""
    how = os.environ.get("TOOLDOCK_SECRETS_VIA", "")
    if not how.startswith("files:"):
        return {}
    folder = Path(how.removeprefix("files:"))
    found = {}
    for name in declared_secrets():
        path = folder / name
        if path.is_file():
            found[name] = path.read_text(encoding="utf-8").removesuffix("\n")
        else:
            print(f"secret {name}: no file {path}", file=sys.stderr, flush=True)
    return found


class Masker:
    """Replaces known secret values with `***` in text."""

    def __init__(self, values: list[str]) -> None:
        # Each line of a value of several lines too (a PEM key): output is masked line by line (MaskedStream,
        # the gateway's log), where the whole value never appears at once. Longest first, so a value that
        # contains another is masked whole.
        lines = {line.strip() for v in values if "\n" in v for line in v.splitlines()}
        wanted = {v for v in (*values, *lines) if len(v) >= MIN_MASKED_LENGTH}
        self.values = sorted(wanted, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def scrub(self, data: Any) -> Any:
        """Mask every string inside a JSON-shaped value."""
        if not self.values:
            return data
        if isinstance(data, str):
            return self(data)
        if isinstance(data, dict):
            return {k: self.scrub(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.scrub(v) for v in data]
        return data


class MaskedStream(io.TextIOBase):
    """A text stream that masks secret values line by line before writing them on."""

    def __init__(self, inner: TextIO, masker: Masker) -> None:
        self.inner, self.masker, self._partial = inner, masker, ""

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self.inner.write(self.masker(line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self.inner.write(self.masker(self._partial))
            self._partial = ""
        self.inner.flush()

    def fileno(self) -> int:
        return self.inner.fileno()


def mask_output(masker: Masker) -> None:
    if masker.values:
        sys.stdout = MaskedStream(sys.stdout, masker)
        sys.stderr = MaskedStream(sys.stderr, masker)


async def receive(namespace: str, socket_path: Path, names: list[str]) -> tuple[dict[str, str], str]:
    """Listen on the worker's socket until a gateway sends the secret values; return them and the token."""
    got: asyncio.Future[tuple[dict[str, str], str]] = asyncio.get_running_loop().create_future()

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = {
                "op": "hello",
                "protocol": protocol.PROTOCOL_VERSION,
                "namespace": namespace,
                "needs": "secrets",
                "names": names,
            }
            writer.write(protocol.encode(hello))
            await writer.drain()
            message = protocol.decode(await reader.readline())
            env, token = message.get("env"), message.get("token")
            if message.get("op") == "secrets" and isinstance(env, dict) and isinstance(token, str):
                values = {k: v for k, v in env.items() if k in names and isinstance(v, str)}
                if not got.done():
                    got.set_result((values, token))
        except (ConnectionError, ValueError, json.JSONDecodeError):
            pass  # not a gateway, or it left: wait for the next connection
        finally:
            writer.close()

    socket_path.unlink(missing_ok=True)
    server = await asyncio.start_unix_server(greet, path=str(socket_path), limit=protocol.MAX_LINE_BYTES)
    os.chmod(socket_path, 0o600)
    print(f"[{namespace}] waiting for its {len(names)} secret(s) on {socket_path}", file=sys.stderr, flush=True)
    async with server:
        result = await got
    socket_path.unlink(missing_ok=True)
    return result
