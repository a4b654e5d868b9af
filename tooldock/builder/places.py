"""Where an image and cosign's artifacts about it live: an OCI layout directory, or a registry.

cosign keeps its artifacts about the manifest `sha256:<hex>` as image manifests tagged `sha256-<hex>.sig`
(signatures) and `sha256-<hex>.att` (attestations) next to the image (sigstore/cosign pkg/oci/remote/remote.go,
SignatureTag / AttestationTag). In a registry they are those tags; in an OCI layout they are `index.json`
entries named so (`org.opencontainers.image.ref.name`), carrying the `kind` annotation cosign's own layouts use
(pkg/oci/layout/index.go: `dev.cosignproject.cosign/sigs`, `/atts`; the image entry `/image`), so that
`cosign verify --local-image` can find them. Each such manifest is read and written whole: its layers' blobs
with it (simplesigning.py and dsse.py make and read the layers).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import httpx

from tooldock.builder.attach import Found, LayoutReader
from tooldock.builder.blobs import BlobStore, atomic_write, sha256_hex
from tooldock.builder.oci import CONFIG, INDEX, MANIFEST, REF_NAME, canonical
from tooldock.builder.registry import upload_blob
from tooldock.builder.registryauth import RegistryAuth, RegistryError
from tooldock.builder.registryrefs import RemoteImage, fallback_tag, remote_image

KIND = "kind"  # cosign's layout annotation (pkg/oci/layout/index.go)
KINDS = {"sig": "dev.cosignproject.cosign/sigs", "att": "dev.cosignproject.cosign/atts"}
IMAGE_KIND = {MANIFEST: "dev.cosignproject.cosign/image", INDEX: "dev.cosignproject.cosign/imageIndex"}

# A cosign artifact as read: its manifest and the blob of each of its layers (by digest).
Tagged = tuple[dict[str, Any], dict[str, bytes]]


def cosign_manifest(layers: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """(manifest, config) of a `.sig` / `.att` artifact whose layers are `layers` (descriptors), as cosign
    builds it: go-containerregistry's empty image with the layers appended (pkg/oci/mutate/signatures.go)."""
    config = json.dumps(
        {
            "architecture": "",
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"} for _ in layers],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": [layer["digest"] for layer in layers]},
            "config": {},
        },
        separators=(",", ":"),
    ).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "size": len(config), "digest": f"sha256:{sha256_hex(config)}"},
        "layers": layers,
    }
    return json.dumps(manifest, separators=(",", ":")).encode(), config


class Place:
    digest: str
    identity: str  # the repository cosign's payloads name (docker-reference, the statement's subject name)

    def referrers(self) -> list[Found]:
        raise NotImplementedError

    def document(self, artifact_digest: str) -> bytes:
        raise NotImplementedError

    def read(self, suffix: str) -> Tagged | None:
        """The `sha256-<image hex>.<suffix>` artifact (`sig` or `att`), or None when there is none."""
        raise NotImplementedError

    def write(self, suffix: str, layers: list[tuple[dict[str, Any], bytes]]) -> None:
        """Replace the `sha256-<image hex>.<suffix>` artifact with one of these (descriptor, blob) layers."""
        raise NotImplementedError


class LayoutPlace(Place):
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

    def _entry(self, suffix: str) -> dict[str, Any] | None:
        tag = fallback_tag(self.digest, suffix)
        return next((d for d in self.reader.entries if (d.get("annotations") or {}).get(REF_NAME) == tag), None)

    def read(self, suffix: str) -> Tagged | None:
        entry = self._entry(suffix)
        if entry is None:
            return None
        manifest = json.loads(self.reader.blob(entry["digest"]))
        return manifest, {layer["digest"]: self.reader.blob(layer["digest"]) for layer in manifest.get("layers") or []}

    def write(self, suffix: str, layers: list[tuple[dict[str, Any], bytes]]) -> None:
        manifest, config = cosign_manifest([d for d, _ in layers])
        for blob in (manifest, config, *(b for _, b in layers)):
            target = self.path / "blobs" / "sha256" / sha256_hex(blob)
            if not target.is_file():
                atomic_write(target, blob)
        entry = {
            "mediaType": MANIFEST,
            "digest": f"sha256:{sha256_hex(manifest)}",
            "size": len(manifest),
            "annotations": {REF_NAME: fallback_tag(self.digest, suffix), KIND: KINDS[suffix]},
        }
        index, old = self.reader.index, self._entry(suffix)
        kept = []
        for d in self.reader.entries:
            if d is old:
                continue
            if d["digest"] == self.digest and d.get("mediaType") in IMAGE_KIND:
                d = {**d, "annotations": {**(d.get("annotations") or {}), KIND: IMAGE_KIND[d["mediaType"]]}}
            kept.append(d)
        index["manifests"] = [*kept, entry]
        atomic_write(self.path / "index.json", canonical(index))
        self.reader = LayoutReader(self.path)


class RegistryPlace(Place):
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

    def read(self, suffix: str) -> Tagged | None:
        base, tag = self.image.base, fallback_tag(self.digest, suffix)
        try:
            with self._client() as client:
                got = client.get(f"{base}/manifests/{tag}", headers={"Accept": MANIFEST})
                if got.status_code == 404:
                    return None
                if got.status_code != 200:
                    raise RegistryError(f"reading {tag} of {self.digest}: the registry answered {got.status_code}")
                manifest = json.loads(got.content)
                blobs = {}
                for layer in manifest.get("layers") or []:
                    blob = client.get(f"{base}/blobs/{layer['digest']}")
                    if blob.status_code != 200:
                        raise RegistryError(f"the layer {layer['digest']} of {tag} is missing ({blob.status_code})")
                    blobs[layer["digest"]] = blob.content
                return manifest, blobs
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise RegistryError(f"cannot read {tag} from {self.image.host}: {exc}") from None

    def write(self, suffix: str, layers: list[tuple[dict[str, Any], bytes]]) -> None:
        manifest, config = cosign_manifest([d for d, _ in layers])
        base, tag = self.image.base, fallback_tag(self.digest, suffix)
        try:
            with tempfile.TemporaryDirectory() as tmp, self._client() as client:
                store = BlobStore(Path(tmp))
                for blob in (config, *(b for _, b in layers)):
                    upload_blob(client, base, store, store.put(blob))
                put = client.put(f"{base}/manifests/{tag}", content=manifest, headers={"Content-Type": MANIFEST})
                if put.status_code != 201:
                    raise RegistryError(f"the registry refused {tag} ({put.status_code}): {put.text[:200]}")
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot push {tag} to {self.image.host}: {exc}") from None


def place(image: str) -> Place:
    """IMAGE: an OCI layout directory, or a registry reference (LayoutError / RegistryError otherwise)."""
    return LayoutPlace(Path(image)) if Path(image).is_dir() else RegistryPlace(image)
