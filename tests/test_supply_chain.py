"""The SBOM and provenance `tooldock build` attaches to each image (issue 61): checked by readers that are
not ToolDock's own (cyclonedx-python-lib's schema validator, Debian's skopeo), byte-identical across
builds, leaving the image digest alone, and found again in Debian's docker-registry on loopback (which has
no referrers API: the tag fallback)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BUILD_CACHE, EXAMPLES, require, tooldock_cli
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

SBOM, PROVENANCE = "application/vnd.cyclonedx+json", "application/vnd.in-toto+json"


def build(folder: Path, out: Path, *extra: str) -> dict:
    proc = tooldock_cli("build", "--json", str(folder), "--output", str(out), *extra)
    return json.loads(proc.stdout.splitlines()[-1])


def skopeo_digest(where: str, *flags: str) -> str:
    proc = subprocess.run(["skopeo", "inspect", *flags, where], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)["Digest"]


def inspect(*args: str) -> str:
    return tooldock_cli("inspect", *args).stdout


def locked_names(lock: Path) -> set[str]:
    names = set()
    for line in lock.read_text().splitlines():
        if line and not line.startswith((" ", "#")) and "==" in line:
            names.add(line.split("==")[0].lower().replace("_", "-").replace(".", "-"))
    return names


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """async-tool (a namespace with requirements), copied into a git repository and committed, built once."""
    require("apt-get", "dpkg-deb", "git")
    tmp = tmp_path_factory.mktemp("supply")
    src = tmp / "repo" / "tools" / "async-tool"
    shutil.copytree(EXAMPLES / "async-tool", src, ignore=shutil.ignore_patterns("__pycache__", "requirements.lock"))
    git = ["git", "-C", str(tmp / "repo"), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "remote", "add", "origin", "https://example.invalid/acme/tools.git"], check=True)
    build(src, tmp / "lockonly")  # writes requirements.lock, committed with the rest
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tools"], check=True)
    shutil.rmtree(BUILD_CACHE / "attest", ignore_errors=True)  # made by this build, not read back from another run
    result = build(src, tmp / "oci")
    return {"tmp": tmp, "src": src, "result": result, "layout": tmp / "oci" / "async-tool"}


def test_the_sbom_validates_against_the_cyclonedx_schema_and_lists_every_locked_package(built):
    text = inspect(str(built["layout"]), "--sbom")
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    sbom = json.loads(text)
    assert sbom["specVersion"] == "1.6"
    pypi = {c["name"]: c for c in sbom["components"] if c.get("purl", "").startswith("pkg:pypi/")}
    lock = built["src"] / "requirements.lock"
    assert locked_names(lock) <= set(pypi), "a package of the namespace's lock is missing from the SBOM"
    assert {"fastmcp-slim", "mcp", "pydantic"} <= set(pypi)  # the framework layer's
    httpx = pypi["httpx"]
    assert httpx["purl"] == f"pkg:pypi/httpx@{httpx['version']}"
    lock_hashes = {h.split(":")[1] for h in lock.read_text().split() if h.startswith("--hash=sha256:")}
    assert {h["content"] for h in httpx["hashes"]} <= lock_hashes and httpx["hashes"]
    assert httpx["licenses"] == [{"license": {"id": "BSD-3-Clause"}}]
    debs = {c["name"]: c for c in sbom["components"] if c.get("purl", "").startswith("pkg:deb/debian/")}
    assert "libc6" in debs and "python3.11-minimal" in debs
    assert debs["libc6"]["purl"].endswith("?arch=amd64") or debs["libc6"]["purl"].endswith("?arch=arm64")
    assert debs["tzdata"]["purl"].endswith("?arch=all")
    files = {c["name"]: c["hashes"][0]["content"] for c in sbom["components"] if c["type"] == "file"}
    weather = (built["src"] / "weather.py").read_bytes()
    assert files["/app/weather.py"] == hashlib.sha256(weather).hexdigest()
    worker = next(c for c in sbom["components"] if c["name"] == "tooldock-worker")
    assert any(f["name"].endswith("/tooldock/worker/server.py") for f in worker["components"])
    assert sbom["metadata"]["component"]["version"] == "1.0.0"
    assert built["result"]["digest"] in sbom["metadata"]["component"]["purl"].replace("%3A", ":")


def test_the_provenance_names_the_image_skopeo_reads_and_the_commit_it_came_from(built):
    require("skopeo")
    digest = skopeo_digest(f"oci:{built['layout']}:1.0.0")
    assert digest == built["result"]["digest"]
    statement = json.loads(inspect(str(built["layout"]), "--provenance"))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    predicate = statement["predicate"]
    assert predicate["runDetails"]["builder"]["version"]["tooldock"]
    deps = {d["name"]: d for d in predicate["buildDefinition"]["resolvedDependencies"]}
    head = subprocess.run(["git", "-C", str(built["src"]), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert deps["source"]["digest"] == {"gitCommit": head}
    assert deps["source"]["uri"] == f"git+https://example.invalid/acme/tools.git@{head}#tools/async-tool"
    assert deps["source"]["annotations"] == {"path": "tools/async-tool", "dirty": False}
    lock = (built["src"] / "requirements.lock").read_bytes()
    assert deps["requirements.lock"]["digest"] == {"sha256": hashlib.sha256(lock).hexdigest()}
    assert "libc6=" in " ".join(deps["base-packages"]["annotations"]["packages"])
    # the folder's digest: sha256sum's lines over the files the image holds (tools.json included), sorted
    layout_files = {"requirements.lock", "requirements.txt", "tooldock.yaml", "weather.py"}
    sums = {name: hashlib.sha256((built["src"] / name).read_bytes()).hexdigest() for name in layout_files}
    sbom = json.loads(inspect(str(built["layout"]), "--sbom"))
    sums["tools.json"] = next(c for c in sbom["components"] if c["name"] == "/app/tools.json")["hashes"][0]["content"]
    lines = "".join(f"{sums[n]}  {n}\n" for n in sorted(sums))
    assert deps["namespace:async-tool"]["digest"] == {"sha256": hashlib.sha256(lines.encode()).hexdigest()}


def test_same_inputs_give_the_same_attachments_and_attaching_leaves_the_image_digest_alone(built):
    shutil.rmtree(BUILD_CACHE / "attest", ignore_errors=True)  # the SBOM made again, not read back
    again = build(built["src"], built["tmp"] / "again")
    bare = build(built["src"], built["tmp"] / "bare", "--no-attach")
    assert again["digest"] == bare["digest"] == built["result"]["digest"]
    assert again["attached"] == built["result"]["attached"] and set(again["attached"]) == {SBOM, PROVENANCE}
    assert bare["attached"] == {}
    for flag in ("--sbom", "--provenance"):
        assert inspect(str(built["tmp"] / "again" / "async-tool"), flag) == inspect(str(built["layout"]), flag)
    index = json.loads((built["layout"] / "index.json").read_text())
    assert [m.get("artifactType") for m in index["manifests"]] == [None, SBOM, PROVENANCE]
    for entry in index["manifests"][1:]:
        manifest = json.loads((built["layout"] / "blobs" / entry["digest"].replace(":", "/")).read_bytes())
        assert manifest["subject"]["digest"] == built["result"]["digest"]
        assert manifest["artifactType"] == entry["artifactType"] == manifest["layers"][0]["mediaType"]
    listing = inspect(str(built["layout"]))
    assert SBOM in listing and PROVENANCE in listing and built["result"]["digest"] in listing
    assert "no SBOM" in inspect(str(built["tmp"] / "bare" / "async-tool"))
    missing = tooldock_cli("inspect", str(built["tmp"] / "bare" / "async-tool"), "--sbom", check=False)
    assert missing.returncode == 1 and "no sbom attached" in missing.stderr


def test_pushed_attachments_are_found_through_the_tag_fallback(built, registry):
    require("skopeo")
    pushed = build(built["src"], built["tmp"] / "pushed", "--push", f"{registry}/tools")
    digest = built["result"]["digest"]
    assert pushed["pushed"]["digest"] == digest
    assert "sha256-" in pushed["pushed"]["attached"]  # docker-registry 2.x has no referrers API
    ref = f"{registry}/tools/async-tool:1.0.0"
    assert skopeo_digest(f"docker://{ref}", "--tls-verify=false") == digest  # the image is untouched
    hexa = digest.split(":")[1]
    tagged = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                             f"docker://{registry}/tools/async-tool:sha256-{hexa}.sbom"],  # cosign's SBOM tag
                            capture_output=True, text=True, check=True).stdout
    assert json.loads(tagged)["artifactType"] == SBOM and json.loads(tagged)["subject"]["digest"] == digest
    tags = json.loads(subprocess.run(["skopeo", "list-tags", "--tls-verify=false",
                                      f"docker://{registry}/tools/async-tool"],
                                     capture_output=True, text=True, check=True).stdout)["Tags"]
    assert f"sha256-{hexa}.att" not in tags  # cosign's attestation tag: written when signed (test_signing.py)
    listed = json.loads(inspect(ref, "--json"))
    assert listed["image"] == digest
    assert {a["artifactType"] for a in listed["attached"]} == {SBOM, PROVENANCE}
    assert all(a["found"] == f"tag sha256-{hexa}" for a in listed["attached"])
    assert inspect(ref, "--sbom") == inspect(str(built["layout"]), "--sbom")
    assert json.loads(inspect(f"{registry}/tools/async-tool@{digest}", "--provenance"))["subject"][0]["digest"] == {
        "sha256": hexa}
    build(built["src"], built["tmp"] / "pushed", "--push", f"{registry}/tools")  # pushed again: listed once
    index = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                            f"docker://{registry}/tools/async-tool:sha256-{hexa}"],
                           capture_output=True, text=True, check=True).stdout
    assert len(json.loads(index)["manifests"]) == 2
