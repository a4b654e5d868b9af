"""The image's software bill of materials: CycloneDX 1.6 JSON, made with cyclonedx-python-lib.

Components: the base's Debian packages (`pkg:deb/debian/...`), every Python package of the locks
(`pkg:pypi/...`, the lock's hashes, the licence its METADATA declares), ToolDock's own files and the
namespace's files with their SHA-256. Same materials, same bytes: the serial number is derived from the
image digest and the timestamp is SOURCE_DATE_EPOCH's, as the image's `created`.
"""

from __future__ import annotations

import datetime
import re
import uuid
from email.parser import HeaderParser
from pathlib import Path

from cyclonedx.factory.license import LicenseFactory
from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.dependency import Dependency
from cyclonedx.model.license import DisjunctiveLicense, LicenseExpression
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

import tooldock
from tooldock.builder.lock import locked
from tooldock.builder.materials import Materials, file_hashes
from tooldock.builder.tarball import source_date_epoch

_licences = LicenseFactory()


def _sha256(hexa: str) -> HashType:
    return HashType(alg=HashAlgorithm.SHA_256, content=hexa)


def _prop(name: str, value: str) -> Property:
    return Property(name=f"tooldock:{name}", value=value)


def declared_licences(tree: Path | None) -> dict[str, list[LicenseExpression | DisjunctiveLicense]]:
    """Normalised package name -> the licence its METADATA declares (License-Expression, a short License field,
    else the `License ::` classifiers); packages that declare none are absent."""
    found: dict[str, list[LicenseExpression | DisjunctiveLicense]] = {}
    if tree is None:
        return found
    for meta in sorted(tree.glob("*.dist-info/METADATA")):
        headers = HeaderParser().parsestr(meta.read_text(errors="replace"))
        name = re.sub(r"[-_.]+", "-", headers.get("Name") or "").lower()
        expression = (headers.get("License-Expression") or "").strip()
        short = (headers.get("License") or "").strip()
        if expression:
            found[name] = [_licences.make_from_string(expression)]
        elif short and "\n" not in short and len(short) < 80 and short.upper() != "UNKNOWN":
            found[name] = [_licences.make_from_string(short)]
        else:
            named = [
                c.rsplit("::", 1)[1].strip() for c in headers.get_all("Classifier") or [] if c.startswith("License ::")
            ]
            if named:
                found[name] = [DisjunctiveLicense(name=n) for n in sorted(set(named))]
    return found


def _python_packages(m: Materials) -> list[Component]:
    components: dict[str, Component] = {}
    for layer in m.locks:
        licences = declared_licences(layer.tree)
        for pkg in locked(layer.lock):
            if pkg.name in components:
                continue
            components[pkg.name] = Component(
                type=ComponentType.LIBRARY,
                name=pkg.name,
                version=pkg.version,
                bom_ref=f"pypi:{pkg.name}@{pkg.version}",
                purl=PackageURL(type="pypi", name=pkg.name, version=pkg.version),
                hashes=[_sha256(h.split(":", 1)[1]) for h in pkg.hashes],
                licenses=licences.get(pkg.name, []),
                properties=[_prop("layer", layer.layer)],
            )
    return list(components.values())


def _debian_packages(m: Materials) -> list[Component]:
    return [
        Component(
            type=ComponentType.LIBRARY if d.name.startswith("lib") else ComponentType.APPLICATION,
            name=d.name,
            version=d.version,
            bom_ref=f"deb:{d.name}@{d.version}?arch={d.architecture}",
            purl=PackageURL(
                type="deb", namespace="debian", name=d.name, version=d.version, qualifiers={"arch": d.architecture}
            ),
            hashes=[_sha256(d.sha256)],
            properties=[_prop("layer", "base"), _prop("deb-sha256", d.sha256)],
        )
        for d in m.debs or ()
    ]


def _files(entries: list[tuple[str, str]], prefix: str) -> list[Component]:
    return [
        Component(type=ComponentType.FILE, name=path, bom_ref=f"{prefix}:{path}", hashes=[_sha256(digest)])
        for path, digest in entries
    ]


def make_sbom(m: Materials) -> bytes:
    """The CycloneDX 1.6 JSON document for the image `m.image` (sorted keys, two-space indent, newline)."""
    image_hex = m.image.manifest_digest.split(":", 1)[1]
    root = Component(
        type=ComponentType.CONTAINER,
        name=f"tooldock/{m.name.removeprefix('tooldock-')}" if m.kind != "namespace" else f"tooldock/{m.name}",
        version=m.ref,
        bom_ref=f"image:{m.image.manifest_digest}",
        purl=PackageURL(type="oci", name=m.name, version=m.image.manifest_digest),
        hashes=[_sha256(image_hex)],
        properties=[_prop("kind", m.kind), _prop("python", m.python), _prop("platform", m.platform)],
    )
    worker = Component(
        type=ComponentType.FRAMEWORK,
        name="tooldock-worker" if m.kind == "namespace" else "tooldock",
        version=tooldock.__version__,
        bom_ref=f"tooldock:{tooldock.__version__}",
        purl=PackageURL(type="generic", name="tooldock", version=tooldock.__version__),
        components=_files(file_hashes(m.own), "tooldock"),
        properties=[_prop("layer", "framework" if m.kind == "namespace" else "gateway")],
    )
    base = Component(
        type=ComponentType.CONTAINER,
        name=m.base_ref,
        version=m.base.manifest_digest,
        bom_ref=f"base:{m.base.manifest_digest}",
        hashes=[_sha256(m.base.manifest_digest.split(":", 1)[1])],
        properties=[_prop("layer", "base"), _prop("packages", "listed" if m.debs is not None else "unknown")],
    )
    parts = [base, *_debian_packages(m), *_python_packages(m), worker, *_files(file_hashes(m.files), "file")]
    created = datetime.datetime.fromtimestamp(source_date_epoch(), tz=datetime.UTC)
    bom = Bom(
        serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"tooldock-sbom:{m.image.manifest_digest}"),
        metadata=BomMetaData(component=root, timestamp=created),
        components=parts,
    )
    bom.dependencies.add(Dependency(ref=root.bom_ref, dependencies=[Dependency(ref=c.bom_ref) for c in parts]))
    text = JsonV1Dot6(bom).output_as_string(indent=2, sort_keys=True)
    return text.encode() + b"\n"
