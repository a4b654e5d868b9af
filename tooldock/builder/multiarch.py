"""Several platforms of one namespace in one OCI image index (`tooldock build --platform linux/amd64,linux/arm64`).

Each platform's image is built by its own Builder (build.py), exactly as that platform built alone: the same
layers, config and manifest, so its digest does not depend on which other platforms are built beside it. The
index lists the manifests in a fixed order (platforms.parse sorts them), each with its `platform`; its digest
is the build's. In the OCI layout, `index.json` names the index with the tag, followed by each platform's SBOM
and provenance (their `subject` is that platform's manifest). Pushed: every manifest by digest with its
attachments, then the index under the tag.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from tooldock.builder.attach import Artifact, LayoutReader
from tooldock.builder.blobs import BlobStore
from tooldock.builder.build import Builder, BuildOptions, BuildResult
from tooldock.builder.oci import INDEX, MANIFEST, REF_NAME, Image, canonical, image_index, write_blobs_layout
from tooldock.builder.platforms import Platform, host
from tooldock.builder.registry import parse_target, push, registry_url
from tooldock.builder.registryauth import RegistryAuth, RegistryError
from tooldock.builder.registryrefs import push_referrers, remote_image


@dataclass
class IndexResult:
    """A namespace built for several platforms: the index and each platform's image."""

    namespace: str
    ref: str
    layout: Path
    index: bytes
    digest: str
    builds: list[tuple[Platform, BuildResult]]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.builds[0][1].tools

    @property
    def repository(self) -> str:
        return self.builds[0][1].repository

    def image_for(self, wanted: Platform) -> BuildResult | None:
        return next((result for p, result in self.builds if p == wanted), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "digest": self.digest,
            "mediaType": INDEX,
            "ref": self.ref,
            "layout": str(self.layout),
            "tools": [t["name"] for t in self.tools],
            "platforms": {
                p.name: {k: v for k, v in r.to_json().items() if k not in ("namespace", "ref", "layout", "tools")}
                for p, r in self.builds
            },
            "timings_ms": {k: round(v * 1000, 1) for k, v in self.timings.items()},
        }


class IndexBuilder:
    """Builders of `platforms` sharing one store, one build of the machine's platform (its base interpreter
    compiles every platform's bytecode; its import of the tools gives every platform's schemas)."""

    def __init__(
        self, options: BuildOptions, platforms: list[Platform], say: Callable[[str], None] = lambda _: None
    ) -> None:
        self.options, self.platforms = options, platforms
        self.machine = Builder(replace(options, platform=None), say)
        self.store: BlobStore = self.machine.store
        self.builders = {
            p: self.machine if p == host() else Builder(replace(options, platform=p), say, self.machine)
            for p in platforms
        }

    def build(self, folder: Path) -> IndexResult:
        started = time.perf_counter()
        for p in self.platforms:  # every platform's lock first: a missing wheel is refused before any install
            self.builders[p].lock(folder)  # (and so each platform's base, made or taken from the cache, first)
        locked = time.perf_counter()
        builds = [(p, self.builders[p].compose(folder)) for p in self.platforms]
        first = builds[0][1]
        index = image_index([(p.descriptor(), r.image) for p, r in builds])
        digest = self.store.put(index)
        attached = [a for _, r in builds for a in r.attached]
        layout = self.options.output / first.namespace
        write_index_layout(layout, self.store, index, first.ref, [r.image for _, r in builds], attached)
        timings = {"bases_and_locks": locked - started, "images": time.perf_counter() - locked}
        return IndexResult(first.namespace, first.ref, layout, index, digest, builds, timings)


def write_index_layout(
    dest: Path,
    store: BlobStore,
    index: bytes,
    ref: str,
    images: list[Image],
    attached: list[Artifact] | None = None,
) -> None:
    """The OCI layout: `index.json` names the image index `ref`, then lists the attachments of every platform."""
    entry = {"mediaType": INDEX, "digest": store.put(index), "size": len(index), "annotations": {REF_NAME: ref}}
    attached = attached or []
    listing = canonical(
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": [entry, *(a.descriptor() for a in attached)]}
    )
    digests = [str(entry["digest"])]
    for image in images:
        digests += [image.manifest_digest, image.config_digest, *(layer.digest for layer in image.layers)]
    digests += [d for a in attached for d in (a.digest, *a.blobs)]
    write_blobs_layout(dest, store, listing, digests)


def push_index(store: BlobStore, result: IndexResult, target: str) -> dict[str, Any]:
    """Push each platform's image (by digest) and its attachments, then the index tagged `result.ref`."""
    host_name, prefix = parse_target(target)
    repository = f"{prefix}/{result.namespace}"
    platforms: dict[str, Any] = {}
    for p, r in result.builds:
        pushed = push(store, r.image, target, result.namespace, r.image.manifest_digest)
        how = push_referrers(store, r.attached, target, result.namespace, pushed.digest) if r.attached else ""
        platforms[p.name] = {
            "digest": pushed.digest,
            "uploaded": pushed.uploaded,
            "skipped": pushed.skipped,
            "attached": how,
        }
    url = f"{registry_url(host_name, repository)}/manifests/{result.ref}"
    try:
        with httpx.Client(auth=RegistryAuth(host_name), timeout=httpx.Timeout(30), follow_redirects=True) as client:
            put = client.put(url, content=result.index, headers={"Content-Type": INDEX})
    except httpx.HTTPError as exc:
        raise RegistryError(f"cannot reach registry {host_name}: {exc}") from None
    if put.status_code != 201:
        raise RegistryError(f"the registry refused the image index ({put.status_code}): {put.text[:300]}")
    stored = put.headers.get("docker-content-digest")
    if stored and stored != result.digest:
        raise RegistryError(f"the registry stored the index as {stored}, not the built {result.digest}")
    return {
        "reference": f"{host_name}/{repository}:{result.ref}",
        "digest": result.digest,
        "platforms": platforms,
    }


def index_platforms(image: str) -> tuple[str, dict[str, str]] | None:
    """When IMAGE (an OCI layout directory or a registry reference) is an image index: its digest and each
    platform's image digest (`linux/arm64` -> sha256:...); None for a single image."""
    if Path(image).is_dir():
        reader = LayoutReader(Path(image))
        top: dict[str, Any] = next((d for d in reader.entries if d["digest"] == reader.digest), {})
        if top.get("mediaType") != INDEX:
            return None
        index = json.loads(reader.blob(reader.digest))
    else:
        remote = remote_image(image)
        url = f"{remote.base}/manifests/{remote.digest}"
        try:
            with httpx.Client(auth=RegistryAuth(remote.host), timeout=httpx.Timeout(30), follow_redirects=True) as c:
                got = c.get(url, headers={"Accept": f"{INDEX}, {MANIFEST}"})
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot reach registry {remote.host}: {exc}") from None
        if got.status_code != 200:
            raise RegistryError(f"registry answered {got.status_code} for {image}")
        index = json.loads(got.content)
        if index.get("mediaType") != INDEX and "manifests" not in index:
            return None
        return remote.digest, _platforms(index)
    return reader.digest, _platforms(index)


def _platforms(index: dict[str, Any]) -> dict[str, str]:
    found = {}
    for entry in index.get("manifests", []):
        platform = entry.get("platform") or {}
        if platform.get("os") and platform.get("architecture"):
            found[f"{platform['os']}/{platform['architecture']}"] = entry["digest"]
    return found
