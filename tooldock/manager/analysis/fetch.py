"""A package's published source, for analysis: an npm tarball (the registry's packument -> `dist.tarball`,
checked against `dist.integrity` / `dist.shasum`) or a PyPI sdist (the wheel when there is no sdist) from
the PyPI JSON API, checked against its sha256. Registries: `NPM_REGISTRY_URL` (default
https://registry.npmjs.org) and `PYPI_URL` (default https://pypi.org). Unpacked safely (extract.py) into
`<dest_root>/<npm|pypi>/<name>/<version>/`, atomically; a version already there is reused."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin

import httpx

from tooldock.envvars import EnvVar, names
from tooldock.errors import AnalysisError, FetchFailed
from tooldock.manager.analysis.extract import extract, single_root

# Read by the manager's repository analysis (docs/reference/settings.md is generated from these).
SETTINGS_TITLE = "Repository analysis"
SETTINGS_INTRO = (
    "The manager's [repository analysis](../howto/analyze-repo.md) fetches packages' published source from "
    "these registries."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "NPM_REGISTRY_URL",
        "`https://registry.npmjs.org`",
        "where the [repository analysis](../howto/analyze-repo.md) fetches npm packages' published source "
        "(packument, then its `dist.tarball`)",
    ),
    EnvVar(
        "PYPI_URL",
        "`https://pypi.org`",
        "where it fetches PyPI packages' sdists (or wheels) through the JSON API (`/pypi/<name>/json`)",
    ),
)
ENV_VARS = names(SETTINGS)
NPM_DEFAULT, PYPI_DEFAULT = "https://registry.npmjs.org", "https://pypi.org"
MAX_DOWNLOAD_BYTES = 50 * 1024 * 1024
MAX_METADATA_BYTES = 64 * 1024 * 1024  # npm packuments of popular packages are large
TIMEOUT = 60.0
NPM_NAME = re.compile(r"(@[a-z0-9][a-z0-9._~-]*/)?[a-zA-Z0-9][a-zA-Z0-9._~-]*")
PYPI_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_!-]{0,63}")


@dataclass(frozen=True)
class Package:
    kind: str  # npm | pypi
    name: str
    version: str
    path: Path  # the unpacked source (npm's `package/`, an sdist's `name-version/`)
    archive_url: str
    repository: str | None  # the source repository the metadata names, if any


async def _get(client: httpx.AsyncClient, url: str, limit: int, what: str) -> bytes:
    try:
        async with client.stream("GET", url) as response:
            if response.status_code == 404:
                raise AnalysisError(f"{what} does not exist ({url} answered 404); check the name and version")
            if response.status_code != 200:
                raise FetchFailed(f"{what}: {url} answered HTTP {response.status_code}")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise AnalysisError(f"{what} is larger than {limit // (1024 * 1024)} MB; refused")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{what}: cannot reach {url} ({type(exc).__name__}: {exc})") from None


async def _json(client: httpx.AsyncClient, url: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(await _get(client, url, MAX_METADATA_BYTES, what))
    except (ValueError, RecursionError):
        raise FetchFailed(f"{what}: {url} did not answer JSON") from None
    if not isinstance(data, dict):
        raise FetchFailed(f"{what}: {url} answered something other than a JSON object")
    return data


def _repository(value: Any) -> str | None:
    url = value.get("url") if isinstance(value, dict) else value
    return url if isinstance(url, str) and url else None


async def _npm(client: httpx.AsyncClient, base: str, name: str, version: str | None) -> tuple[str, str, Any, Any]:
    doc = await _json(client, f"{base}/{quote(name, safe='@')}", f"npm package {name}")
    if version is None:
        version = (doc.get("dist-tags") or {}).get("latest")
    meta = (doc.get("versions") or {}).get(version or "")
    if not isinstance(meta, dict) or not isinstance(meta.get("dist"), dict):
        raise AnalysisError(f"npm package {name} has no version {version!r}; omit the version for the latest")
    dist = meta["dist"]
    tarball = urljoin(f"{base}/", str(dist.get("tarball") or ""))
    return str(version), tarball, dist, _repository(meta.get("repository"))


async def _pypi(client: httpx.AsyncClient, base: str, name: str, version: str | None) -> tuple[str, str, Any, Any]:
    path = f"{base}/pypi/{quote(name)}/json" if version is None else f"{base}/pypi/{quote(name)}/{quote(version)}/json"
    doc = await _json(client, path, f"PyPI package {name}")
    info, files = doc.get("info") or {}, doc.get("urls") or []
    sdists = [f for f in files if isinstance(f, dict) and f.get("packagetype") == "sdist"]
    wheels = [f for f in files if isinstance(f, dict) and f.get("packagetype") == "bdist_wheel"]
    wheels.sort(key=lambda f: "none-any" not in str(f.get("filename", "")))
    if not sdists and not wheels:
        raise AnalysisError(f"PyPI package {name} {version or ''} publishes no sdist or wheel to analyze")
    chosen = (sdists or wheels)[0]
    urls = info.get("project_urls") or {}
    repo = next((u for k, u in urls.items() if k.lower() in ("source", "repository", "code", "homepage")), None)
    url = urljoin(path, str(chosen.get("url") or ""))  # mirrors answer relative URLs
    return str(info.get("version") or version), url, chosen.get("digests") or {}, repo


def _verify(data: bytes, digests: dict[str, Any], what: str) -> None:
    """npm's `integrity` (sha512-base64) or `shasum`; PyPI's `sha256`. A missing digest is not checked."""
    integrity, expected = str(digests.get("integrity") or ""), None
    if integrity.startswith("sha512-"):
        expected = integrity, "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    elif digests.get("sha256"):
        expected = str(digests["sha256"]).lower(), hashlib.sha256(data).hexdigest()
    elif digests.get("shasum"):
        expected = str(digests["shasum"]).lower(), hashlib.sha1(data).hexdigest()
    if expected and expected[0] != expected[1]:
        raise FetchFailed(f"{what}: the download does not match the registry's checksum; refused")


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", part.replace("/", "__"))


async def fetch_package(
    kind: str,
    name: str,
    version: str | None,
    dest_root: Path | str,
    registry: str | None = None,
) -> Package:
    """Download and unpack `name` (`version`, or the latest) from npm or PyPI under dest_root."""
    if kind not in ("npm", "pypi"):
        raise AnalysisError(f"package type {kind!r} is not supported; use 'npm' or 'pypi'")
    pattern = NPM_NAME if kind == "npm" else PYPI_NAME
    if not isinstance(name, str) or len(name) > 214 or not pattern.fullmatch(name):
        raise AnalysisError(f"{name!r} is not a valid {kind} package name")
    if version is not None and (not isinstance(version, str) or not VERSION.fullmatch(version)):
        raise AnalysisError(f"{version!r} is not a package version such as 1.2.3")
    env, default = ("NPM_REGISTRY_URL", NPM_DEFAULT) if kind == "npm" else ("PYPI_URL", PYPI_DEFAULT)
    base = (registry or os.environ.get(env) or default).rstrip("/")
    what = f"{kind} package {name}"
    async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=True) as client:
        resolved, url, digests, repo = await (_npm if kind == "npm" else _pypi)(client, base, name, version)
        if not url.startswith(("https://", "http://")):
            raise FetchFailed(f"{what} {resolved}: the registry gave no http(s) download URL")
        home = Path(dest_root) / kind / _safe(name) / _safe(resolved)
        if home.is_dir():
            return Package(kind, name, resolved, single_root(home), url, repo)
        data = await _get(client, url, MAX_DOWNLOAD_BYTES, f"{what} {resolved}")
    _verify(data, digests if isinstance(digests, dict) else {}, f"{what} {resolved}")
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = home.with_name(f".tmp-{uuid.uuid4().hex}")
    with tempfile.NamedTemporaryFile(dir=home.parent, suffix=".archive") as archive:
        archive.write(data)
        archive.flush()
        extract(Path(archive.name), staging, f"{what} {resolved}")
    try:
        staging.rename(home)
    except OSError:  # another fetch of the same version won the race
        shutil.rmtree(staging, ignore_errors=True)
    return Package(kind, name, resolved, single_root(home), url, repo)
