"""Load a built image into the local Docker engine (docker-py), tagged by version and by digest.

The engine takes the same tar `archive` writes: it is a `docker load` archive as well as an OCI layout.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .archive import write_archive
from .blobs import BlobStore
from .oci import Image


class DaemonError(RuntimeError):
    pass


def digest_tag(digest: str) -> str:
    """A tag that names the exact build: Docker's classic image store keeps no manifest digest for a
    loaded image, so `tooldock/<ns>:sha256-<hex>` stands in for `tooldock/<ns>@sha256:<hex>`."""
    return digest.replace(":", "-")


def engine():
    """A connected docker-py client (DOCKER_HOST or the default socket), or a clear error."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:  # docker-py raises several types for "no engine"
        raise DaemonError(
            f"cannot reach the Docker engine ({exc}); start dockerd or set DOCKER_HOST, or use --tar/--push"
        ) from None


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
