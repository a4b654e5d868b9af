"""Load a built image into the local Docker engine (docker-py), tagged by version and by digest.

The engine takes the same tar `archive` writes: it is a `docker load` archive as well as an OCI layout.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from tooldock.builder.archive import write_archive
from tooldock.builder.blobs import BlobStore
from tooldock.builder.oci import Image
from tooldock.errors import BuilderError

if TYPE_CHECKING:
    import tarfile

    from docker import DockerClient


class DaemonError(BuilderError):
    pass


def digest_tag(digest: str) -> str:
    """A tag that names the exact build: Docker's classic image store keeps no manifest digest for a
    loaded image, so `tooldock/<ns>:sha256-<hex>` stands in for `tooldock/<ns>@sha256:<hex>`."""
    return digest.replace(":", "-")


def engine() -> DockerClient:
    """A connected docker-py client (DOCKER_HOST or the default socket), or a clear error."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:  # docker-py raises several types for "no engine"
        raise DaemonError(f"cannot reach the Docker engine ({exc}); start dockerd or set DOCKER_HOST") from None


def load(store: BlobStore, image: Image, repository: str, ref: str) -> list[str]:
    from docker.errors import DockerException

    client = engine()
    tags = [f"{repository}:{ref}", f"{repository}:{digest_tag(image.manifest_digest)}"]
    with tempfile.TemporaryDirectory(prefix="tooldock-load-") as tmp:
        archive = Path(tmp) / "image.tar"
        write_archive(archive, store, image, ref, tags[0])
        try:
            with archive.open("rb") as data:
                loaded = client.images.load(data)
            for tag in tags[1:]:
                loaded[0].tag(tag)
        except DockerException as exc:
            raise DaemonError(f"docker load failed: {exc}") from None
    return tags


def save(store: BlobStore, ref: str) -> Image:
    """An image from the local Docker engine (`docker save`), its layers gzipped the way `tarball` does,
    so a layer ToolDock built and the engine stored comes back with its original digest."""
    import gzip
    import io
    import json
    import tarfile

    from docker.errors import DockerException, ImageNotFound

    from tooldock.builder.oci import assemble_from_registry

    client = engine()
    try:
        chunks = client.images.get(ref).save()
        raw = b"".join(chunks)
    except ImageNotFound:
        raise DaemonError(f"--base {ref!r}: no such image in the Docker engine (docker images lists them)") from None
    except DockerException as exc:
        raise DaemonError(f"docker save {ref} failed: {exc}") from None
    with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
        entry = json.loads(_member(archive, "manifest.json", ref))[0]
        config_bytes = _member(archive, entry["Config"], ref)
        config_digest = store.put(config_bytes)
        sizes, layers = {}, []
        for name in entry["Layers"]:
            data = _member(archive, name, ref)
            if data[:2] != b"\x1f\x8b":  # docker save writes uncompressed layers
                buffer = io.BytesIO()
                with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=6) as gz:
                    gz.write(data)
                data = buffer.getvalue()
            digest = store.put(data)
            sizes[digest] = len(data)
            layers.append(
                {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": len(data)}
            )
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": len(config_bytes),
        },
        "layers": layers,
    }
    return assemble_from_registry(store, manifest, sizes)


def _member(archive: tarfile.TarFile, name: str, ref: str) -> bytes:
    """A file of a `docker save` archive; a missing one means the engine wrote something unexpected."""
    member = archive.extractfile(name)
    if member is None:
        raise DaemonError(f"docker save {ref}: the archive has no file {name!r}")
    return member.read()
