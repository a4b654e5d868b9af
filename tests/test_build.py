"""`tooldock build` end to end: real uv locks, real Debian packages for the base, skopeo and umoci as
independent readers of what we write, and the image's worker run from its unpacked root filesystem."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

import pytest
from conftest import BUILD_CACHE, EXAMPLES, FIXTURES, require, tooldock_cli, unix_connect


def build_json(*args: str, env: dict[str, str] | None = None) -> list[dict]:
    proc = tooldock_cli("build", "--json", *args, env=env)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """multi-tool and async-tool built once into an OCI layout directory, plus a tar of multi-tool."""
    require("apt-get", "dpkg-deb")
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "src"
    shutil.copytree(EXAMPLES, src, ignore=shutil.ignore_patterns("__pycache__", "requirements.lock", "README.md"))
    results = build_json(str(src / "multi-tool"), str(src / "async-tool"), "--output", str(tmp / "oci"),
                         "--tar", str(tmp / "{namespace}.tar"))
    return {"tmp": tmp, "src": src, "results": {r["namespace"]: r for r in results}}


def test_result_json_describes_the_image(built):
    multi = built["results"]["multi-tool"]
    assert multi["digest"].startswith("sha256:") and multi["ref"] == "latest"
    assert multi["tools"] == ["add", "multiply", "reverse_text", "word_count"]
    assert [layer["name"] for layer in multi["layers"]] == ["base", "framework", "app"]
    weather = built["results"]["async-tool"]
    assert [layer["name"] for layer in weather["layers"]] == ["base", "framework", "deps", "app"]
    assert weather["ref"] == "1.0.0"
    # The framework layer is shared by every namespace built with this ToolDock version.
    assert multi["layers"][1]["digest"] == weather["layers"][1]["digest"]


def test_lock_is_written_next_to_the_namespace_and_reused(built):
    lock = built["src"] / "async-tool" / "requirements.lock"
    text = lock.read_text()
    assert text.startswith("# tooldock-lock: ") and "httpx==" in text and "--hash=sha256:" in text
    assert not (built["src"] / "multi-tool" / "requirements.lock").exists()
    stamp = lock.stat().st_mtime_ns
    again = build_json(str(built["src"] / "async-tool"), "--output", str(built["tmp"] / "oci"))[0]
    assert lock.stat().st_mtime_ns == stamp
    assert again["digest"] == built["results"]["async-tool"]["digest"]
    assert all(layer["cached"] for layer in again["layers"])


def test_skopeo_reads_the_layout_and_its_labels(built):
    """The layout also lists the image's SBOM and provenance (OCI 1.1 referrers): skopeo picks the image by its
    ref name."""
    require("skopeo")
    layout = built["tmp"] / "oci" / "multi-tool"
    info = json.loads(subprocess.run(["skopeo", "inspect", f"oci:{layout}:latest"], capture_output=True, text=True, check=True).stdout)
    assert info["Digest"] == built["results"]["multi-tool"]["digest"]
    labels = info["Labels"]
    assert labels["io.tooldock.namespace"] == "multi-tool"
    assert labels["io.tooldock.protocol"] == "2"
    tools = json.loads(labels["io.tooldock.tools"])
    assert [t["name"] for t in tools] == ["add", "multiply", "reverse_text", "word_count"]
    assert tools[0]["inputSchema"]["properties"]["a"]["type"] == "number"
    weather = json.loads(subprocess.run(["skopeo", "inspect", f"oci:{built['tmp'] / 'oci' / 'async-tool'}:1.0.0"],
                                        capture_output=True, text=True, check=True).stdout)
    assert json.loads(weather["Labels"]["io.tooldock.secrets"]) == ["WEATHER_API_KEY"]


def test_tar_is_both_an_oci_archive_and_a_docker_archive(built):
    require("skopeo")
    tar = built["tmp"] / "multi-tool.tar"
    assert stat.S_IMODE(tar.stat().st_mode) == 0o644  # readable by whoever loads it, as the layout's files
    assert not [p.name for p in built["tmp"].iterdir() if p.name.startswith(".")]  # no temporary file left
    with tarfile.open(tar) as archive:
        names = set(archive.getnames())
        manifest = json.load(archive.extractfile("manifest.json"))
    assert {"oci-layout", "index.json", "manifest.json"} <= names
    assert manifest[0]["RepoTags"] == ["tooldock/multi-tool:latest"]
    for transport in ("oci-archive", "docker-archive"):
        info = json.loads(subprocess.run(["skopeo", "inspect", f"{transport}:{tar}"], capture_output=True, text=True,
                                         check=True).stdout)
        assert info["Labels"]["io.tooldock.namespace"] == "multi-tool", transport
    oci = json.loads(subprocess.run(["skopeo", "inspect", f"oci-archive:{tar}"], capture_output=True, text=True,
                                    check=True).stdout)
    assert oci["Digest"] == built["results"]["multi-tool"]["digest"]


def test_same_inputs_from_another_directory_with_other_mtimes_give_the_same_digest(built, tmp_path):
    other = tmp_path / "deep" / "copy" / "multi-tool"
    shutil.copytree(built["src"] / "multi-tool", other)
    for path in other.rglob("*"):
        os.utime(path, (1_500_000_000, 1_500_000_000))
    again = build_json(str(other), "--output", str(tmp_path / "out"))[0]
    assert again["digest"] == built["results"]["multi-tool"]["digest"]
    later = build_json(str(other), "--output", str(tmp_path / "out2"), env={"SOURCE_DATE_EPOCH": "1700000000"})[0]
    assert later["digest"] != again["digest"]  # the epoch is an input: created dates change


def test_a_fresh_build_cache_gives_the_same_image_bytecode_included(built, tmp_path):
    """The base (its standard library compiled by its own python) and the framework layer (compiled the
    same way) are rebuilt from scratch in another cache, at other paths: the same digests."""
    cache = tmp_path / "fresh-cache"
    shutil.copytree(BUILD_CACHE / "debs", cache / "debs")  # the pinned .deb files `built` fetched, not downloaded again
    again = build_json(str(built["src"] / "multi-tool"), "--output", str(tmp_path / "out"),
                       env={"TOOLDOCK_CACHE_DIR": str(cache)})[0]
    assert (cache / "base").is_dir() and any((cache / "trees").glob("framework-*"))
    assert [layer["digest"] for layer in again["layers"]] == [
        layer["digest"] for layer in built["results"]["multi-tool"]["layers"]
    ]
    assert again["digest"] == built["results"]["multi-tool"]["digest"]
    scripts = [s for tree in (cache / "trees").glob("framework-*") for s in (tree / "bin").glob("*")]
    assert scripts, "the framework lock has console scripts (uvicorn, fastmcp...)"
    for script in scripts:  # the image's Python, not the build host's (which made digests depend on the host)
        head = script.read_bytes().split(b"\n", 1)[0]
        assert not head.startswith(b"#!") or head == b"#!/usr/bin/env python3" or b"python" not in head, script


def test_editing_one_tool_file_rebuilds_only_the_app_layer(built, tmp_path):
    src = tmp_path / "multi-tool"
    shutil.copytree(built["src"] / "multi-tool", src)
    first = build_json(str(src), "--output", str(tmp_path / "o"))[0]
    math = src / "math_tools.py"
    # A unique edit: the build cache outlives test runs, and a seen-before app layer would be a cache hit.
    math.write_text(math.read_text().replace("return a + b", f"return b + a  # {uuid.uuid4()}"))
    second = build_json(str(src), "--output", str(tmp_path / "o"))[0]
    assert second["digest"] != first["digest"]
    cached = {layer["name"]: layer["cached"] for layer in second["layers"]}
    assert cached == {"base": True, "framework": True, "app": False}
    assert [l["digest"] for l in second["layers"][:2]] == [l["digest"] for l in first["layers"][:2]]


def test_schema_zygote_and_plain_extraction_agree(built, tmp_path):
    from conftest import BUILD_CACHE

    src = tmp_path / "multi-tool"
    shutil.copytree(built["src"] / "multi-tool", src)
    (src / "extra_tools.py").write_text(
        "from fastmcp.tools import tool\n\n@tool\ndef shout(text: str, times: int = 1) -> str:\n"
        f"    \"\"\"Shout {uuid.uuid4()}.\"\"\"\n    return text.upper() * times\n"
    )
    fast = build_json(str(src), "--output", str(tmp_path / "a"))[0]
    shutil.rmtree(BUILD_CACHE / "schemas")
    plain = build_json(str(src), "--output", str(tmp_path / "b"), env={"TOOLDOCK_SCHEMA_ZYGOTE": "0"})[0]
    assert fast["digest"] == plain["digest"]
    assert "shout" in fast["tools"]


def _worker_handshake(sock_path: Path) -> tuple[dict, dict, dict]:
    client = unix_connect(sock_path)
    stream = client.makefile("rwb")
    ready = json.loads(stream.readline())
    stream.write(b'{"id":"1","op":"ping"}\n{"id":"2","op":"tools.list"}\n'
                 b'{"id":"3","op":"tools.call","tool":"add","arguments":{"a":2,"b":3}}\n')
    stream.flush()
    replies = {r["id"]: r for r in (json.loads(stream.readline()) for _ in range(3))}
    client.close()
    return ready, replies["2"], {"ping": replies["1"], "add": replies["3"]}


def test_unpacked_image_runs_its_worker_with_no_arguments(built, tmp_path):
    """umoci unpacks the image; its entrypoint runs in a chroot as the image's non-root user, with the
    image's environment, and serves /run/tooldock/multi-tool.sock with the tools of tools.json."""
    require("umoci", "chroot", root=True)
    bundle = tmp_path / "bundle"
    subprocess.run(["umoci", "unpack", "--image", f"{built['tmp'] / 'oci' / 'multi-tool'}:latest", str(bundle)],
                   check=True, capture_output=True)
    rootfs = bundle / "rootfs"
    config = json.loads((bundle / "config.json").read_text())
    assert config["process"]["user"]["uid"] == 65532
    # bytecode only where ToolDock compiled it (the standard library, the framework), hash-based and unchecked
    pycs = [p.relative_to(rootfs).as_posix() for p in rootfs.rglob("*.pyc")]
    assert pycs and all(p.startswith(("usr/lib/python3.11/", "opt/tooldock/framework/")) for p in pycs), pycs[:5]
    assert {int.from_bytes((rootfs / p).read_bytes()[4:8], "little") for p in pycs} == {1}
    tools_json = json.loads((rootfs / "app" / "tools.json").read_text())
    os.chown(rootfs / "run" / "tooldock", 65532, 65532)  # what the gateway's mounted directory provides
    env = dict(item.split("=", 1) for item in config["process"]["env"])
    proc = subprocess.Popen(["chroot", "--userspec=65532:65532", str(rootfs), *config["process"]["args"]],
                            env=env, cwd="/", stderr=subprocess.PIPE)
    sock = rootfs / "run" / "tooldock" / "multi-tool.sock"
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        ready, listed, calls = _worker_handshake(sock)
    finally:
        proc.terminate()
        proc.wait(10)
    assert ready["namespace"] == "multi-tool" and ready["tools"] == tools_json
    assert listed["result"]["tools"] == tools_json
    assert calls["ping"]["ok"] and calls["add"]["result"]["structuredContent"] == {"result": 5.0}


