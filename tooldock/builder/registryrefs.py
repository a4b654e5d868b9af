"""An image's attached artifacts (attach.py) in a registry: pushed as OCI 1.1 referrers, and found again.

Pushing: each artifact manifest is PUT by digest. A registry with the referrers API says so with the
`OCI-Subject` response header and lists it under `GET /v2/<repo>/referrers/<digest>` by itself. Without
it (Distribution 2.x, Debian's docker-registry), ToolDock falls back as the clients do: the OCI 1.1
referrers tag schema (an index tagged `sha256-<hex>` listing the artifacts, which oras reads) and
cosign's tag for an attached SBOM (`sha256-<hex>.sbom`, as `cosign attach sbom` writes). cosign's `.att` tag is
for signed attestations (DSSE envelopes, written by `tooldock sign`: signing.py), not for the plain provenance.
Finding: the referrers API first, then the `sha256-<hex>` index, then the `.sbom` tag.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import httpx

from tooldock.builder.attach import KINDS, Artifact, Found
from tooldock.builder.blobs import BlobStore
from tooldock.builder.oci import INDEX, MANIFEST, canonical
from tooldock.builder.registry import _IMAGE_REF_RE, parse_target, registry_url, upload_blob
from tooldock.builder.registryauth import RegistryAuth, RegistryError

_ACCEPT = f"{MANIFEST}, {INDEX}, application/vnd.docker.distribution.manifest.v2+json"


def _client(host: str) -> httpx.Client:
    return httpx.Client(auth=RegistryAuth(host), timeout=httpx.Timeout(30, write=300), follow_redirects=True)


def fallback_tag(subject: str, suffix: str = "") -> str:
    """`sha256-<hex>` (the OCI referrers tag schema), or with a suffix (cosign's tags: `.sig`, `.att`, `.sbom`)."""
    return subject.replace(":", "-") + (f".{suffix}" if suffix else "")


def push_referrers(store: BlobStore, attached: list[Artifact], target: str, namespace: str, subject: str) -> str:
    """Push `attached` next to the image `subject` in REGISTRY/PREFIX/<namespace>; says how they are found."""
    host, prefix = parse_target(target)
    base = registry_url(host, f"{prefix}/{namespace}")
    api = True
    try:
        with _client(host) as client:
            for a in attached:
                for digest in a.blobs:
                    upload_blob(client, base, store, digest)
                put = client.put(f"{base}/manifests/{a.digest}", content=a.manifest, headers={"Content-Type": MANIFEST})
                if put.status_code != 201:
                    raise RegistryError(
                        f"the registry refused the {a.artifact_type} artifact ({put.status_code}): {put.text[:300]}"
                    )
                api = api and put.headers.get("oci-subject") == subject
            if api:
                return "referrers API"
            for a in attached:
                if not KINDS[a.artifact_type][1]:
                    continue
                tag = fallback_tag(subject, KINDS[a.artifact_type][1])
                put = client.put(f"{base}/manifests/{tag}", content=a.manifest, headers={"Content-Type": MANIFEST})
                if put.status_code != 201:
                    raise RegistryError(f"tagging {tag} failed ({put.status_code}): {put.text[:300]}")
            _update_referrers_index(client, base, subject, attached)
    except httpx.HTTPError as exc:
        raise RegistryError(f"cannot reach registry {host}: {exc}") from None
    return f"tags {fallback_tag(subject)} (OCI referrers tag schema) and .sbom (cosign)"


def _update_referrers_index(client: httpx.Client, base: str, subject: str, attached: list[Artifact]) -> None:
    """Add `attached` to the index tagged `sha256-<hex>`, keeping what other clients listed there."""
    tag = fallback_tag(subject)
    got = client.get(f"{base}/manifests/{tag}", headers={"Accept": INDEX})
    listed = got.json().get("manifests", []) if got.status_code == 200 else []
    ours = {a.digest for a in attached}
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [d for d in listed if d.get("digest") not in ours] + [a.descriptor() for a in attached],
    }
    put = client.put(f"{base}/manifests/{tag}", content=canonical(index), headers={"Content-Type": INDEX})
    if put.status_code != 201:
        raise RegistryError(f"writing the referrers index {tag} failed ({put.status_code}): {put.text[:300]}")


