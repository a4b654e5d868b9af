"""The secrets store: values encrypted to age recipients in sops's file format, status in plaintext.

Values enter only through the human CLI (`tooldock secrets ...`); the gateway decrypts them in memory
and hands each worker the names its namespace declares. See `store` (the directory and its operations),
`sopsfile` (the format), `keys` (age identities), `files` (atomic private writes, the lock), `edit`.
"""

from tooldock.secrets.store import SecretStore

# Read by the CLI and the gateway (documented in the README; tests/test_docs.py checks).
ENV_VARS = ("TOOLDOCK_SECRETS_DIR", "TOOLDOCK_AGE_KEY_FILE", "SOPS_AGE_KEY_FILE", "EDITOR")

__all__ = ["ENV_VARS", "SecretStore"]
