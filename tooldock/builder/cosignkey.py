"""Signing keys in cosign's files: `PREFIX.key` (encrypted private key) and `PREFIX.pub` (PEM public key).

The private key file is what `cosign generate-key-pair` writes: a PEM block `ENCRYPTED SIGSTORE PRIVATE KEY`
(cosign before 2.0 wrote `ENCRYPTED COSIGN PRIVATE KEY`, read too) whose body is the JSON of
go-securesystemslib's `encrypted` package (formerly go-tuf's): the PKCS#8 DER of the key sealed with NaCl
secretbox (XSalsa20-Poly1305) under a key derived from the passphrase with scrypt (N=32768, r=8, p=1, 32-byte
salt, 24-byte nonce). Keys are ECDSA P-256, as cosign's own; other key types cosign can import are decrypted
but refused for signing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tooldock.errors import BuilderError

PEM_TYPE = "ENCRYPTED SIGSTORE PRIVATE KEY"
OLD_PEM_TYPES = ("ENCRYPTED COSIGN PRIVATE KEY",)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 32768, 8, 1
PASSWORD_ENV = "TOOLDOCK_SIGNING_PASSWORD"


class SigningError(BuilderError):
    """A key could not be read, an image could not be signed, or a signature did not verify."""

    exit_code = 1


class WrongPassphrase(SigningError):
    exit_code = 5


class NotSigned(SigningError):
    """No signature at all where one was required."""

    exit_code = 3


class BadSignature(SigningError):
    """Signatures there, none valid by the given keys for this digest (another key, or altered)."""

    exit_code = 4


def generate() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _derive(passphrase: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(passphrase, salt=salt, n=n, r=r, p=p, dklen=32, maxmem=128 * r * n + 2**20)


def _pem(kind: str, body: bytes) -> bytes:
    text = base64.b64encode(body).decode()
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    return ("\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"]) + "\n").encode()


def encrypt(key: ec.EllipticCurvePrivateKey, passphrase: bytes) -> bytes:
    """The `PREFIX.key` file's bytes."""
    from nacl.secret import SecretBox

    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    salt, nonce = os.urandom(32), os.urandom(24)
    sealed = SecretBox(_derive(passphrase, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)).encrypt(der, nonce).ciphertext
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    document = {
        "kdf": {"name": "scrypt", "params": {"N": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P}, "salt": b64(salt)},
        "cipher": {"name": "nacl/secretbox", "nonce": b64(nonce)},
        "ciphertext": b64(sealed),
    }
    return _pem(PEM_TYPE, json.dumps(document, separators=(",", ":")).encode())


def _pem_body(text: str, where: str) -> tuple[str, bytes]:
    lines = [line.strip() for line in text.strip().splitlines()]
    if len(lines) < 3 or not lines[0].startswith("-----BEGIN ") or not lines[-1].startswith("-----END "):
        raise SigningError(f"{where} is not a PEM file (expected a -----BEGIN ... ----- block)")
    kind = lines[0].removeprefix("-----BEGIN ").removesuffix("-----")
    try:
        return kind, base64.b64decode("".join(lines[1:-1]), validate=True)
    except ValueError:
        raise SigningError(f"{where}: the PEM block's body is not base64") from None


def decrypt(text: str, passphrase: bytes, where: str = "the key file") -> object:
    """The private key inside a cosign key file (any type cosign writes); SigningError on a wrong passphrase."""
    from nacl.exceptions import CryptoError
    from nacl.secret import SecretBox

    kind, body = _pem_body(text, where)
    if kind != PEM_TYPE and kind not in OLD_PEM_TYPES:
        raise SigningError(
            f"{where} holds a {kind!r} PEM block, not an encrypted cosign private key "
            f"({PEM_TYPE}); make one with `tooldock keygen PREFIX` or `cosign generate-key-pair`"
        )
    try:
        doc = json.loads(body)
        kdf, cipher = doc["kdf"], doc["cipher"]
        if kdf["name"] != "scrypt" or cipher["name"] != "nacl/secretbox":
            raise SigningError(f"{where}: unsupported encryption {kdf['name']}/{cipher['name']}")
        params = kdf["params"]
        key = _derive(passphrase, base64.b64decode(kdf["salt"]), int(params["N"]), int(params["r"]), int(params["p"]))
        nonce, sealed = base64.b64decode(cipher["nonce"]), base64.b64decode(doc["ciphertext"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SigningError(f"{where}: not a cosign encrypted key ({type(exc).__name__}: {exc})") from None
    try:
        der = SecretBox(key).decrypt(sealed, nonce)
    except CryptoError:
        raise WrongPassphrase(
            f"wrong passphrase for {where} (set {PASSWORD_ENV}, or type the one given to `tooldock keygen`)"
        ) from None
    try:
        return serialization.load_der_private_key(der, password=None)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SigningError(f"{where}: the decrypted key is not a PKCS#8 private key: {exc}") from None


def load_private(path: Path, passphrase: bytes) -> ec.EllipticCurvePrivateKey:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SigningError(f"cannot read the signing key {path}: {exc}") from None
    key = decrypt(text, passphrase, str(path))
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise SigningError(f"{path}: ToolDock signs with ECDSA P-256 keys only (this one is {type(key).__name__})")
    return key


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_public(path: Path) -> ec.EllipticCurvePublicKey:
    """An ECDSA P-256 public key from a PEM file (`PREFIX.pub`, `cosign public-key`'s output)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SigningError(f"cannot read the public key {path}: {exc}") from None
    if b"PRIVATE KEY" in data:
        raise SigningError(f"{path} is a private key; give the public one (PREFIX.pub)")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SigningError(f"{path} is not a PEM public key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise SigningError(f"{path}: expected an ECDSA P-256 public key, found {type(key).__name__}")
    return key


def key_id(key: ec.EllipticCurvePublicKey) -> str:
    """A short name for a public key in messages: sha256 of its DER, first 12 hex digits."""
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(der).hexdigest()[:12]