@dataclass
class RemoteImage:
    """An image in a registry, and the artifacts that refer to it."""

    host: str
    repository: str
    digest: str

    @property
    def base(self) -> str:
        return registry_url(self.host, self.repository)

    def _get(self, client: httpx.Client, path: str, accept: str = _ACCEPT) -> httpx.Response | None:
        response = client.get(f"{self.base}/{path}", headers={"Accept": accept})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise RegistryError(f"registry answered {response.status_code} for {path}: {response.text[:200]}")
        return response

    def referrers(self) -> list[Found]:
        try:
            with _client(self.host) as client:
                via_api = self._get(client, f"referrers/{self.digest}", INDEX)
                if via_api is not None and "manifests" in _json(via_api):
                    return _found(_json(via_api)["manifests"], "referrers API")
                index = self._get(client, f"manifests/{fallback_tag(self.digest)}", INDEX)
                if index is not None:
                    return _found(_json(index).get("manifests", []), f"tag {fallback_tag(self.digest)}")
                found = []
                for artifact_type, (_, suffix) in KINDS.items():
                    if not suffix:
                        continue
                    tagged = self._get(client, f"manifests/{fallback_tag(self.digest, suffix)}")
                    if tagged is not None:
                        kind = _json(tagged).get("artifactType") or artifact_type
                        digest = "sha256:" + hashlib.sha256(tagged.content).hexdigest()
                        found.append(
                            Found(kind, digest, len(tagged.content), f"tag {fallback_tag(self.digest, suffix)}")
                        )
                return found
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot reach registry {self.host}: {exc}") from None

    def document(self, artifact_digest: str) -> bytes:
        try:
            with _client(self.host) as client:
                manifest = self._get(client, f"manifests/{artifact_digest}")
                if manifest is None:
                    raise RegistryError(f"artifact {artifact_digest} not found in {self.repository}")
                blob = self._get(client, f"blobs/{_json(manifest)['layers'][0]['digest']}", "*/*")
                if blob is None:
                    raise RegistryError(f"the document of artifact {artifact_digest} is missing from {self.repository}")
                return blob.content
        except httpx.HTTPError as exc:
            raise RegistryError(f"cannot reach registry {self.host}: {exc}") from None


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = json.loads(response.content)
    except json.JSONDecodeError as exc:
        raise RegistryError(f"the registry's answer is not JSON: {exc}") from None
    return data if isinstance(data, dict) else {}


def _found(descriptors: list[dict[str, Any]], source: str) -> list[Found]:
    return [Found(d.get("artifactType", ""), d["digest"], d.get("size", 0), source) for d in descriptors]


def remote_image(ref: str) -> RemoteImage:
    """HOST/REPOSITORY[:TAG][@sha256:...] -> the image's manifest digest in that registry."""
    match = _IMAGE_REF_RE.match(ref)
    if not match:
        raise RegistryError(
            f"{ref!r}: expected REGISTRY/REPOSITORY[:TAG][@sha256:...], e.g. 127.0.0.1:5000/tools/hello:1.0"
        )
    host, path = match.group("host"), match.group("path")
    image = RemoteImage(host, path, match.group("digest") or "")
    if image.digest:
        return image
    try:
        with _client(host) as client:
            got = image._get(client, f"manifests/{match.group('tag') or 'latest'}")
    except httpx.HTTPError as exc:
        raise RegistryError(f"cannot reach registry {host}: {exc}") from None
    if got is None:
        raise RegistryError(f"{ref}: no such image in the registry")
    image.digest = got.headers.get("docker-content-digest") or "sha256:" + hashlib.sha256(got.content).hexdigest()
    return image
