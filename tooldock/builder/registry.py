"""Push an image to a registry through the OCI distribution API (no Docker).

Blobs the registry already has are skipped (HEAD), the rest are uploaded monolithically (POST + PUT),
then the manifest is PUT by tag; the registry's digest for it must equal the built one. Token auth
follows the distribution spec: a 401 with `WWW-Authenticate: Bearer realm=...,service=...,scope=...` is
answered by fetching a token from the realm, with the credentials registryauth.py finds (TOOLDOCK_REGISTRY_*,
or what `docker login` left).
Loopback registries are spoken to over plain HTTP, every other one over HTTPS.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from tooldock.builder.blobs import BlobStore
from tooldock.builder.oci import MANIFEST, Image, assemble_from_registry
from tooldock.builder.registryauth import RegistryAuth, RegistryError

_REF_RE = re.compile(
    r"^(?P<host>[A-Za-z0-9.-]+(:[0-9]+)?|\[[0-9a-fA-F:]+\](:[0-9]+)?)/(?P<path>[a-z0-9]+([._/-][a-z0-9]+)*)$"
)


@dataclass
class PushResult:
    reference: str
    digest: str
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def parse_target(target: str) -> tuple[str, str]:
    """`REGISTRY/PREFIX` -> (host[:port], prefix). Raises with an example when malformed."""
    match = _REF_RE.match(target.rstrip("/"))
    if not match:
        raise RegistryError(
            f"--push {target!r}: expected REGISTRY/PREFIX, e.g. 127.0.0.1:5000/tools or ghcr.io/acme/tools"
        )
    return match.group("host"), match.group("path")


def _scheme(host: str) -> str:
    name = host.rsplit(":", 1)[0].strip("[]") if not host.startswith("[") else host[1 : host.index("]")]
    if name == "localhost":
        return "http"
    try:
        return "http" if ipaddress.ip_address(name).is_loopback else "https"
    except ValueError:
        return "https"


def registry_url(host: str, repository: str) -> str:
    """The distribution API's base URL for `repository` (HTTP for loopback registries, HTTPS otherwise)."""
    return f"{_scheme(host)}://{host}/v2/{repository}"


def upload_blob(client: httpx.Client, base: str, store: BlobStore, digest: str) -> bool:
    """Upload one blob unless the repository has it (HEAD); True when it was uploaded."""
    if client.head(f"{base}/blobs/{digest}").status_code == 200:
        return False
    start = client.post(f"{base}/blobs/uploads/")
    if start.status_code != 202 or "location" not in start.headers:
        raise RegistryError(f"registry refused an upload to {base} ({start.status_code}): {start.text[:200]}")
    location = httpx.URL(f"{base}/").join(start.headers["location"])
    done = client.put(
        location,
        params={**dict(location.params), "digest": digest},
        content=store.path(digest).read_bytes(),
        headers={"Content-Type": "application/octet-stream"},
    )
    if done.status_code != 201:
        raise RegistryError(f"upload of {digest} failed ({done.status_code}): {done.text[:200]}")
    return True


def push(store: BlobStore, image: Image, target: str, namespace: str, tag: str) -> PushResult:
    host, prefix = parse_target(target)
    repository = f"{prefix}/{namespace}"
    base = registry_url(host, repository)
    result = PushResult(f"{host}/{repository}:{tag}", image.manifest_digest)
    try:
        with httpx.Client(
            auth=RegistryAuth(host), timeout=httpx.Timeout(30, write=300), follow_redirects=True
        ) as client:
            for digest in dict.fromkeys([image.config_digest, *(layer.digest for layer in image.layers)]):
                uploaded = upload_blob(client, base, store, digest)
                (result.uploaded if uploaded else result.skipped).append(digest)
            put = client.put(f"{base}/manifests/{tag}", content=image.manifest, headers={"Content-Type": MANIFEST})
            if put.status_code != 201:
                raise RegistryError(f"manifest upload failed ({put.status_code}): {put.text[:300]}")
            pushed = put.headers.get("docker-content-digest")
            if pushed and pushed != image.manifest_digest:
                raise RegistryError(f"the registry stored digest {pushed}, not the built {image.manifest_digest}")
    except httpx.HTTPError as exc:
        raise RegistryError(f"cannot reach registry {host}: {exc}") from None
    return result


_ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
)
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_IMAGE_REF_RE = re.compile(
    r"^(?P<host>[^/]+)/(?P<path>[a-z0-9]+(?:[._/-][a-z0-9]+)*)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


def looks_like_registry_ref(ref: str) -> bool:
    first = ref.split("/", 1)[0]
    return "/" in ref and ("." in first or ":" in first or first == "localhost")


def pull(store: BlobStore, ref: str, architecture: str) -> Image:
    """Fetch a single-platform image (picking `linux/<architecture>` from an index) into `store`."""
    match = _IMAGE_REF_RE.match(ref)
    if not match:
        raise RegistryError(
            f"--base {ref!r}: expected REGISTRY/REPOSITORY[:TAG][@sha256:...], e.g. 127.0.0.1:5000/bases/python:3.11"
        )
    host, path = match.group("host"), match.group("path")
    reference = match.group("digest") or match.group("tag") or "latest"
    base = f"{_scheme(host)}://{host}/v2/{path}"
    try:
        with httpx.Client(
            auth=RegistryAuth(host), timeout=httpx.Timeout(30, read=300), follow_redirects=True
        ) as client:

            def get(url: str, **kw: Any) -> httpx.Response:
                response = client.get(url, **kw)
                if response.status_code == 404:
                    raise RegistryError(
                        f"base image {ref} not found in the registry (404 for {url.rsplit('/v2/', 1)[-1]})"
                    )
                if response.status_code != 200:
                    raise RegistryError(f"registry answered {response.status_code} for {url}: {response.text[:200]}")
                return response

            manifest = get(f"{base}/manifests/{reference}", headers={"Accept": _ACCEPT}).json()
            if "manifests" in manifest:  # an index: pick our platform
                chosen = next(
                    (
                        m
                        for m in manifest["manifests"]
                        if (m.get("platform") or {}).get("os") == "linux"
                        and (m.get("platform") or {}).get("architecture") == architecture
                    ),
                    None,
                )
                if chosen is None:
                    raise RegistryError(f"base image {ref} has no linux/{architecture} variant")
                manifest = get(f"{base}/manifests/{chosen['digest']}", headers={"Accept": _ACCEPT}).json()
            blobs = {}
            for descriptor in [manifest["config"], *manifest["layers"]]:
                data = get(f"{base}/blobs/{descriptor['digest']}").content
                if store.put(data) != descriptor["digest"]:
                    raise RegistryError(f"blob {descriptor['digest']} of {ref} does not match its digest")
                blobs[descriptor["digest"]] = len(data)
    except httpx.HTTPError as exc:
        raise RegistryError(f"cannot reach registry {host}: {exc}") from None
    return assemble_from_registry(store, manifest, blobs)
