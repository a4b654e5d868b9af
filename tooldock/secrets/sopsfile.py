"""sops's file format (sops 3.x with age), read and written without the sops binary.

A plaintext tree (nested mappings and lists) becomes the same tree with every value replaced by
`ENC[AES256_GCM,...]` (see `cipher`), sealed with a random 32-byte data key to its key path joined with
`:` plus a trailing `:` (`namespaces:weather:API_KEY:`; list items share their list's path), as sops's
`sops.go` walks it. The `sops:` block holds the data key encrypted to each age recipient (ASCII-armored
age), `lastmodified` (RFC 3339, UTC), `mac` (SHA-512 over every value in walk order, upper-case hex,
encrypted with `lastmodified` as additional data), `unencrypted_suffix` and `version`.

Reading follows the file's own rules, as sops does: `unencrypted_suffix` (default `_unencrypted`: a key
ending in it, and everything below it, stays in clear and still counts in the MAC), `encrypted_suffix`,
`unencrypted_regex`, `encrypted_regex` and `mac_only_encrypted`. Writing always uses the default rule.
Key groups ToolDock cannot open (`kms`, `gcp_kms`, `hckms`, `azure_kv`, `hc_vault`, `pgp`) are carried
over unchanged while the data key stays; `key_groups` (Shamir) and the comment regexes are refused.
`sops --decrypt` opens what this writes; files written by `sops --encrypt --age ...` read back here.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyrage

from tooldock.errors import NoIdentity, StoreCorrupt
from tooldock.secrets.cipher import decrypt_value, encrypt_value, to_bytes

SOPS_VERSION = "3.9.4"
UNENCRYPTED_SUFFIX = "_unencrypted"
FOREIGN_KEY_GROUPS = ("kms", "gcp_kms", "hckms", "azure_kv", "hc_vault", "pgp")
# sops's MACOnlyEncryptedInitialization: a MAC over encrypted values only starts from these bytes.
_MAC_ONLY_INIT = bytes.fromhex("8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69")
_RULES = ("unencrypted_suffix", "encrypted_suffix", "unencrypted_regex", "encrypted_regex")
_COMMENT_RULES = ("unencrypted_comment_regex", "encrypted_comment_regex")

KeyPath = tuple[str, ...]  # the keys from the root to a value


@dataclass(frozen=True)
class Rules:
    """Which values a file encrypts (sops's `shouldBeEncrypted`) and what its MAC covers."""

    unencrypted_suffix: str = UNENCRYPTED_SUFFIX
    encrypted_suffix: str = ""
    unencrypted_regex: str = ""
    encrypted_regex: str = ""
    mac_only_encrypted: bool = False

    @classmethod
    def of(cls, meta: dict[str, Any], where: str) -> Rules:
        for name in _COMMENT_RULES:
            if meta.get(name):
                raise StoreCorrupt(f"{where} uses sops's {name}, which ToolDock cannot read; re-encrypt it without it")
        given = {name: str(meta[name]) for name in _RULES if meta.get(name)}
        if len(given) > 1:
            raise StoreCorrupt(f"{where} sets more than one of {', '.join(_RULES)}, which sops refuses too")
        for name in ("unencrypted_regex", "encrypted_regex"):
            try:
                re.compile(given.get(name, ""))
            except re.error:
                raise StoreCorrupt(f"{where}: sops.{name} is not a regular expression ToolDock can read") from None
        return cls(
            unencrypted_suffix=given.get("unencrypted_suffix", "" if given else UNENCRYPTED_SUFFIX),
            encrypted_suffix=given.get("encrypted_suffix", ""),
            unencrypted_regex=given.get("unencrypted_regex", ""),
            encrypted_regex=given.get("encrypted_regex", ""),
            mac_only_encrypted=meta.get("mac_only_encrypted") is True,
        )

    def encrypts(self, path: KeyPath) -> bool:
        encrypted = True
        if self.unencrypted_suffix and any(p.endswith(self.unencrypted_suffix) for p in path):
            encrypted = False
        if self.encrypted_suffix:
            encrypted = any(p.endswith(self.encrypted_suffix) for p in path)
        if self.unencrypted_regex and any(re.search(self.unencrypted_regex, p) for p in path):
            encrypted = False
        if self.encrypted_regex:
            encrypted = any(re.search(self.encrypted_regex, p) for p in path)
        return encrypted


def _walk(value: Any, path: KeyPath, leaf: Callable[[Any, KeyPath], Any]) -> Any:
    """sops's walk: mappings add their key to the path, list items share it, nulls are left alone."""
    if isinstance(value, dict):
        return {key: _walk(item, (*path, str(key)), leaf) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, path, leaf) for item in value]
    if value is None:
        return None
    return leaf(value, path)


def _additional(path: KeyPath) -> str:
    return ":".join(path) + ":"


def rfc3339(moment: datetime.datetime) -> str:
    """Go's `time.RFC3339` layout: seconds, then `Z` for UTC or the offset."""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    offset = moment.utcoffset()
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign, minutes = ("+" if minutes >= 0 else "-"), abs(minutes)
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _lastmodified(meta: dict[str, Any], where: str) -> str:
    """The MAC's additional data: `lastmodified` parsed and formatted again as sops does."""
    raw = meta.get("lastmodified")
    try:
        moment = raw if isinstance(raw, datetime.datetime) else datetime.datetime.fromisoformat(str(raw))
    except ValueError:
        raise StoreCorrupt(f"{where} has no valid sops.lastmodified (RFC 3339)") from None
    if moment.tzinfo is None:
        raise StoreCorrupt(f"{where}: sops.lastmodified has no time zone")
    return rfc3339(moment)