def test_bad_inputs_fail_clearly_and_leave_nothing_half_written(built, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(FIXTURES / "tools" / "broken-file", src / "broken-file")
    shutil.copytree(built["src"] / "multi-tool", src / "multi-tool")
    (src / "needs-missing").mkdir()
    shutil.copy(FIXTURES / "tools" / "broken-file" / "good.py", src / "needs-missing")
    (src / "needs-missing" / "requirements.txt").write_text("tooldock-no-such-package-xyz==1.0\n")
    out = tmp_path / "out"
    proc = tooldock_cli("build", str(tmp_path / "nope"), str(src / "broken-file"), str(src / "needs-missing"),
                        str(src / "multi-tool"), "--output", str(out), check=False)
    assert proc.returncode == 1
    assert "no such directory" in proc.stderr
    assert "bad_syntax.py:5: syntax error" in proc.stderr
    assert "tooldock-no-such-package-xyz" in proc.stderr
    assert "3 of 4 image(s) failed" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["multi-tool"]  # the good one is built, nothing else
    bad_base = tooldock_cli("build", str(src / "multi-tool"), "--base", str(tmp_path / "no-such-base"),
                            "--output", str(tmp_path / "out2"), check=False)
    assert bad_base.returncode == 1 and "no such OCI layout" in bad_base.stderr
    assert not (tmp_path / "out2").exists()


DOCS = '''from fastmcp.prompts import prompt
from fastmcp.resources import resource
from fastmcp.tools import tool


@tool
def count(text: str) -> int:
    """Words in a text."""
    return len(text.split())


@resource("docs://readme")
def readme() -> str:
    """The read-me."""
    return "read me"


@resource("docs://pages/{page}")
def page(page: str) -> str:
    """One page."""
    return page


@prompt
def summarize(text: str) -> str:
    """Ask for a summary."""
    return f"Summarize: {text}"
'''


def test_resources_and_prompts_are_in_a_label_and_a_namespace_without_them_gets_none(built, tmp_path):
    """`io.tooldock.surface` lists them, so a gateway lists them before the worker container connects (as
    it lists the tools from `io.tooldock.tools`); namespaces without any keep their labels as they were."""
    require("skopeo")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "docs.py").write_text(DOCS)
    build_json(str(tmp_path / "docs"), "--output", str(tmp_path / "oci"))
    info = json.loads(subprocess.run(["skopeo", "inspect", f"oci:{tmp_path / 'oci' / 'docs'}:latest"],
                                     capture_output=True, text=True, check=True).stdout)
    surface = json.loads(info["Labels"]["io.tooldock.surface"])
    assert [r["uri"] for r in surface["resources"]] == ["docs://readme"]
    assert [t["uriTemplate"] for t in surface["resourceTemplates"]] == ["docs://pages/{page}"]
    assert [p["name"] for p in surface["prompts"]] == ["summarize"]
    assert surface["prompts"][0]["arguments"][0]["name"] == "text"
    multi = json.loads(subprocess.run(["skopeo", "inspect", f"oci:{built['tmp'] / 'oci' / 'multi-tool'}:latest"],
                                      capture_output=True, text=True, check=True).stdout)
    assert "io.tooldock.surface" not in multi["Labels"]
