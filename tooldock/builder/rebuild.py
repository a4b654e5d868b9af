"""`tooldock verify --rebuild IMAGE NAMESPACE_DIR`: build the namespace again from what the image's provenance
records, with a fresh build cache, and compare the digests (the builder is reproducible).

The parameters come from the attached provenance statement (name, tag, base, SOURCE_DATE_EPOCH). The fresh
cache starts with two of the user's cache's folders only, the inputs the statement pins: `debs/` (the base's
Debian packages as downloaded, each checked against its pinned hash) and `locks/` (the framework's resolved
lock, recorded by digest); the base image, installed trees, layers, schemas and documents are all made again.
When the digests differ, the inputs whose recorded digests differ are named (the folder, a lock, the base).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldock.builder.attach import PROVENANCE
from tooldock.builder.build import Builder, BuildOptions
from tooldock.builder.places import place
from tooldock.builder.platforms import of_python_platform
from tooldock.errors import BuilderError

DEFAULT_BASE = "tooldock base"
SEEDED = ("debs", "locks")


class RebuildError(BuilderError):
    """The image's provenance is missing or unusable, or the rebuild differs."""


@dataclass
class Rebuilt:
    expected: str  # the image's digest (the provenance's subject)
    got: str  # the rebuild's
    differing: list[str] = field(default_factory=list)  # names of resolvedDependencies whose digests differ

    @property
    def same(self) -> bool:
        return self.expected == self.got


def statement_of(image: str) -> dict[str, Any]:
    where = place(image)
    found = next((f for f in where.referrers() if f.artifact_type == PROVENANCE), None)
    if found is None:
        raise RebuildError(f"{image}: no provenance attached (built with --no-attach?); nothing to rebuild from")
    try:
        statement: dict[str, Any] = json.loads(where.document(found.digest))
        subject = "sha256:" + statement["subject"][0]["digest"]["sha256"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise RebuildError(f"{image}: the attached provenance is not an in-toto statement ({exc})") from None
    if subject != where.digest:
        raise RebuildError(f"{image}: the provenance is of {subject}, not of the image ({where.digest})")
    return statement


@contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _seed(cache: Path, fresh: Path) -> None:
    for name in SEEDED:
        if (cache / name).is_dir():
            shutil.copytree(cache / name, fresh / name, copy_function=_link_or_copy)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _digests(statement: dict[str, Any]) -> dict[str, Any]:
    deps = statement.get("predicate", {}).get("buildDefinition", {}).get("resolvedDependencies", [])
    return {d.get("name"): d.get("digest") for d in deps}


def rebuild(image: str, folder: Path, cache: Path, say: Callable[[str], None]) -> Rebuilt:
    statement = statement_of(image)
    expected = "sha256:" + statement["subject"][0]["digest"]["sha256"]
    params = statement.get("predicate", {}).get("buildDefinition", {}).get("externalParameters", {})
    if params.get("kind") != "namespace":
        raise RebuildError(f"{image} is a {params.get('kind')!r} image; --rebuild rebuilds namespace images only")
    base = params.get("base")
    with tempfile.TemporaryDirectory(prefix="tooldock-rebuild-") as tmp:
        fresh = Path(tmp) / "cache"
        fresh.mkdir()
        _seed(cache, fresh)
        internal = statement.get("predicate", {}).get("buildDefinition", {}).get("internalParameters", {})
        options = BuildOptions(
            output=Path(tmp) / "oci",
            cache=fresh,
            base=None if base in (None, DEFAULT_BASE) else base,
            attach=True,
            platform=of_python_platform(str(internal.get("platform", ""))),  # an arm64 image is rebuilt for arm64
        )
        with _environment("SOURCE_DATE_EPOCH", str(params.get("SOURCE_DATE_EPOCH", 0))):
            result = Builder(options, say=say).build(folder)
        if result.namespace != params.get("name"):
            raise RebuildError(
                f"{folder} builds namespace {result.namespace!r}; the image is of {params.get('name')!r}"
            )
        ours = next((a for a in result.attached if a.artifact_type == PROVENANCE), None)
        mine = (
            _digests(json.loads(result.layout.joinpath("blobs", *ours.document.split(":")).read_bytes()))
            if ours
            else {}
        )
    recorded = _digests(statement)
    differing = sorted(n for n in set(recorded) | set(mine) if recorded.get(n) != mine.get(n))
    return Rebuilt(expected, result.image.manifest_digest, differing)
