"""API keys: scoped credentials for sandboxes (the relay socket) and HTTP clients (seed 002).

    store = KeyStore.from_env()                       # TOOLDOCK_KEYS_DIR
    key, secret = store.create("ci", "read", namespaces=("weather",), expires_in=86400)
    store.check(secret)                               # -> ApiKey, or InvalidApiKey (unknown, revoked, expired)
    key.allows_tool("weather", descriptor)            # the scope rules

Modules, one job each: `scope` (an ApiKey and what it may see and call), `validate` (names, scopes, globs,
durations), `store` (the keys file: hashes only, atomic 0600 writes, a lock). Imports only `tooldock.errors`
and the secrets store's private-file helpers.
"""

from tooldock.keys.scope import SCOPES, ApiKey
from tooldock.keys.store import KEY_PREFIX, KeyStore, default_dir, file_signature

# Read by the CLI and the gateway (documented in the README; tests/test_docs.py checks).
ENV_VARS = ("TOOLDOCK_KEYS_DIR",)

__all__ = ["ENV_VARS", "KEY_PREFIX", "SCOPES", "ApiKey", "KeyStore", "default_dir", "file_signature"]
