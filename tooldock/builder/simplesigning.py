"""cosign's signature format: the simple-signing payload, its ECDSA signature, and the `.sig` manifest.

A signature of the manifest `sha256:<hex>` in repository R is the JSON payload
`{"critical":{"identity":{"docker-reference":R},"image":{"docker-manifest-digest":...},"type":"cosign container
image signature"},"optional":null}` signed with ECDSA P-256 over SHA-256 (ASN.1 DER, base64). cosign stores it
as one layer (media type `application/vnd.dev.cosign.simplesigning.v1+json`, the payload's bytes) of an image
manifest tagged `sha256-<hex>.sig` (places.py), the signature in the layer's `dev.cosignproject.cosign/signature`
annotation (sigstore/cosign pkg/oci/static/signature.go); more signatures are more layers of the same manifest.
containers/image (skopeo, podman) reads the same tag for its `sigstoreSigned` policy.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from tooldock.builder.blobs import sha256_hex
from tooldock.builder.cosignkey import BadSignature, key_id

LAYER = "application/vnd.dev.cosign.simplesigning.v1+json"
ANNOTATION = "dev.cosignproject.cosign/signature"
TYPE = "cosign container image signature"


@dataclass(frozen=True)
class Signature:
    """One layer of a `.sig` manifest: the payload and its base64 signature."""

    payload: bytes
    b64sig: str

    def layer(self) -> dict[str, Any]:
        return {
            "mediaType": LAYER,
            "size": len(self.payload),
            "digest": f"sha256:{sha256_hex(self.payload)}",
            "annotations": {ANNOTATION: self.b64sig},
        }


def payload(repository: str, digest: str) -> bytes:
    """The simple-signing payload, byte for byte as cosign writes it (Go's encoding/json, compact)."""
    doc = {
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": TYPE,
        },
        "optional": None,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def sign(key: ec.EllipticCurvePrivateKey, repository: str, digest: str) -> Signature:
    body = payload(repository, digest)
    return Signature(body, base64.b64encode(key.sign(body, ec.ECDSA(hashes.SHA256()))).decode())


def signatures_of(tagged: tuple[dict[str, Any], dict[str, bytes]] | None) -> list[Signature]:
    """The signatures of a `.sig` artifact as read (places.Place.read): its simple-signing layers."""
    if tagged is None:
        return []
    manifest, blobs = tagged
    return [
        Signature(blobs[layer["digest"]], (layer.get("annotations") or {}).get(ANNOTATION, ""))
        for layer in manifest.get("layers") or []
        if layer.get("mediaType") == LAYER and layer.get("digest") in blobs
    ]


def as_layers(signatures: list[Signature]) -> list[tuple[dict[str, Any], bytes]]:
    """(descriptor, blob) of each signature, to write as a `.sig` artifact (places.Place.write)."""
    return [(s.layer(), s.payload) for s in signatures]


def check(signature: Signature, keys: list[ec.EllipticCurvePublicKey], digest: str) -> str:
    """The id of the key in `keys` whose valid signature of `digest` this is; BadSignature otherwise."""
    try:
        raw = base64.b64decode(signature.b64sig, validate=True)
    except ValueError:
        raise BadSignature("a signature is not base64") from None
    signer = None
    for key in keys:
        try:
            key.verify(raw, signature.payload, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            continue
        signer = key
        break
    if signer is None:
        raise BadSignature("signed by none of the given keys (or the payload was altered)")
    try:
        doc = json.loads(signature.payload)
        critical = doc["critical"]
        signed_type, signed_digest = critical["type"], critical["image"]["docker-manifest-digest"]
    except (ValueError, KeyError, TypeError):
        raise BadSignature("the signed payload is not a simple-signing document") from None
    if signed_type != TYPE:
        raise BadSignature(f"the signed payload's type is {signed_type!r}, not {TYPE!r}")
    if signed_digest != digest:
        raise BadSignature(f"the signature is of {signed_digest}, not of this image ({digest})")
    return key_id(signer)
