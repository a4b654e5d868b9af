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
namespace), `edit` (the $EDITOR flow). Imports only `tooldock.errors` and `tooldock.namespace`.
"""

from tooldock.secrets.resolve import Resolved, SecretsStatus, resolve_namespace
from tooldock.secrets.store import SecretStore, default_dir

# Read by the CLI and the gateway (documented in the README; tests/test_docs.py checks).
ENV_VARS = ("TOOLDOCK_SECRETS_DIR", "TOOLDOCK_AGE_KEY_FILE", "SOPS_AGE_KEY_FILE", "EDITOR")

__all__ = ["ENV_VARS", "Resolved", "SecretStore", "SecretsStatus", "default_dir", "resolve_namespace"]
