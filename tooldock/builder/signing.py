"""Signing an image, and its attached SBOM and provenance, where it lives: an OCI layout or a registry.

Each signed manifest (the image's, and each attached artifact's) gets cosign's `sha256-<hex>.sig` artifact
(simplesigning.py): in a registry as that tag in the image's repository, in an OCI layout as an `index.json`
entry named `sha256-<hex>.sig` after the image and its referrers. Signing again with another key adds a layer
(a second signature) and keeps the others. `verify` checks the image's signature against the given public keys,
and that every attached artifact names the signed image as its subject and is signed too.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from tooldock.builder.attach import PROVENANCE, Found, LayoutReader
from tooldock.builder.blobs import BlobStore, atomic_write, sha256_hex
from tooldock.builder.cosignkey import BadSignature, NotSigned, SigningError
from tooldock.builder.oci import MANIFEST, REF_NAME, LayoutError, canonical
from tooldock.builder.registry import upload_blob
from tooldock.builder.registryauth import RegistryAuth, RegistryError
from tooldock.builder.registryrefs import RemoteImage, fallback_tag, remote_image
from tooldock.builder.simplesigning import Signature, check, layers_of, sig_manifest, sign


class Place(Protocol):
    """Where an image and its artifacts are: it reads and writes `.sig` artifacts."""

    digest: str
    identity: str  # the payload's docker-reference

    def referrers(self) -> list[Found]: ...
    def document(self, artifact_digest: str) -> bytes: ...
    def signatures(self, digest: str) -> list[Signature]: ...
    def write_signatures(self, digest: str, signatures: list[Signature]) -> None: ...


class LayoutPlace:
    def __init__(self, path: Path) -> None:
        self.reader = LayoutReader(path)
        self.path, self.digest = path, self.reader.digest
        image = json.loads(self.reader.blob(self.digest))
        name = (image.get("annotations") or {}).get("org.opencontainers.image.title") or path.name
        self.identity = f"tooldock/{name}"

    def referrers(self) -> list[Found]:
        return self.reader.referrers()

    def document(self, artifact_digest: str) -> bytes:
        return self.reader.document(artifact_digest)

    def _entry(self, digest: str) -> dict[str, Any] | None:
        tag = fallback_tag(digest, "sig")
        return next((d for d in self.reader.entries if (d.get("annotations") or {}).get(REF_NAME) == tag), None)

    def signatures(self, digest: str) -> list[Signature]:
        entry = self._entry(digest)
        if entry is None:
            return []
        manifest = json.loads(self.reader.blob(entry["digest"]))
        return [Signature(self.reader.blob(d), sig) for d, sig in layers_of(manifest)]

    def write_signatures(self, digest: str, signatures: list[Signature]) -> None:
        manifest, config = sig_manifest(signatures)
        for blob in (manifest, config, *(s.payload for s in signatures)):
            target = self.path / "blobs" / "sha256" / sha256_hex(blob)
            if not target.is_file():
                atomic_write(target, blob)
        tag = fallback_tag(digest, "sig")
        entry = {
            "mediaType": MANIFEST,
            "digest": f"sha256:{sha256_hex(manifest)}",
            "size": len(manifest),
            "annotations": {REF_NAME: tag},
        }
        index = self.reader.index
        index["manifests"] = [d for d in self.reader.entries if d is not self._entry(digest)] + [entry]
        atomic_write(self.path / "index.json", canonical(index))
        self.reader = LayoutReader(self.path)


class RegistryPlace:
    def __init__(self, ref: str) -> None:
        self.image: RemoteImage = remote_image(ref)
        self.digest = self.image.digest
        self.identity = f"{self.image.host}/{self.image.repository}"

    def _client(self) -> httpx.Client:
        return httpx.Client(auth=RegistryAuth(self.image.host), timeout=httpx.Timeout(30), follow_redirects=True)

    def referrers(self) -> list[Found]:
        return self.image.referrers()

    def document(self, artifact_digest: str) -> bytes:
        return self.image.document(artifact_digest)

    def signatures(self, digest: str) -> list[Signature]:
        base = self.image.base
        try:
            with self._client() as client:
                got = client.get(f"{base}/manifests/{fallback_tag(digest, 'sig')}", headers={"Accept": MANIFEST})
                if got.status_code == 404:
                    return []
                if got.status_code != 200:
                    raise RegistryError(f"reading the signature of {digest}: the registry answered {got.status_code}")
                found = []
                for layer_digest, b64sig in layers_of(json.loads(got.content)):
                    blob = client.get(f"{base}/blobs/{layer_digest}")
                    if blob.status_code != 200:
                        raise RegistryError(f"the signature payload {layer_digest} is missing ({blob.status_code})")
                    found.append(Signature(blob.content, b64sig))
                return found
        except (httpx.HTTPError, ValueError) as exc:
            raise RegistryError(f"cannot read signatures from {self.image.host}: {exc}") from None

    def write_signatures(self, digest: str, signatures: list[Signature]) -> None:
        manifest, config = sig_manifest(signatures)
        base, tag = self.image.base, fallback_tag(digest, "sig")
        try:
            with tempfile.TemporaryDirectory() as tmp, self._client() as client:
                store = BlobStore(Path(tmp))
                for blob in (config, *(s.payload for s in signatures)):
                    upload_blob(client, base, store, store.put(blob))
                put = client.put(f"{base}/manifests/{tag}", content=manifest, headers={"Content-Type": MANIFEST})
                if put.status_code != 201:
                    raise RegistryError(
                        f"the registry refused the signature {tag} ({put.status_code}): {put.text[:200]}"
                    )
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot push the signature to {self.image.host}: {exc}") from None


def place(image: str) -> Place:
    """IMAGE: an OCI layout directory, or a registry reference."""
    try:
        return LayoutPlace(Path(image)) if Path(image).is_dir() else RegistryPlace(image)
    except (LayoutError, RegistryError) as exc:
        raise SigningError(str(exc)) from None


def _add(where: Place, key: ec.EllipticCurvePrivateKey, digest: str) -> None:
    new = sign(key, where.identity, digest)
    kept = [s for s in where.signatures(digest) if s.payload != new.payload or _other_key(s, key)]
    where.write_signatures(digest, [*kept, new])


def _other_key(signature: Signature, key: ec.EllipticCurvePrivateKey) -> bool:
    try:
        check(
            signature, [key.public_key()], json.loads(signature.payload)["critical"]["image"]["docker-manifest-digest"]
        )
        return False
    except (SigningError, ValueError, KeyError, TypeError):
        return True


def sign_image(image: str, key: ec.EllipticCurvePrivateKey) -> list[str]:
    """Sign IMAGE and each artifact attached to it; the digests signed, the image's first."""
    where = place(image)
    signed = [where.digest, *(f.digest for f in where.referrers())]
    try:
        for digest in signed:
            _add(where, key, digest)
    except (LayoutError, RegistryError) as exc:
        raise SigningError(str(exc)) from None
    return signed


