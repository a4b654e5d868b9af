"""The secrets store: values encrypted to age recipients in sops's file format, status in plaintext.

Values enter only through the human CLI (`tooldock secrets ...`); the gateway decrypts them in memory
and hands each worker the names its namespace declares. See `store` (the directory and its operations),
`sopsfile` (the format), `keys` (age identities), `files` (atomic private writes, the lock), `edit`.
"""

from tooldock.secrets.store import SecretStore

__all__ = ["SecretStore"]
