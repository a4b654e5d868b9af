"""Which secret values each namespace's worker gets, read from the secrets store at start and on reload.

The gateway decrypts the store (`tooldock.secrets`, age identity from `TOOLDOCK_AGE_KEY_FILE`) in memory
and hands each worker only the names its `tooldock.yaml` declares: the namespace's scope over the global
scope over the folder's `env:` defaults. A namespace whose declared secret is missing or still a
placeholder starts anyway; its status says so, and a call that fails for lack of it is told which command
sets it. Every value the gateway knows is masked (`***`) in what it logs and answers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldock.namespace.models import NamespaceSource
from tooldock.runtime.workerclient import SecretEnv
from tooldock.secrets import SecretsStatus, SecretStore, resolve_namespace
from tooldock.worker.secretenv import Masker


@dataclass(frozen=True)
class NamespaceSecrets:
    env: SecretEnv = field(default_factory=SecretEnv)
    status: SecretsStatus = "no_secrets_needed"
    missing: tuple[str, ...] = ()
    placeholders: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"secrets_status": self.status}
        if self.missing:
            body["secrets_missing"] = list(self.missing)
        if self.placeholders:
            body["secrets_placeholders"] = list(self.placeholders)
        return body

    def unset(self, name: str) -> bool:
        return name in self.missing or name in self.placeholders


class SecretMap:
    """The decrypted store as the gateway holds it between reloads."""

    def __init__(self, store: SecretStore) -> None:
        self.store = store
        self._values: dict[str, Any] = {"global": {}, "namespaces": {}}
        self._placeholders: set[tuple[str, str]] = set()  # (scope, key): "global" or a namespace
        self._key = os.urandom(32)  # names a set of values without revealing them (see `_token_key`)
        self.mask = Masker([])

    def refresh(self) -> None:
        """Decrypt the store again; raises `tooldock.errors.SecretsError` (the previous values stay)."""
        values, self._placeholders = self.store.snapshot()
        self._values = values
        self._key = _token_key(self.store.key_path, self._key)
        everything = [*values.get("global", {}).values()]
        for scoped in values.get("namespaces", {}).values():
            everything += scoped.values()
        self.mask = Masker([v for v in everything if isinstance(v, str)])

    def for_namespace(self, source: NamespaceSource) -> NamespaceSecrets:
        if not source.config.secrets:
            return NamespaceSecrets()
        # A declared name with only an `env:` default counts as set; the worker has that value in its
        # environment either way.
        resolved = resolve_namespace(
            self._values, self._placeholders, source.name, source.config.secrets, dict(source.config.env)
        )
        canonical = json.dumps(resolved.values, sort_keys=True).encode()
        token = hmac.new(self._key, canonical, hashlib.sha256).hexdigest()
        return NamespaceSecrets(
            SecretEnv(resolved.values, token), resolved.status, resolved.missing, resolved.placeholders
        )


def _token_key(identity: Path, fallback: bytes) -> bytes:
    """The key that names a namespace's values (the token a worker echoes in its handshake), derived from the
    store's age identity: the same values get the same token in the next gateway process, so a container
    that already holds them is not restarted after a gateway restart. Only who holds the identity (and can
    decrypt the values anyway) can compute it; the token reveals nothing of the values."""
    try:
        material = identity.read_bytes()
    except OSError:
        return fallback
    return hashlib.sha256(b"tooldock secret token v1\0" + material).digest()