@dataclass
class Verified:
    digest: str
    signer: str  # key id
    attached: list[dict[str, str]] = field(default_factory=list)  # artifactType, digest, signer


def _signed_by(where: Place, digest: str, keys: list[ec.EllipticCurvePublicKey], what: str) -> str:
    signatures = where.signatures(digest)
    if not signatures:
        raise NotSigned(f"{what} {digest} is not signed (no sha256-…sig); sign it with `tooldock sign`")
    problems = []
    for signature in signatures:
        try:
            return check(signature, keys, digest)
        except SigningError as exc:
            problems.append(str(exc))
    raise BadSignature(f"{what} {digest} has no valid signature by the given key(s): {'; '.join(problems)}")


def verify(image: str, keys: list[ec.EllipticCurvePublicKey], attachments: bool = True) -> Verified:
    """Check IMAGE's signature by one of `keys`; with `attachments`, that each attached artifact is signed and
    names the image (and the provenance's statement too). SigningError says what failed."""
    where = place(image)
    try:
        result = Verified(where.digest, _signed_by(where, where.digest, keys, "image"))
        if not attachments:
            return result
        for found in where.referrers():
            signer = _signed_by(where, found.digest, keys, f"attached {found.artifact_type}")
            if found.artifact_type == PROVENANCE:
                statement = json.loads(where.document(found.digest))
                subjects = {f"sha256:{s.get('digest', {}).get('sha256')}" for s in statement.get("subject", [])}
                if where.digest not in subjects:
                    raise BadSignature(f"the attached provenance is of {sorted(subjects)}, not of {where.digest}")
            result.attached.append({"artifactType": found.artifact_type, "digest": found.digest, "signer": signer})
    except (LayoutError, RegistryError, ValueError) as exc:
        raise SigningError(str(exc)) from None
    return result