def encrypt(
    tree: dict[str, Any],
    recipients: list[str],
    data_key: bytes | None = None,
    carried: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The sops document for a plaintext tree, its data key encrypted to every age recipient.

    Always written with sops's default rule (only keys ending in `_unencrypted` stay in clear), whatever
    rules the previous file had: a new value is never left in clear by someone else's `encrypted_regex`.
    `carried` is the previous file's `sops:` block; its other key groups (kms, pgp, ...) are kept when
    the data key is the same one (`data_key` given), since their `enc` still opens it."""
    if not recipients:
        raise StoreCorrupt("refusing to write a secrets file no age recipient can open")
    key = data_key or os.urandom(32)
    previous = (carried or {}) if data_key else {}
    rules = Rules()
    mac = hashlib.sha512()

    def seal(value: Any, path: KeyPath) -> Any:
        mac.update(to_bytes(value))
        return encrypt_value(value, key, _additional(path)) if rules.encrypts(path) else value

    out: dict[str, Any] = {k: _walk(v, (str(k),), seal) for k, v in tree.items() if k != "sops"}
    modified = rfc3339(datetime.datetime.now(datetime.UTC).replace(microsecond=0))
    meta: dict[str, Any] = {g: previous[g] for g in FOREIGN_KEY_GROUPS if previous.get(g) and g != "pgp"}
    meta["age"] = [{"recipient": r, "enc": wrap(key, r)} for r in recipients]
    meta["lastmodified"] = modified
    meta["mac"] = encrypt_value(mac.hexdigest().upper(), key, modified)
    if previous.get("pgp"):
        meta["pgp"] = previous["pgp"]
    meta["unencrypted_suffix"] = UNENCRYPTED_SUFFIX
    meta["version"] = SOPS_VERSION
    out["sops"] = meta
    return out


def foreign_key_groups(document: dict[str, Any]) -> list[str]:
    """The key groups in the file other than age (ToolDock keeps them but cannot encrypt to them)."""
    meta = document.get("sops") or {}
    return [g for g in FOREIGN_KEY_GROUPS if meta.get(g)]


def recipients(document: dict[str, Any]) -> list[str]:
    return [str(e["recipient"]) for e in (document.get("sops") or {}).get("age") or [] if e.get("recipient")]


def data_key(document: dict[str, Any], identities: list[pyrage.x25519.Identity], where: str) -> bytes:
    """The data key, from the first age entry one of the identities opens."""
    meta = document.get("sops") or {}
    if meta.get("key_groups"):
        raise StoreCorrupt(f"{where} uses sops key groups (Shamir secret sharing), which ToolDock cannot read")
    entries = meta.get("age") or []
    if not entries:
        raise StoreCorrupt(f"{where} has no sops.age entries: it is not a sops file encrypted to age recipients")
    for entry in entries:
        try:
            key = pyrage.decrypt(str(entry.get("enc", "")).encode(), identities)
        except pyrage.DecryptError:
            continue
        if len(key) != 32:
            raise StoreCorrupt(f"{where}: the data key for {entry.get('recipient')} is not 32 bytes")
        return bytes(key)
    raise NoIdentity(f"no age identity given opens {where} (it is encrypted to: {', '.join(recipients(document))})")


def decrypt(document: dict[str, Any], identities: list[pyrage.x25519.Identity], where: str) -> dict[str, Any]:
    """The plaintext tree; raises before returning anything if a value or the MAC does not verify."""
    return decrypt_with(document, data_key(document, identities, where), where)


def decrypt_with(document: dict[str, Any], key: bytes, where: str) -> dict[str, Any]:
    meta = document.get("sops")
    if not isinstance(meta, dict):
        raise StoreCorrupt(f"{where} is not a sops file (no sops: block)")
    rules = Rules.of(meta, where)
    mac = hashlib.sha512(_MAC_ONLY_INIT if rules.mac_only_encrypted else b"")

    def open_(token: Any, path: KeyPath) -> Any:
        encrypted = rules.encrypts(path)
        if encrypted and not isinstance(token, str):
            raise StoreCorrupt(f"{where}: the value at {':'.join(path)} is not encrypted")
        value = decrypt_value(token, key, _additional(path), f"the value at {':'.join(path)}") if encrypted else token
        if encrypted or not rules.mac_only_encrypted:
            mac.update(to_bytes(value))
        return value

    tree = {k: _walk(v, (str(k),), open_) for k, v in document.items() if k != "sops"}
    stored = meta.get("mac")
    if not stored or not isinstance(stored, str):
        raise StoreCorrupt(f"{where} has no sops.mac: refusing a file whose integrity cannot be checked")
    expected = decrypt_value(stored, key, _lastmodified(meta, where), "sops.mac")
    if not hmac.compare_digest(str(expected).encode(), mac.hexdigest().upper().encode()):
        raise StoreCorrupt(f"{where}: the MAC does not match its values (the file was changed outside sops/ToolDock)")
    return tree


def wrap(key: bytes, recipient: str) -> str:
    """The data key encrypted to one age recipient, ASCII-armored as sops stores it."""
    return pyrage.encrypt(key, [pyrage.x25519.Recipient.from_str(recipient)], armored=True).decode()
