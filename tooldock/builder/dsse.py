"""Attestations in cosign's format: an in-toto statement in a DSSE envelope, signed with the cosign key.

- The statement (in-toto Statement v1, https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md):
  `{"_type", "subject": [{"name", "digest": {"sha256"}}], "predicateType", "predicate"}`, the subject being the
  image manifest's digest. cosign builds the same for `cosign attest --type cyclonedx|slsaprovenance1`
  (sigstore/cosign pkg/cosign/attestation/attestation.go, GenerateStatement; the predicate type URIs are
  cmd/cosign/cli/options/predicate.go's PredicateTypeMap).
- The envelope (secure-systems-lab/dsse envelope.md): `{"payloadType": "application/vnd.in-toto+json",
  "payload": base64(statement), "signatures": [{"keyid": "", "sig": base64(signature)}]}`, the signature over
  DSSE's pre-authentication encoding (protocol.md: `PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body)
  SP body`), ECDSA P-256 over SHA-256, ASN.1 DER, as cosign signs with its key (cmd/cosign/cli/signcommon/
  common.go, NewAttestationBundle: DSSEData with PayloadType application/vnd.in-toto+json).
- Stored as cosign stores it (cmd/cosign/cli/attest/attest.go with pkg/oci/static/signature.go and
  pkg/types/payload.go): one layer per envelope of the image manifest tagged `sha256-<hex>.att`, media type
  `application/vnd.dsse.envelope.v1+json`, annotations `dev.cosignproject.cosign/signature` (empty: the
  signature is inside the envelope) and `predicateType`.
- Checked as `cosign verify-attestation` checks it (pkg/cosign/verify.go, verifyOCIAttestation: the payload
  type, then the envelope's signature by the key; pkg/cosign/verifiers.go, IntotoSubjectClaimVerifier: a
  subject whose sha256 is the image's digest; pkg/policy/attestation.go: the statement's predicateType).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from tooldock.builder.blobs import sha256_hex
from tooldock.builder.cosignkey import BadSignature, key_id
from tooldock.builder.simplesigning import ANNOTATION

PAYLOAD_TYPE = "application/vnd.in-toto+json"
LAYER = "application/vnd.dsse.envelope.v1+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
CYCLONEDX = "https://cyclonedx.org/bom"  # cosign attest --type cyclonedx
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"  # cosign attest --type slsaprovenance1


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding of (payload type, body): what is signed."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(body), body)


def statement(predicate_type: str, predicate: Any, name: str, digest: str) -> bytes:
    """An in-toto v1 statement about the manifest `digest` (sha256:<hex>), as JSON bytes (sorted keys)."""
    doc = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": digest.removeprefix("sha256:")}}],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Attestation:
    """One layer of a `.att` manifest: a DSSE envelope and the predicate type it says it holds."""

    envelope: bytes
    predicate_type: str

    def layer(self) -> dict[str, Any]:
        return {
            "mediaType": LAYER,
            "size": len(self.envelope),
            "digest": f"sha256:{sha256_hex(self.envelope)}",
            "annotations": {ANNOTATION: "", "predicateType": self.predicate_type},
        }


def attest(key: ec.EllipticCurvePrivateKey, predicate_type: str, payload: bytes) -> Attestation:
    """`payload` (an in-toto statement) in a DSSE envelope signed with `key`."""
    signature = key.sign(pae(PAYLOAD_TYPE, payload), ec.ECDSA(hashes.SHA256()))
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": "", "sig": base64.b64encode(signature).decode()}],
    }
    return Attestation(json.dumps(envelope, separators=(",", ":")).encode(), predicate_type)


def layers_of(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """(envelope digest, predicateType annotation) of each DSSE layer of a `.att` manifest."""
    return [
        (layer["digest"], (layer.get("annotations") or {}).get("predicateType", ""))
        for layer in manifest.get("layers") or []
        if layer.get("mediaType") == LAYER
    ]


def open_envelope(envelope: bytes, keys: list[ec.EllipticCurvePublicKey]) -> tuple[str, dict[str, Any]]:
    """(id of the key in `keys` whose signature the envelope carries, the statement it signs); BadSignature
    when the envelope is malformed, of another payload type, or signed by none of `keys`."""
    try:
        doc = json.loads(envelope)
        payload_type, payload = doc["payloadType"], base64.b64decode(doc["payload"], validate=True)
        signatures = [base64.b64decode(s["sig"], validate=True) for s in doc["signatures"]]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise BadSignature("an attestation is not a DSSE envelope (payloadType, payload, signatures)") from None
    if payload_type != PAYLOAD_TYPE:
        raise BadSignature(f"an attestation's payloadType is {payload_type!r}, not {PAYLOAD_TYPE!r}")
    signed = pae(payload_type, payload)
    for key in keys:
        for signature in signatures:
            try:
                key.verify(signature, signed, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                continue
            try:
                found = json.loads(payload)
            except ValueError:
                raise BadSignature("a signed attestation's payload is not JSON") from None
            if not isinstance(found, dict):
                raise BadSignature("a signed attestation's payload is not an in-toto statement")
            return key_id(key), found
    raise BadSignature("an attestation is signed by none of the given keys (or its envelope was altered)")


def subjects(found: dict[str, Any]) -> set[str]:
    """The sha256 digests (sha256:<hex>) a statement is about."""
    named = found.get("subject")
    if not isinstance(named, list):
        return set()
    return {
        f"sha256:{s['digest']['sha256']}"
        for s in named
        if isinstance(s, dict) and isinstance(s.get("digest"), dict) and isinstance(s["digest"].get("sha256"), str)
    }
