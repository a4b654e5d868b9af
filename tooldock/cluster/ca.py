"""The cluster CA on disk: made, rotated and retired, and the peer certificates it issues.

A CA directory (`tooldock cluster ca init DIR`) holds:

    ca.key              the current CA's private key (0600): it signs every certificate issued from now on
    ca.pem              the current CA's certificate
    trust.pem           the trust bundle: every CA certificate peers accept (the current one first)
    certs/NAME/         one peer's TLS directory (0700), as a worker's `--tls-dir` or a gateway's
                        TOOLDOCK_TLS_DIR reads it: cert.pem, key.pem (0600) and trust.pem (worker/tls.py)

Rotation without downtime: `rotate` makes a new CA and adds it to the bundle (the old one stays trusted) and
copies the bundle into every peer directory here; peers issued again (`issue`) get certificates of the new
CA, which every peer already trusts; `retire` then drops every CA but the current one from the bundle, and
the old CA's certificates are refused from then on. Every file is replaced atomically; private keys are
written 0600 and never printed.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tooldock.atomic import atomic_write
from tooldock.worker.tls import CERT, KEY, TRUST

CA_KEY, CA_CERT, CERTS = "ca.key", "ca.pem", "certs"
CA_DAYS = 3650
LEAF_DAYS = 365
SKEW = datetime.timedelta(minutes=5)  # a certificate is valid from a little before it was made (clocks differ)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class ClusterError(Exception):
    """What cannot be done to a CA directory, and what to do instead."""


@dataclass(frozen=True)
class CertInfo:
    """What `status` shows of a certificate (never a key)."""

    subject: str
    issuer: str
    fingerprint: str  # SHA-256 of the DER, hex, as `openssl x509 -fingerprint -sha256` shows it (no colons)
    not_after: datetime.datetime

    @classmethod
    def of(cls, cert: x509.Certificate) -> CertInfo:
        return cls(
            subject=_common_name(cert.subject),
            issuer=_common_name(cert.issuer),
            fingerprint=cert.fingerprint(hashes.SHA256()).hex(),
            not_after=cert.not_valid_after_utc,
        )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _common_name(name: x509.Name) -> str:
    found = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(found[0].value) if found else name.rfc4514_string()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem(certs: list[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def read_bundle(path: Path) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(path.read_bytes())
    except FileNotFoundError:
        raise ClusterError(
            f"{path} does not exist: make the CA first (tooldock cluster ca init {path.parent})"
        ) from None
    except ValueError as exc:
        raise ClusterError(f"{path}: not PEM certificates ({exc})") from None


def _load_ca(folder: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    if not (folder / CA_KEY).exists():
        raise ClusterError(f"{folder} holds no cluster CA: make one with `tooldock cluster ca init {folder}`")
    key = serialization.load_pem_private_key((folder / CA_KEY).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ClusterError(f"{folder / CA_KEY}: not an ECDSA key")
    return key, read_bundle(folder / CA_CERT)[0]


def _new_ca(days: int) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now, serial = _now(), x509.random_serial_number()
    label = f"ToolDock cluster CA {now:%Y-%m-%d} {serial:x}"[:64]  # unique: two CAs are never confused
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, label)])
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(serial)
        .not_valid_before(now - SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False),  # sign, certs, CRLs
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _write_ca(folder: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    atomic_write(folder / CA_KEY, _key_pem(key), mode=0o600)  # the key first: a cert without its key is useless
    atomic_write(folder / CA_CERT, _pem([cert]))


def init(folder: Path, days: int = CA_DAYS) -> CertInfo:
    """A new CA in `folder` (made 0700 if missing); refuses a folder that has one."""
    if (folder / CA_KEY).exists():
        raise ClusterError(f"{folder} already holds a cluster CA: `tooldock cluster ca rotate {folder}` replaces it")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    key, cert = _new_ca(days)
    _write_ca(folder, key, cert)
    atomic_write(folder / TRUST, _pem([cert]))
    return CertInfo.of(cert)


def peer_dirs(folder: Path) -> list[Path]:
    """The peer directories `issue` made under `folder/certs`."""
    base = folder / CERTS
    return sorted(p for p in base.iterdir() if (p / CERT).exists()) if base.is_dir() else []


def _share_trust(folder: Path, bundle: list[x509.Certificate]) -> None:
    """The bundle in the CA directory and in every peer directory under it."""
    data = _pem(bundle)
    atomic_write(folder / TRUST, data)
    for peer in peer_dirs(folder):
        atomic_write(peer / TRUST, data)


def rotate(folder: Path, days: int = CA_DAYS) -> CertInfo:
    """A new current CA; the CAs trusted until now stay trusted beside it until `retire`."""
    _load_ca(folder)  # there is one to rotate
    bundle = read_bundle(folder / TRUST)
    key, cert = _new_ca(days)
    _write_ca(folder, key, cert)
    _share_trust(folder, [cert, *bundle])
    return CertInfo.of(cert)


def retire(folder: Path, force: bool = False) -> list[CertInfo]:
    """Trust only the current CA from now on; what is no longer trusted. Refuses (unless `force`) while a
    peer directory here still holds a certificate of a CA it would drop: that peer would be locked out."""
    _, current = _load_ca(folder)
    dropped = [c for c in read_bundle(folder / TRUST) if c.fingerprint(hashes.SHA256()) != _fp(current)]
    stale = [p.name for p in peer_dirs(folder) if _issuer_key(read_bundle(p / CERT)[0]) != _own_key(current)]
    if stale and not force:
        names = ", ".join(stale)
        raise ClusterError(
            f"these peers still hold certificates of a CA that would no longer be trusted: {names}; issue them "
            f"again first (tooldock cluster cert {folder} --name NAME) and roll them out, or pass --force"
        )
    _share_trust(folder, [current])
    return [CertInfo.of(c) for c in dropped]


def _fp(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


def _own_key(ca: x509.Certificate) -> bytes:
    return ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest


def _issuer_key(cert: x509.Certificate) -> bytes | None:
    try:
        return cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
    except x509.ExtensionNotFound:
        return None


def issue(
    folder: Path,
    name: str,
    days: int = LEAF_DAYS,
    out: Path | None = None,
    not_before: datetime.datetime | None = None,
) -> tuple[Path, CertInfo]:
    """A certificate for peer `name` (a worker or a gateway: client and server use), signed by the current
    CA, with a new key, and the trust bundle: written to `out` (default `folder/certs/NAME`, made 0700).
    `not_before`: when its validity starts (default: now, less a few minutes)."""
    if not NAME.fullmatch(name):
        raise ClusterError(f"--name {name!r}: letters, digits, '.', '_' and '-', at most 64, not starting with one")
    if days < 1:
        raise ClusterError("--days must be at least 1")
    ca_key, ca_cert = _load_ca(folder)
    start = not_before or _now() - SKEW
    end = min(start + SKEW + datetime.timedelta(days=days), ca_cert.not_valid_after_utc)
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
        )  # digital signature: ECDHE key exchange in TLS 1.3
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    target = out or folder / CERTS / name
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(target / KEY, _key_pem(key), mode=0o600)
    atomic_write(target / CERT, _pem([cert]))
    atomic_write(target / TRUST, (folder / TRUST).read_bytes())
    return target, CertInfo.of(cert)


def status(folder: Path) -> dict[str, list[dict[str, object]]]:
    """The CAs trusted and the peers issued here, as JSON-ready values (no key material)."""
    _, current = _load_ca(folder)

    def shown(info: CertInfo) -> dict[str, object]:
        return {**info.__dict__, "not_after": info.not_after.isoformat()}

    trusted = [shown(CertInfo.of(c)) | {"current": _fp(c) == _fp(current)} for c in read_bundle(folder / TRUST)]
    peers = [{"name": p.name, **shown(CertInfo.of(read_bundle(p / CERT)[0]))} for p in peer_dirs(folder)]
    return {"trusted": trusted, "peers": peers}
