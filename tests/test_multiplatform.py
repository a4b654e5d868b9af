"""`tooldock build --platform linux/amd64,linux/arm64` (issue 61): one build of async-tool (a namespace with
requirements) for both platforms, pushed to Debian's docker-registry on loopback and loaded into the test engine,
shared by the module. Checked by readers that are not ToolDock's: skopeo reads the pushed index, the engine
pulls the arm64 image from it and runs it under Debian's qemu-user-static (binfmt_misc), whose worker answers the
worker protocol; the arm64 interpreter itself, run under qemu, writes the very bytecode the image holds (which
this machine's interpreter compiled). The amd64 image is the one a build without --platform makes."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from conftest import EXAMPLES, require, tooldock_cli
from qemukit import arm64_emulation  # noqa: F401 (a fixture)
from test_docker import _talk, wait_for_socket

NS = "async-tool"


def build(*args: str, env: dict[str, str] | None = None) -> dict:
    return json.loads(tooldock_cli("build", "--json", *args, env=env).stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def two(tmp_path_factory, registry, docker_host):
    """async-tool built alone (this machine's platform), then for linux/amd64 and linux/arm64 with --push and
    --load: the second build writes the arm64 lock beside the first's requirements.lock."""
    require("apt-get", "dpkg-deb", "skopeo")
    tmp = tmp_path_factory.mktemp("multiplatform")
    src = tmp / NS
    shutil.copytree(EXAMPLES / NS, src, ignore=shutil.ignore_patterns("__pycache__", "requirements*.lock"))
    alone = build(str(src), "--output", str(tmp / "alone"))
    started = time.monotonic()
    both = build(str(src), "--output", str(tmp / "oci"), "--platform", "linux/arm64,linux/amd64",
                 "--push", f"{registry}/multiplatform", "--load", env={"DOCKER_HOST": docker_host})
    print(f"two-platform build: {time.monotonic() - started:.1f} s")
    layout = tmp / "oci" / NS
    return {"tmp": tmp, "src": src, "alone": alone, "both": both, "layout": layout, "registry": registry}


def blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / digest.replace(":", "/")).read_bytes()


