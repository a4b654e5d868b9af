"""sops's file format (sops 3.x with age), read and written without the sops binary.

A plaintext tree (nested mappings of strings) becomes the same tree with every value replaced by
    ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:str]
AES-256-GCM with a random 32-byte data key, a fresh 32-byte nonce per value, and the value's key path as
additional data (`global:GITHUB_TOKEN:`), as sops's `aes/cipher.go` and `sops.go` do. A `sops:` block holds
the data key encrypted to each age recipient (ASCII-armored age), `lastmodified` (RFC 3339, UTC), `mac`
(SHA-512 over every value in tree order, upper-case hex, encrypted with `lastmodified` as additional data),
`unencrypted_suffix` and `version`. Keys ending in `_unencrypted` stay in clear (and count in the MAC).
Files written by `sops --encrypt --age ...` read back here, and `sops --decrypt` opens what we write.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import re
from collections.abc import Iterator
from typing import Any

import pyrage
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tooldock.errors import NoIdentity, StoreCorrupt

SOPS_VERSION = "3.9.4"
UNENCRYPTED_SUFFIX = "_unencrypted"
_ENC_RE = re.compile(r"^ENC\[AES256_GCM,data:(?P<data>[^,]*),iv:(?P<iv>[^,]+),tag:(?P<tag>[^,]+),type:(?P<type>\w+)\]$")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def encrypt_value(value: Any, key: bytes, additional: str) -> str:
    """One value as sops writes it; empty strings stay empty (sops does not encrypt them)."""
    if value == "":
        return ""
    kind, text = _typed(value)
    iv = os.urandom(32)
    sealed = AESGCM(key).encrypt(iv, text.encode(), additional.encode())
    return f"ENC[AES256_GCM,data:{_b64(sealed[:-16])},iv:{_b64(iv)},tag:{_b64(sealed[-16:])},type:{kind}]"


def decrypt_value(token: str, key: bytes, additional: str) -> Any:
    found = _ENC_RE.match(token)
    if found is None:
        raise StoreCorrupt(f"{additional or 'a value'} is not a sops ENC[...] value")
    try:
        iv, data, tag = (base64.b64decode(found[n]) for n in ("iv", "data", "tag"))
        plain = AESGCM(key).decrypt(iv, data + tag, additional.encode()).decode()
    except (InvalidTag, ValueError) as exc:
        raise StoreCorrupt(f"the value at {additional!r} fails its integrity check (tampered, or another key)") from exc
    kind = found["type"]
    if kind == "int":
        return int(plain)
    if kind == "float":
        return float(plain)
    if kind == "bool":
        return plain == "True"
    return plain


def _typed(value: Any) -> tuple[str, str]:
    if isinstance(value, bool):
        return "bool", "True" if value else "False"
    if isinstance(value, int):
        return "int", str(value)
    if isinstance(value, float):
        return "float", repr(value)
    return "str", str(value)


def _leaves(tree: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf value with its key path, in the tree's order (sops's walk)."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, (*path, str(key)))
        else:
            yield (*path, str(key)), value


def _set(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _clear(path: tuple[str, ...]) -> bool:
    return path[-1].endswith(UNENCRYPTED_SUFFIX)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encrypt(tree: dict[str, Any], recipients: list[str], data_key: bytes | None = None) -> dict[str, Any]:
    """The sops document for a plaintext tree, its data key encrypted to every recipient."""
    key = data_key or os.urandom(32)
    out: dict[str, Any] = {}
    mac = hashlib.sha512()
    for path, value in _leaves(tree):
        mac.update(_typed(value)[1].encode())
        _set(out, path, value if _clear(path) else encrypt_value(value, key, ":".join(path) + ":"))
    modified = _now()
    out["sops"] = {
        "age": [{"recipient": r, "enc": _wrap(key, r)} for r in recipients],
        "lastmodified": modified,
        "mac": encrypt_value(mac.hexdigest().upper(), key, modified),
        "unencrypted_suffix": UNENCRYPTED_SUFFIX,
        "version": SOPS_VERSION,
    }
    return out


def data_key(document: dict[str, Any], identities: list[pyrage.x25519.Identity], where: str) -> bytes:
    """The data key, from the first age entry one of the identities opens."""
    entries = (document.get("sops") or {}).get("age") or []
    if not entries:
        raise StoreCorrupt(f"{where} has no sops.age entries: it is not a sops file encrypted to age recipients")
    for entry in entries:
        try:
            return pyrage.decrypt(str(entry.get("enc", "")).encode(), identities)
        except pyrage.DecryptError:
            continue
    recipients = ", ".join(str(e.get("recipient")) for e in entries)
    raise NoIdentity(f"no age identity given opens {where} (it is encrypted to: {recipients})")


def decrypt(document: dict[str, Any], identities: list[pyrage.x25519.Identity], where: str) -> dict[str, Any]:
    """The plaintext tree; raises before returning anything if a value or the MAC does not verify."""
    key = data_key(document, identities, where)
    meta = document["sops"]
    tree: dict[str, Any] = {}
    mac = hashlib.sha512()
    body = {k: v for k, v in document.items() if k != "sops"}
    for path, token in _leaves(body):
        value = token if _clear(path) or token == "" else decrypt_value(str(token), key, ":".join(path) + ":")
        mac.update(_typed(value)[1].encode())
        _set(tree, path, value)
    stored = meta.get("mac")
    if not stored:
        raise StoreCorrupt(f"{where} has no sops.mac: refusing a file whose integrity cannot be checked")
    modified = meta.get("lastmodified", "")
    if isinstance(modified, datetime.datetime):  # an unquoted timestamp, as YAML readers see it
        modified = modified.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    expected = decrypt_value(str(stored), key, str(modified))
    if expected != mac.hexdigest().upper():
        raise StoreCorrupt(f"{where}: the MAC does not match its values (the file was changed outside sops/ToolDock)")
    return tree


def _wrap(key: bytes, recipient: str) -> str:
    """The data key encrypted to one age recipient, ASCII-armored as sops stores it."""
    return pyrage.encrypt(key, [pyrage.x25519.Recipient.from_str(recipient)], armored=True).decode()
