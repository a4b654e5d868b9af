"""MCP session ids that say which deployment minted them (issue 56).

With replicas sharing a state store, a 2025-era session's id is a random nonce and a tag: the first 128 bits
of HMAC-SHA256 over the namespace and the nonce, keyed by a key derived from TOOLDOCK_STATE_KEY for this one
purpose. The first key tags; every key of the list opens, so a rotated key keeps its sessions until they end.
A replica adopts a session from the store only when its id carries a tag one of its keys made: an id minted
by a gateway with other keys (another deployment on the same Redis, or a replica started without the shared
key) is refused like an unknown session, without a store round trip.

The session's facts stay in the store (sharedsessions.py), not sealed in the id: a DELETE must end a session
everywhere, which a store entry does and a self-contained id cannot.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence

NONCE_HEX = 32  # 128 random bits
TAG_HEX = 32  # 128 bits of the HMAC
_PURPOSE = b"tooldock mcp-session-id v1"


class SessionIds:
    """Mints and checks the session ids of one namespace."""

    def __init__(self, keys: Sequence[str], namespace: str) -> None:
        if not keys:
            raise ValueError("SessionIds needs at least one key")
        self._keys = [hmac.new(key.encode(), _PURPOSE, hashlib.sha256).digest() for key in keys]
        self._namespace = namespace.encode() + b"\0"

    def _tag(self, key: bytes, nonce: str) -> str:
        return hmac.new(key, self._namespace + nonce.encode(), hashlib.sha256).hexdigest()[:TAG_HEX]

    def new(self) -> str:
        nonce = secrets.token_hex(NONCE_HEX // 2)
        return nonce + self._tag(self._keys[0], nonce)

    def genuine(self, sid: str) -> bool:
        """Whether `sid` was minted for this namespace with one of the keys."""
        if len(sid) != NONCE_HEX + TAG_HEX:
            return False
        nonce, tag = sid[:NONCE_HEX], sid[NONCE_HEX:]
        return any(hmac.compare_digest(tag, self._tag(key, nonce)) for key in self._keys)