def manifests(two) -> dict[str, dict]:
    """architecture -> {digest, manifest, config} of each image the layout's index lists."""
    layout = two["layout"]
    top = json.loads((layout / "index.json").read_text())["manifests"][0]
    assert top["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert top["annotations"]["org.opencontainers.image.ref.name"] == "1.0.0"
    found = {}
    for entry in json.loads(blob(layout, top["digest"]))["manifests"]:
        manifest = json.loads(blob(layout, entry["digest"]))
        config = json.loads(blob(layout, manifest["config"]["digest"]))
        found[entry["platform"]["architecture"]] = {"entry": entry, "manifest": manifest, "config": config}
    return found


def layer_member(layout: Path, digest: str, path: str) -> bytes:
    with gzip.open(io.BytesIO(blob(layout, digest))) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
        for member in tar:
            if member.name == path:
                found = tar.extractfile(member)
                assert found is not None
                return found.read()
    raise AssertionError(f"{path} not in layer {digest}")


def test_one_index_lists_both_platforms_and_amd64_is_the_image_built_alone(two):
    both, images = two["both"], manifests(two)
    assert [e["entry"]["platform"] for e in images.values()] == [
        {"architecture": "amd64", "os": "linux"}, {"architecture": "arm64", "os": "linux"}]
    for arch, image in images.items():
        assert image["config"]["architecture"] == arch and image["config"]["os"] == "linux"
        assert both["platforms"][f"linux/{arch}"]["digest"] == image["entry"]["digest"]
    # the amd64 image is the single-platform build's, though the folder now also holds the arm64 lock
    assert (two["src"] / "requirements.linux-arm64.lock").is_file()
    assert images["amd64"]["entry"]["digest"] == two["alone"]["digest"]
    assert images["amd64"]["manifest"]["layers"][1:] != images["arm64"]["manifest"]["layers"][1:]
    labels = images["arm64"]["config"]["config"]["Labels"]
    assert labels["io.tooldock.base.platform"] == "aarch64-manylinux_2_36"
    assert json.loads(labels["io.tooldock.tools"]) == json.loads(
        images["amd64"]["config"]["config"]["Labels"]["io.tooldock.tools"])
    # each platform's SBOM and provenance name that platform's image
    layout = two["layout"]
    subjects = {}
    for entry in json.loads((layout / "index.json").read_text())["manifests"][1:]:
        artifact = json.loads(blob(layout, entry["digest"]))
        subjects.setdefault(artifact["subject"]["digest"], set()).add(entry["artifactType"])
    assert set(subjects) == {i["entry"]["digest"] for i in images.values()}
    assert all(len(kinds) == 2 for kinds in subjects.values())
    sbom = tooldock_cli("inspect", str(layout), "--platform", "linux/arm64", "--sbom").stdout
    assert "pkg:deb/debian/libc6@" in sbom and "?arch=arm64" in sbom and "?arch=amd64" not in sbom
    # the arm64 image's interpreter is an aarch64 ELF (e_machine 183)
    python = layer_member(layout, images["arm64"]["manifest"]["layers"][0]["digest"], "usr/bin/python3.11")
    assert python[:4] == b"\x7fELF" and int.from_bytes(python[18:20], "little") == 183


def test_pushed_index_is_read_by_skopeo_and_the_arm64_worker_answers_under_qemu(two, docker_host,
                                                                              arm64_emulation):
    import docker

    reference = f"{two['registry']}/multiplatform/{NS}:1.0.0"  # not test_supply_chain's repository
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{reference}"],
                         capture_output=True, check=True).stdout
    assert f"sha256:{hashlib.sha256(raw).hexdigest()}" == two["both"]["digest"] == two["both"]["pushed"]["digest"]
    assert [m["platform"]["architecture"] for m in json.loads(raw)["manifests"]] == ["amd64", "arm64"]

    client = docker.DockerClient(base_url=docker_host)
    loaded = client.images.get(f"tooldock/{NS}:1.0.0")  # --load: this machine's platform
    assert loaded.attrs["Architecture"] == "amd64"
    assert two["both"]["loaded_platform"] == "linux/amd64"

    image = client.images.pull(reference, platform="linux/arm64")
    assert image.attrs["Architecture"] == "arm64"
    sockets = Path(tempfile.mkdtemp(prefix="tdk-"))
    sockets.chmod(0o777)
    container = client.containers.run(image.id, detach=True, network_mode="none", platform="linux/arm64",
                                      volumes={str(sockets): {"bind": "/run/tooldock", "mode": "rw"}})
    try:
        machine = container.exec_run(["/usr/bin/python3.11", "-c", "import platform; print(platform.machine())"])
        sock = sockets / f"{NS}.sock"
        wait_for_socket(container, sock, 300)  # an emulated start takes tens of seconds on a loaded machine
        ready, ping, listed = _talk(sock)
    finally:
        container.remove(force=True)
        client.images.remove(image.id, force=True)
        shutil.rmtree(sockets, ignore_errors=True)
    assert machine.output.decode().strip() == "aarch64"
    assert ping["ok"] and ready["namespace"] == NS
    assert [t["name"] for t in listed["result"]["tools"]] == two["both"]["tools"]


