"""The OCI image layout on disk: blobs, manifest, config, index (image-spec v1.1)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tooldock.builder.blobs import BlobStore, atomic_write
from tooldock.builder.tarball import Layer
from tooldock.errors import BuilderError

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"


class LayoutError(BuilderError):
    pass


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Image:
    """A complete image: its manifest and config bytes, and the layers they reference."""

    manifest: bytes
    manifest_digest: str
    config: bytes
    config_digest: str
    layers: tuple[Layer, ...]

    @property
    def config_json(self) -> dict[str, Any]:
        return json.loads(self.config)


def assemble(store: BlobStore, config: dict[str, Any], layers: list[Layer], annotations: dict[str, str]) -> Image:
    config_bytes = canonical(config)
    config_digest = store.put(config_bytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": config_digest, "size": len(config_bytes)},
        "layers": [{"mediaType": layer.media_type, "digest": layer.digest, "size": layer.size} for layer in layers],
        "annotations": annotations,
    }
    manifest_bytes = canonical(manifest)
    return Image(manifest_bytes, store.put(manifest_bytes), config_bytes, config_digest, tuple(layers))


def index_json(image: Image, ref: str, attached: Sequence[Attached] = ()) -> bytes:
    """The layout's index: `image` first, tagged `ref`, then the artifacts that refer to it (attach.py)."""
    first = {
        "mediaType": MANIFEST,
        "digest": image.manifest_digest,
        "size": len(image.manifest),
        "annotations": {REF_NAME: ref},
    }
    return canonical(
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": [first, *(a.descriptor() for a in attached)]}
    )


class Attached(Protocol):
    """An artifact manifest in the store that refers to the image (attach.Artifact)."""

    @property
    def digest(self) -> str: ...

    def descriptor(self) -> dict[str, Any]: ...

    @property
    def blobs(self) -> tuple[str, ...]: ...


def write_layout(dest: Path, store: BlobStore, image: Image, ref: str, attached: Sequence[Attached] = ()) -> None:
    """Write `dest` as an OCI layout holding `image` (and `attached`); built beside it and renamed into place."""
    extra = [d for a in attached for d in (a.digest, *a.blobs)]
    digests = (image.manifest_digest, image.config_digest, *(layer.digest for layer in image.layers), *extra)
    write_blobs_layout(dest, store, index_json(image, ref, attached), digests)


def image_index(manifests: Sequence[tuple[dict[str, str], Image]]) -> bytes:
    """An image index of single-platform images, each with its `platform` (os, architecture), in the given order."""
    listed = [
        {"mediaType": MANIFEST, "digest": image.manifest_digest, "size": len(image.manifest), "platform": platform}
        for platform, image in manifests
    ]
    return canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": listed})


def write_blobs_layout(dest: Path, store: BlobStore, index: bytes, digests: Sequence[str]) -> None:
    """Write `dest` as an OCI layout whose `index.json` is `index`, holding the blobs `digests` (from `store`);
    built beside it and renamed into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        (tmp / "oci-layout").write_bytes(canonical({"imageLayoutVersion": "1.0.0"}))
        (tmp / "index.json").write_bytes(index)
        blobs = tmp / "blobs" / "sha256"
        blobs.mkdir(parents=True)
        for digest in dict.fromkeys(digests):
            target = blobs / digest.split(":", 1)[1]
            try:
                os.link(store.path(digest), target)
            except OSError:
                shutil.copyfile(store.path(digest), target)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(dest, old)
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_layout(path: Path, store: BlobStore) -> Image:
    """Import the (first) image of an OCI layout into `store`."""
    try:
        index = json.loads((path / "index.json").read_text())
        descriptor = index["manifests"][0]
        manifest_path = path / "blobs" / descriptor["digest"].replace(":", "/")
        manifest_bytes = manifest_path.read_bytes()
        manifest = json.loads(manifest_bytes)
        if manifest.get("mediaType", descriptor.get("mediaType")) == INDEX:
            raise LayoutError(f"{path} holds a multi-platform index; give a single-platform image")
        config_bytes = (path / "blobs" / manifest["config"]["digest"].replace(":", "/")).read_bytes()
    except (OSError, KeyError, IndexError, json.JSONDecodeError) as exc:
        raise LayoutError(f"{path} is not a readable OCI image layout: {exc}") from None
    layers = []
    for d in manifest["layers"]:
        store.add_file(path / "blobs" / d["digest"].replace(":", "/"), d["digest"])
        layers.append(Layer(d["digest"], "", d["size"], d["mediaType"]))
    diff_ids = json.loads(config_bytes).get("rootfs", {}).get("diff_ids", [])
    layers = [
        Layer(layer.digest, diff_ids[i] if i < len(diff_ids) else "", layer.size, layer.media_type)
        for i, layer in enumerate(layers)
    ]
    return Image(manifest_bytes, store.put(manifest_bytes), config_bytes, store.put(config_bytes), tuple(layers))


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n")


def assemble_from_registry(store: BlobStore, manifest: dict[str, Any], sizes: dict[str, int]) -> Image:
    """An `Image` for a manifest whose blobs are in `store` (Docker media types become OCI ones: same bytes)."""
    config_bytes = store.path(manifest["config"]["digest"]).read_bytes()
    diff_ids = json.loads(config_bytes).get("rootfs", {}).get("diff_ids", [])
    layers = tuple(
        Layer(d["digest"], diff_ids[i] if i < len(diff_ids) else "", sizes[d["digest"]])
        for i, d in enumerate(manifest["layers"])
    )
    manifest_bytes = canonical(manifest)
    return Image(manifest_bytes, store.put(manifest_bytes), config_bytes, manifest["config"]["digest"], layers)
