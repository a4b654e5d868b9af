"""Age identities: the key file that opens the store, made by `tooldock secrets init`.

The key file is `TOOLDOCK_AGE_KEY_FILE`, else `SOPS_AGE_KEY_FILE` (so a sops user's existing key works),
else `~/.config/tooldock/age.key`. It holds one or more `AGE-SECRET-KEY-1...` lines in age-keygen's format
(comments allowed) and is created 0600.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pyrage

from tooldock.errors import InvalidSecretInput, NoIdentity
from tooldock.secrets.files import write_private


def key_file() -> Path:
    for variable in ("TOOLDOCK_AGE_KEY_FILE", "SOPS_AGE_KEY_FILE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    return Path.home() / ".config" / "tooldock" / "age.key"


def load_identities(path: Path) -> list[pyrage.x25519.Identity]:
    if not path.is_file():
        raise NoIdentity(
            f"no age key file at {path}: run `tooldock secrets init`, or point TOOLDOCK_AGE_KEY_FILE at yours"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise NoIdentity(
            f"the age key file {path} cannot be read: {getattr(exc, 'strerror', None) or 'not text'}"
        ) from None
    identities = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            identities.append(pyrage.x25519.Identity.from_str(line))
        except pyrage.IdentityError:
            raise NoIdentity(f"{path}:{number} is not an age identity (AGE-SECRET-KEY-1...)") from None
    if not identities:
        raise NoIdentity(f"{path} holds no age identity")
    return identities


def create_identity(path: Path) -> str:
    """A new identity at `path` (0600; an existing file is never overwritten); returns its recipient."""
    identity = pyrage.x25519.Identity.generate()
    recipient = str(identity.to_public())
    created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = f"# created: {created}\n# public key: {recipient}\n{identity}\n"
    write_private(path, text.encode(), exclusive=True)
    return recipient


def recipient_of(path: Path) -> str:
    return str(load_identities(path)[0].to_public())


def check_recipient(text: str) -> str:
    text = text.strip()
    try:
        pyrage.x25519.Recipient.from_str(text)
    except pyrage.RecipientError:
        raise InvalidSecretInput(f"{text[:80]!r} is not an age recipient (age1... as age-keygen -y prints)") from None
    return text
