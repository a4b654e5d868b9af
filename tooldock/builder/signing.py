"""Signing an image where it lives (an OCI layout or a registry, places.py), and attesting its SBOM and provenance.

`sign_image` adds, as cosign does with a key pair:
- the image's signature: the simple-signing payload (simplesigning.py) in the `sha256-<hex>.sig` artifact
  (`cosign sign --key`);
- one attestation per attached document (dsse.py) in the `sha256-<hex>.att` artifact (`cosign attest --key
  --type cyclonedx` / `--type slsaprovenance1`): the SBOM as the predicate of a new in-toto statement about the
  image, the provenance (already an in-toto statement about the image) as it is attached, byte for byte.
Signing again with the same key replaces that key's signature and attestations; another key's are kept.

`verify` checks the image's signature by one of the given public keys, then, for each attached SBOM and
provenance, an attestation signed by one of them whose statement is about the image and whose predicate is
the attached document's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from tooldock.builder.attach import PROVENANCE, SBOM, Found
from tooldock.builder.cosignkey import BadSignature, NotSigned, SigningError
from tooldock.builder.dsse import CYCLONEDX, SLSA_PROVENANCE_V1, Attestation, attest, open_envelope, statement, subjects
from tooldock.builder.dsse import layers_of as attestation_layers
from tooldock.builder.oci import LayoutError
from tooldock.builder.places import Place, place
from tooldock.builder.registryauth import RegistryError
from tooldock.builder.simplesigning import Signature, as_layers, check, sign, signatures_of

# artifactType of an attached document -> the predicate type of its attestation
PREDICATES = {SBOM: CYCLONEDX, PROVENANCE: SLSA_PROVENANCE_V1}


def _where(image: str) -> Place:
    try:
        return place(image)
    except (LayoutError, RegistryError) as exc:
        raise SigningError(str(exc)) from None


def _by(key: ec.EllipticCurvePublicKey, signature: Signature, digest: str) -> bool:
    try:
        check(signature, [key], digest)
        return True
    except SigningError:
        return False


def _predicate(artifact_type: str, document: bytes) -> Any:
    """What an attestation of this attached document must hold as its predicate."""
    parsed = json.loads(document)
    return parsed.get("predicate") if artifact_type == PROVENANCE else parsed


def _payload(where: Place, found: Found) -> bytes:
    """The statement an attestation of `found` signs: the provenance as attached, or the SBOM in a statement."""
    document = where.document(found.digest)
    if found.artifact_type == PROVENANCE:
        return document
    return statement(CYCLONEDX, json.loads(document), where.identity, where.digest)


def _attested_by(key: ec.EllipticCurvePublicKey, attestation: Attestation) -> bool:
    try:
        open_envelope(attestation.envelope, [key])
        return True
    except SigningError:
        return False


def _attestations(where: Place) -> list[Attestation]:
    tagged = where.read("att")
    if tagged is None:
        return []
    manifest, blobs = tagged
    return [Attestation(blobs[d], kind) for d, kind in attestation_layers(manifest) if d in blobs]


def sign_image(image: str, key: ec.EllipticCurvePrivateKey) -> list[str]:
    """Sign IMAGE and attest each SBOM and provenance attached to it; the image's digest, then the digests of the
    attached artifacts attested."""
    where = _where(image)
    public = key.public_key()
    try:
        new = sign(key, where.identity, where.digest)
        kept = [s for s in signatures_of(where.read("sig")) if not _by(public, s, where.digest)]
        where.write("sig", as_layers([*kept, new]))
        attached = [f for f in where.referrers() if f.artifact_type in PREDICATES]
        if attached:
            made = [attest(key, PREDICATES[f.artifact_type], _payload(where, f)) for f in attached]
            types = {a.predicate_type for a in made}
            others = [a for a in _attestations(where) if a.predicate_type not in types or not _attested_by(public, a)]
            where.write("att", [(a.layer(), a.envelope) for a in [*others, *made]])
    except (LayoutError, RegistryError, ValueError) as exc:
        raise SigningError(str(exc)) from None
    return [where.digest, *(f.digest for f in attached)]


@dataclass
class Verified:
    digest: str
    signer: str  # key id
    attached: list[dict[str, str]] = field(default_factory=list)  # artifactType, digest, predicateType, signer


def _signed_by(where: Place, keys: list[ec.EllipticCurvePublicKey]) -> str:
    signatures = signatures_of(where.read("sig"))
    if not signatures:
        raise NotSigned(f"image {where.digest} is not signed (no sha256-…sig); sign it with `tooldock sign`")
    problems = []
    for signature in signatures:
        try:
            return check(signature, keys, where.digest)
        except SigningError as exc:
            problems.append(str(exc))
    raise BadSignature(f"image {where.digest} has no valid signature by the given key(s): {'; '.join(problems)}")


def _attested(where: Place, found: Found, held: list[Attestation], keys: list[ec.EllipticCurvePublicKey]) -> str:
    """The id of the key that attested `found`; NotSigned / BadSignature saying why not."""
    wanted, what = PREDICATES[found.artifact_type], f"the attached {found.artifact_type} {found.digest}"
    candidates = [a for a in held if a.predicate_type == wanted]
    if not candidates:
        raise NotSigned(
            f"{what} has no attestation (no DSSE envelope of predicateType {wanted} in sha256-…att); "
            "sign the image again with `tooldock sign` to attest it"
        )
    expected = _predicate(found.artifact_type, where.document(found.digest))
    problems = []
    for attestation in candidates:
        try:
            signer, said = open_envelope(attestation.envelope, keys)
        except SigningError as exc:
            problems.append(str(exc))
            continue
        if where.digest not in subjects(said):
            problems.append(f"an attestation is about {sorted(subjects(said))}, not the image {where.digest}")
        elif said.get("predicateType") != wanted:
            problems.append(f"an attestation's statement has predicateType {said.get('predicateType')!r}")
        elif said.get("predicate") != expected:
            problems.append("an attestation's predicate differs from the attached document (altered?)")
        else:
            return signer
    raise BadSignature(f"{what} has no valid attestation by the given key(s): {'; '.join(problems)}")


def verify(image: str, keys: list[ec.EllipticCurvePublicKey], attachments: bool = True) -> Verified:
    """Check IMAGE's signature by one of `keys`; with `attachments`, that each attached SBOM and provenance has
    an attestation by one of them about the image with the document as its predicate. SigningError says what
    failed (NotSigned: nothing there; BadSignature: not valid by these keys, or altered)."""
    where = _where(image)
    try:
        result = Verified(where.digest, _signed_by(where, keys))
        if not attachments:
            return result
        attached = [f for f in where.referrers() if f.artifact_type in PREDICATES]
        held = _attestations(where) if attached else []
        for found in attached:
            result.attached.append(
                {
                    "artifactType": found.artifact_type,
                    "digest": found.digest,
                    "predicateType": PREDICATES[found.artifact_type],
                    "signer": _attested(where, found, held, keys),
                }
            )
    except (LayoutError, RegistryError, ValueError) as exc:
        raise SigningError(str(exc)) from None
    return result
