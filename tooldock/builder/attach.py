"""Artifacts attached to an image as OCI 1.1 referrers: the SBOM and the provenance.

Each is an image manifest with an `artifactType`, the empty config, one layer (the document) and a
`subject` pointing at the image's manifest. In an OCI layout they are listed in `index.json` after the
image (which keeps its `org.opencontainers.image.ref.name`); the image's own manifest, and so its digest,
is untouched. `registryrefs.py` pushes them and finds them in a registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import tooldock
from tooldock.builder.blobs import BlobStore, atomic_write, cache_key
from tooldock.builder.materials import Materials
from tooldock.builder.oci import MANIFEST, Image, LayoutError, canonical
from tooldock.builder.provenance import MEDIA_TYPE as PROVENANCE
from tooldock.builder.provenance import make_provenance
from tooldock.builder.tarball import iso_time, source_date_epoch

SBOM = "application/vnd.cyclonedx+json"
EMPTY = "application/vnd.oci.empty.v1+json"
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # of b"{}"
TITLE = "org.opencontainers.image.title"
# artifactType -> (file name in the artifact, cosign's tag suffix for it when a registry has no referrers API: `.sbom`
# as `cosign attach sbom` writes; none for the provenance, whose cosign tag would be `.att`, which holds the signed
# attestations (dsse.py): it is found through the referrers API or the `sha256-<hex>` referrers tag)
KINDS: dict[str, tuple[str, str]] = {SBOM: ("sbom.cdx.json", "sbom"), PROVENANCE: ("provenance.intoto.json", "")}


@dataclass(frozen=True)
class Artifact:
    """An artifact manifest in the blob store: its bytes and digest, its type, the document's digest."""

    artifact_type: str
    manifest: bytes
    digest: str
    document: str  # digest of the one layer

    def descriptor(self) -> dict[str, Any]:
        return {
            "mediaType": MANIFEST,
            "artifactType": self.artifact_type,
            "digest": self.digest,
            "size": len(self.manifest),
        }

    @property
    def blobs(self) -> tuple[str, ...]:
        return (EMPTY_DIGEST, self.document)


def artifact(store: BlobStore, subject: Image, artifact_type: str, document: bytes) -> Artifact:
    """Store `document` and an artifact manifest for it whose `subject` is `subject`'s manifest."""
    assert store.put(b"{}") == EMPTY_DIGEST
    doc_digest = store.put(document)
    manifest = canonical(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "artifactType": artifact_type,
            "config": {"mediaType": EMPTY, "digest": EMPTY_DIGEST, "size": 2},
            "layers": [
                {
                    "mediaType": artifact_type,
                    "digest": doc_digest,
                    "size": len(document),
                    "annotations": {TITLE: KINDS[artifact_type][0]},
                }
            ],
            "subject": {"mediaType": MANIFEST, "digest": subject.manifest_digest, "size": len(subject.manifest)},
            "annotations": {"org.opencontainers.image.created": iso_time(source_date_epoch())},
        }
    )
    return Artifact(artifact_type, manifest, store.put(manifest), doc_digest)


def attestations(store: BlobStore, materials: Materials) -> list[Artifact]:
    """The SBOM and the provenance of `materials.image`, stored and wrapped as referrers."""
    return [
        artifact(store, materials.image, SBOM, sbom(store, materials)),
        artifact(store, materials.image, PROVENANCE, make_provenance(materials)),
    ]


def sbom(store: BlobStore, materials: Materials) -> bytes:
    """The image's SBOM, made once per image: everything it lists is in the image's digest (the files, the
    locks in the labels, the base's layers made from the pinned packages), so a warm build reads it back."""
    key = cache_key(
        "sbom",
        materials.image.manifest_digest,
        materials.base_ref,
        tooldock.__version__,
        metadata.version("cyclonedx-python-lib"),
        Path(__file__).with_name("sbom.py").read_bytes(),  # a checkout's edit to the SBOM makes it again
    )
    index = store.root / "attest" / key
    if index.is_file() and store.has(digest := index.read_text().strip()):
        return store.path(digest).read_bytes()
    from tooldock.builder.sbom import make_sbom  # the CycloneDX library takes ~0.3 s to import: only when needed

    document = make_sbom(materials)
    atomic_write(index, store.put(document).encode())
    return document


@dataclass(frozen=True)
class Found:
    """An artifact found for an image: its descriptor and where it was found."""

    artifact_type: str
    digest: str
    size: int
    source: str  # "layout", "referrers API", "tag sha256-...", ...


class LayoutReader:
    """The image of an OCI layout directory (the first entry without a `subject`) and the artifacts that refer to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.index = json.loads((path / "index.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise LayoutError(f"{path} is not a readable OCI image layout: {exc}") from None
        manifests = self.index.get("manifests") or []
        images = [d for d in manifests if "artifactType" not in d]
        if not images:
            raise LayoutError(f"{path}: index.json lists no image")
        self.digest = images[0]["digest"]
        self.entries = manifests

    def blob(self, digest: str) -> bytes:
        try:
            return (self.path / "blobs" / digest.replace(":", "/")).read_bytes()
        except OSError as exc:
            raise LayoutError(f"{self.path}: blob {digest} missing: {exc}") from None

    def referrers(self) -> list[Found]:
        found = []
        for d in self.entries:
            if d["digest"] == self.digest or d.get("mediaType") != MANIFEST:
                continue
            manifest = json.loads(self.blob(d["digest"]))
            if (manifest.get("subject") or {}).get("digest") == self.digest:
                found.append(Found(manifest.get("artifactType", ""), d["digest"], d["size"], "layout index.json"))
        return found

    def document(self, artifact_digest: str) -> bytes:
        return self.blob(json.loads(self.blob(artifact_digest))["layers"][0]["digest"])
