"""The content-addressed store: blobs by digest, and a layer cache keyed by what went into each layer.

A layer whose inputs hash to a known key is not rebuilt: its blob is already in the store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from tooldock.atomic import atomic_write as write_file
from tooldock.atomic import staged
from tooldock.builder.tarball import Entry, Layer, write_layer


def atomic_write(path: Path, data: bytes) -> None:
    """Layouts are read by other tools and users: 0644, its folder made when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, data)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, digest: str) -> Path:
        algo, _, hexa = digest.partition(":")
        return self.root / "blobs" / algo / hexa

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def put(self, data: bytes) -> str:
        digest = f"sha256:{sha256_hex(data)}"
        if not self.has(digest):
            atomic_write(self.path(digest), data)
        return digest

    def add_file(self, source: Path, digest: str) -> None:
        """Copy a blob from another store (e.g. a base image's layout) if it is not here yet."""
        if not self.has(digest):
            atomic_write(self.path(digest), source.read_bytes())

    def layer(self, key: str, entries: Callable[[], list[Entry]]) -> tuple[Layer, bool]:
        """The layer for `key`, built from `entries()` only if this key has not been built before."""
        index = self.root / "layers" / f"{key}.json"
        if index.is_file():
            cached = Layer(**json.loads(index.read_text()))
            if self.has(cached.digest):
                return cached, True
        self.root.joinpath("blobs", "sha256").mkdir(parents=True, exist_ok=True)
        with staged(self.root / "blobs" / "sha256", "layer") as out:  # its name is its digest, known once written
            digest, diff_id, size = write_layer(entries(), out.file)
            out.commit(self.path(digest))
        layer = Layer(digest, diff_id, size)
        atomic_write(index, json.dumps(layer.__dict__).encode())
        return layer, False


def cache_key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()