def test_arm64_bytecode_is_what_the_arm64_interpreter_writes(two, tmp_path, arm64_emulation):
    """The image's pycs were compiled by this machine's (amd64) base interpreter; the arm64 interpreter, run
    under qemu with the builder's own compile command, writes the same bytes (stdlib and framework modules)."""
    from tooldock.builder.bytecode import rootfs_compiler

    layout, image = two["layout"], manifests(two)["arm64"]
    base, framework = (layer["digest"] for layer in image["manifest"]["layers"][:2])
    rootfs = tmp_path / "rootfs"
    with gzip.open(io.BytesIO(blob(layout, base))) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
        tar.extractall(rootfs, filter="tar")
    compiler = rootfs_compiler(rootfs, "/usr/bin/python3.11", "3.11", "arm64 under qemu")
    assert compiler is not None and "ld-linux-aarch64" in compiler.argv[0]
    checked = 0
    for where, layer in (("usr/lib/python3.11/json", base), ("opt/tooldock/framework/h11", framework)):
        tree = tmp_path / where.replace("/", "_")
        if layer == base:
            shutil.copytree(rootfs / where, tree, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            with gzip.open(io.BytesIO(blob(layout, layer))) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
                tar.extractall(tmp_path / "framework", filter="tar")
            shutil.copytree(tmp_path / "framework" / where, tree, ignore=shutil.ignore_patterns("__pycache__"))
        compiler.compile(tree, f"/{where}")
        source = rootfs if layer == base else tmp_path / "framework"
        for pyc in sorted(tree.rglob("*.pyc")):
            assert pyc.read_bytes() == (source / where / pyc.relative_to(tree)).read_bytes(), pyc
            checked += 1
    assert checked >= 10


def _x86_only_wheel(folder: Path) -> None:
    """A wheel of `tooldock-x86only-demo` for x86_64 only, and no source distribution."""
    name, tag = "tooldock_x86only_demo", "py3-none-manylinux_2_17_x86_64"
    files = {f"{name}/__init__.py": b"VALUE = 1\n",
             f"{name}-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tooldock-x86only-demo\nVersion: 1.0\n",
             f"{name}-1.0.dist-info/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{name}-1.0.dist-info/RECORD,,\n"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / f"{name}-1.0-{tag}.whl", "w") as wheel:
        for path, data in [*files.items(), (f"{name}-1.0.dist-info/RECORD", record.encode())]:
            wheel.writestr(path, data)


def test_uvs_no_wheel_answer_is_read_however_uv_wrapped_it():
    """uv wraps its message to the terminal's width: the package is named either way (a parallel run's
    narrower output once broke the match)."""
    from tooldock.builder.platforms import wheel_problem

    said = ("error: No solution found when resolving dependencies\n  cause: Because tooldock-x86only-demo==1.0 has"
            " no wheels with a matching\n         platform tag (e.g., `manylinux_2_36_aarch64`) and you require")
    for text in (said, " ".join(said.split())):
        assert "'tooldock-x86only-demo' has no wheel for linux/arm64" in (wheel_problem(text, "aarch64-manylinux_2_36",
                                                                                        "x") or "")
    assert wheel_problem("error: something else entirely", "aarch64-manylinux_2_36", "x") is None


def test_a_requirement_without_an_arm64_wheel_is_refused_with_its_name(two, tmp_path):
    _x86_only_wheel(tmp_path / "wheels")
    folder = tmp_path / "x86-only"
    shutil.copytree(EXAMPLES / "basic-tool", folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "requirements.txt").write_text(f"--no-index\n--find-links {tmp_path / 'wheels'}\n"
                                             "tooldock-x86only-demo==1.0\n")
    proc = tooldock_cli("build", str(folder), "--output", str(tmp_path / "oci"),
                        "--platform", "linux/amd64,linux/arm64", check=False)
    assert proc.returncode == 1, proc.stderr
    assert "'tooldock-x86only-demo' has no wheel for linux/arm64 (aarch64-manylinux_2_36)" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "oci" / "x86-only").exists()
    tar = tooldock_cli("build", str(folder), "--platform", "linux/amd64,linux/arm64", "--tar", str(tmp_path / "x.tar"),
                       check=False)
    assert tar.returncode == 2 and "--tar writes one image" in tar.stderr, tar.stderr
