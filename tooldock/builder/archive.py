"""One tar that is both an OCI image layout and a `docker load` archive.

It holds the OCI layout (`oci-layout`, `index.json`, `blobs/`) plus Docker's `manifest.json`, whose
entries point into the same blobs, so each blob is stored once. Written deterministically.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from tooldock.atomic import staged
from tooldock.builder.blobs import BlobStore
from tooldock.builder.oci import Image, canonical, index_json
from tooldock.builder.tarball import source_date_epoch


def write_archive(dest: Path, store: BlobStore, image: Image, ref: str, repo_tag: str) -> None:
    blobs = [image.manifest_digest, image.config_digest, *(layer.digest for layer in image.layers)]
    docker_manifest = canonical(
        [
            {
                "Config": f"blobs/sha256/{image.config_digest.split(':')[1]}",
                "RepoTags": [repo_tag],
                "Layers": [f"blobs/sha256/{layer.digest.split(':')[1]}" for layer in image.layers],
            }
        ]
    )
    files: list[tuple[str, bytes | Path]] = [
        ("oci-layout", canonical({"imageLayoutVersion": "1.0.0"})),
        ("index.json", index_json(image, ref)),
        ("manifest.json", docker_manifest),
        *((f"blobs/sha256/{d.split(':')[1]}", store.path(d)) for d in dict.fromkeys(blobs)),
    ]
    mtime = source_date_epoch()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with staged(dest.parent, dest.name) as out:
        with tarfile.open(fileobj=out.file, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for directory in ("blobs", "blobs/sha256"):
                info = tarfile.TarInfo(directory)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
                tar.addfile(info)
            for name, content in sorted(files, key=lambda f: f[0]):
                data = content if isinstance(content, bytes) else content.read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, mtime
                tar.addfile(info, io.BytesIO(data))
        out.commit(dest)  # 0644, as every file the build writes
