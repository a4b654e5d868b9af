"""What `tooldock swarm` keeps between runs, in its state directory (default `~/.local/state/tooldock/swarm/
STACK`, 0700): the cluster CA and the certificates it issued (the gateway's, one per namespace), a naming key,
and `state.json`: the Docker secret names of the values it generated (the bearer token when none was given,
the Redis password, the state key). Values it generated are never written here: they live in Docker secrets
only (the bearer token is printed once, when it is made).

Docker secrets cannot change, so each is named after its role and an HMAC of its value under the naming key:
`STACK_ROLE_<12 hex>`. A new value is a new secret; the stack file names it; the old one is removed once
nothing uses it. The HMAC keeps a secret's name from telling anything of its value.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from pathlib import Path

from tooldock.atomic import atomic_write
from tooldock.cluster import ca

GATEWAY_PEER = "gateway"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def default_dir(stack: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tooldock" / "swarm" / stack


class SwarmState:
    def __init__(self, folder: Path, stack: str) -> None:
        self.folder, self.stack = folder, stack
        self.ca_dir = folder / "ca"

    def _ensure(self) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder.chmod(0o700)

    def _naming_key(self) -> bytes:
        self._ensure()
        path = self.folder / "naming.key"
        if not path.is_file():
            atomic_write(path, secrets.token_hex(32).encode(), mode=0o600)
        return path.read_bytes()

    def secret_name(self, role: str, value: bytes) -> str:
        """`STACK_ROLE_<hmac>`, at most 64 characters (Docker's limit)."""
        digest = hmac.new(self._naming_key(), role.encode() + b"\0" + value, hashlib.sha256).hexdigest()[:12]
        head = _UNSAFE.sub("-", f"{self.stack}_{role}")[: 64 - 13]
        return f"{head}_{digest}"

    def recorded(self) -> dict[str, str]:
        path = self.folder / "state.json"
        if not path.is_file():
            return {}
        data = json.loads(path.read_text())
        return {str(k): str(v) for k, v in data.get("generated", {}).items()}

    def record(self, generated: dict[str, str]) -> None:
        self._ensure()
        text = json.dumps({"stack": self.stack, "generated": generated}, indent=1, sort_keys=True) + "\n"
        atomic_write(self.folder / "state.json", text.encode(), mode=0o600)

    def forget(self) -> None:
        (self.folder / "state.json").unlink(missing_ok=True)

    def peer(self, name: str) -> dict[str, bytes]:
        """cert.pem, key.pem and trust.pem of a peer (issued by the stack's CA, made once, kept)."""
        self._ensure()
        if not (self.ca_dir / ca.CA_KEY).exists():
            ca.init(self.ca_dir)
        folder = self.ca_dir / "certs" / name
        if not (folder / "cert.pem").is_file():
            folder, _ = ca.issue(self.ca_dir, name)
        return {f: (folder / f).read_bytes() for f in ("cert.pem", "key.pem", "trust.pem")}


def worker_peer(namespace: str) -> str:
    return f"worker-{namespace}"


def new_password() -> str:
    return secrets.token_urlsafe(32)
