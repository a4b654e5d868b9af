"""The secrets store: values encrypted to age recipients in sops's file format, status in plaintext.

Values enter only through the human CLI (`tooldock secrets ...`); the gateway decrypts them in memory
and hands each worker the names its namespace declares:

    store = SecretStore.from_env()            # TOOLDOCK_SECRETS_DIR, TOOLDOCK_AGE_KEY_FILE
    values = store.load_all()                 # decrypt once: {"global": {...}, "namespaces": {...}}
    got = resolve_namespace(values, store.placeholders(), "weather", ["API_KEY"], {"API_KEY": "default"})
    got.values, got.status                    # {"API_KEY": ...}, "ok" | "missing" | "placeholders" | ...

Modules, one job each: `store` (the directory and its operations), `sopsfile` (the sops tree format),
`cipher` (one ENC[...] value), `yamlfile` (YAML as sops reads it), `keys` (age identities), `files`
(atomic private writes, the lock), `validate` (names and values), `resolve` (values and status per
namespace), `edit` (the $EDITOR flow). Imports only `tooldock.errors`, `tooldock.envvars` and `tooldock.namespace`.
"""

from tooldock.envvars import EnvVar, names
from tooldock.secrets.resolve import Resolved, SecretsStatus, resolve_namespace
from tooldock.secrets.store import SecretStore, default_dir

# Read by the CLI and the gateway (docs/reference/settings.md is generated from these).
SETTINGS_TITLE = "Secrets store"
SETTINGS_INTRO = (
    "The encrypted [secrets](../howto/secrets.md) store, read by the gateway and written by `tooldock secrets`."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_SECRETS_DIR",
        "`~/.config/tooldock/secrets`",
        "the secrets store's directory (`secrets.enc.yaml`, `secrets.meta.yaml`, `secrets.lock`), read by the "
        "gateway at start and on every reload, written by `tooldock secrets`",
    ),
    EnvVar(
        "TOOLDOCK_AGE_KEY_FILE",
        "`~/.config/tooldock/age.key`",
        "the age identity file that decrypts the store (`SOPS_AGE_KEY_FILE` is honoured when this is unset). A "
        "store the gateway cannot decrypt stops start-up with the key file and the store's recipients named",
    ),
    EnvVar(
        "SOPS_AGE_KEY_FILE",
        "unset",
        "sops's name for the age identity file, so a sops user's existing key works: used (by "
        "`tooldock secrets init` too) when `TOOLDOCK_AGE_KEY_FILE` is unset",
    ),
    EnvVar(
        "EDITOR",
        "`vi`",
        "the editor `tooldock secrets edit` runs (`VISUAL` first, as usual)",
    ),
    EnvVar(
        "VISUAL",
        "unset",
        "the editor `tooldock secrets edit` runs when set, before `EDITOR`",
    ),
)
ENV_VARS = names(SETTINGS)

__all__ = [
    "ENV_VARS",
    "SETTINGS",
    "SETTINGS_INTRO",
    "SETTINGS_TITLE",
    "Resolved",
    "SecretStore",
    "SecretsStatus",
    "default_dir",
    "resolve_namespace",
]
