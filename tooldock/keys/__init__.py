"""API keys: scoped credentials for sandboxes (the relay socket) and HTTP clients (seed 002).

    store = KeyStore.from_env()                       # TOOLDOCK_KEYS_DIR
    key, secret = store.create("ci", "read", namespaces=("weather",), expires_in=86400)
    store.check(secret)                               # -> ApiKey, or InvalidApiKey (unknown, revoked, expired)
    key.allows_tool("weather", descriptor)            # the scope rules

Modules, one job each: `scope` (an ApiKey and what it may see and call), `validate` (names, scopes, globs,
durations), `store` (the keys file: hashes only, atomic 0600 writes, a lock). Imports only `tooldock.errors`,
`tooldock.envvars` and the secrets store's private-file helpers.
"""

from tooldock.envvars import EnvVar, names
from tooldock.keys.scope import SCOPES, ApiKey
from tooldock.keys.store import KEY_PREFIX, KeyStore, default_dir, file_signature

# Read by the CLI and the gateway (docs/reference/settings.md is generated from these).
SETTINGS_TITLE = "API keys"
SETTINGS_INTRO = (
    "The API key store, written by `tooldock keys` and read by the gateway to check the keys that requests and "
    "relay calls present."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_KEYS_DIR",
        "`~/.config/tooldock/keys`",
        "the API key store's directory (`keys.json`: ids, names, scopes, globs, times and SHA-256 hashes, never a "
        "key; `keys.lock`), made 0700 with 0600 files; written by `tooldock keys`, looked at by the gateway on "
        "every request or relay call that presents a key (read again when it changed)",
    ),
)
ENV_VARS = names(SETTINGS)

__all__ = [
    "ENV_VARS",
    "KEY_PREFIX",
    "SCOPES",
    "SETTINGS",
    "SETTINGS_INTRO",
    "SETTINGS_TITLE",
    "ApiKey",
    "KeyStore",
    "default_dir",
    "file_signature",
]
