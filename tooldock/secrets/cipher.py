"""One value in sops's format: `ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<type>]`.

Follows sops's `aes/cipher.go`: AES-256-GCM with a fresh 32-byte nonce per value, the value's key path as
additional data, standard base64 for each part, the 16-byte tag apart from the data. Types are `str`, `int`,
`float`, `bool`, `bytes` and `time` (sops writes the last two only from Go code and YAML timestamps; both
read back here as text). Empty strings stay empty: sops does not encrypt them.

`to_bytes` is sops's `ToBytes`: the bytes a value adds to the file's MAC (`True`/`False` for booleans,
Go's shortest positional notation for floats).
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
from decimal import Decimal
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tooldock.errors import StoreCorrupt

NONCE_SIZE = 32
TAG_SIZE = 16
_ENC_RE = re.compile(r"^ENC\[AES256_GCM,data:(?P<data>[^,]*),iv:(?P<iv>[^,]+),tag:(?P<tag>[^,]+),type:(?P<type>\w+)\]$")
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def go_float(value: float) -> str:
    """`strconv.FormatFloat(value, 'f', -1, 64)`: the shortest digits that round-trip, never an exponent."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def to_bytes(value: Any) -> bytes:
    """What sops hashes into the MAC for one plaintext value."""
    if isinstance(value, bool):
        return b"True" if value else b"False"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        return go_float(value).encode()
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise StoreCorrupt(f"a value of type {type(value).__name__} cannot be stored in a sops file")


def _typed(value: Any) -> tuple[str, bytes]:
    if isinstance(value, bool):
        return "bool", to_bytes(value)
    if isinstance(value, int):
        return "int", to_bytes(value)
    if isinstance(value, float):
        return "float", to_bytes(value)
    if isinstance(value, str):
        return "str", value.encode()
    raise StoreCorrupt(f"a value of type {type(value).__name__} cannot be encrypted in a sops file")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def encrypt_value(value: Any, key: bytes, additional: str) -> str:
    """One value as sops writes it, sealed to its key path (`additional`, e.g. `global:GITHUB_TOKEN:`)."""
    if value == "":
        return ""
    kind, plain = _typed(value)
    iv = os.urandom(NONCE_SIZE)
    sealed = AESGCM(key).encrypt(iv, plain, additional.encode())
    return f"ENC[AES256_GCM,data:{_b64(sealed[:-TAG_SIZE])},iv:{_b64(iv)},tag:{_b64(sealed[-TAG_SIZE:])},type:{kind}]"


def decrypt_value(token: str, key: bytes, additional: str, where: str) -> Any:
    """The plaintext of one `ENC[...]` value; StoreCorrupt names `where` (a path, never the value)."""
    if token == "":
        return ""
    found = _ENC_RE.match(token)
    if found is None:
        raise StoreCorrupt(f"{where} is not a sops ENC[AES256_GCM,...] value")
    try:
        iv, data, tag = (base64.b64decode(found[n], validate=True) for n in ("iv", "data", "tag"))
        plain = AESGCM(key).decrypt(iv, data + tag, additional.encode())
    except (InvalidTag, ValueError, binascii.Error):
        raise StoreCorrupt(
            f"{where} fails its integrity check (tampered, moved, or encrypted with another key)"
        ) from None
    return _decode(plain, found["type"], where)


def _decode(plain: bytes, kind: str, where: str) -> Any:
    try:
        text = plain.decode()
        if kind in ("str", "bytes", "time", "comment"):
            return text
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool" and text in _GO_TRUE | _GO_FALSE:
            return text in _GO_TRUE
    except (UnicodeDecodeError, ValueError):
        pass  # the message below must not quote the plaintext
    raise StoreCorrupt(f"{where} does not decrypt to a valid {kind!r} value")
