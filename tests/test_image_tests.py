"""`tooldock test --image`: a namespace's own tests run in its image (built by ToolDock, loaded into the test
engine), against it served from its worker container by `serve --backend docker`: a namespace `tooldock new`
made passes, inside a hardened container of its image; a failing test (or a namespace that does not build)
exits 1 and the others still run; tests/ is not in the image; nothing is left behind, Ctrl-C too; a run's
containers are seen by its own gateway only."""

from __future__ import annotations

import glob
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import BUILD_CACHE, STATE_DIR, TOOLDOCK, tooldock_cli

# Checked from inside the tests' container: it is the image (its tool file, its user), read-only, with no
# capabilities and no network but its loopback, and the namespace is served from its worker container.
WHERE = '''
import os, socket, pytest

def test_it_runs_in_the_image_hardened():
    import tools
    assert tools.__file__ == "/app/tools.py" and os.path.isfile("/app/tests/test_where.py")
    assert os.getuid() == 65532 and os.getgid() == 65532
    with pytest.raises(OSError):
        open("/app/written", "w")
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    assert int(status["CapEff"].strip(), 16) == 0 and status["NoNewPrivs"].strip() == "1"
    with pytest.raises(OSError), socket.create_connection(("10.255.255.1", 80), timeout=2):
        pass

def test_the_tool_is_served_from_its_container(mcp_client):
    assert [t.name for t in mcp_client.list_tools()] == ["greet"]
'''
TAG = re.compile(r"greeter: image (tooldock/greeter:sha256-[0-9a-f]{64})")


def run_image_tests(docker_host: str, *folders: Path, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {"DOCKER_HOST": docker_host, "TOOLDOCK_STATE_DIR": str(STATE_DIR)}
    return tooldock_cli("test", *map(str, folders), "--image", env=env, check=check)


def leftovers(docker_host: str) -> list[str]:
    import docker

    client = docker.DockerClient(base_url=docker_host)
    return [c.name for c in client.containers.list(all=True, filters={"label": "io.tooldock.scope"})]


@pytest.fixture(scope="module")
def greeter(docker_host, tmp_path_factory):
    root = tmp_path_factory.mktemp("image-tests")
    tooldock_cli("new", str(root / "greeter"))
    (root / "greeter" / "tests" / "test_where.py").write_text(WHERE)
    sockets_before = set(glob.glob("/tmp/tdt-*"))
    proc = run_image_tests(docker_host, root / "greeter")
    return SimpleNamespace(folder=root / "greeter", proc=proc, sockets_before=sockets_before)


def test_a_made_namespace_passes_in_its_image_served_from_its_container(greeter, docker_host):
    proc = greeter.proc
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed in " in proc.stdout and "rootdir: /app" in proc.stdout, proc.stdout
    assert "1 of 1 namespace(s) passed" in proc.stderr and TAG.search(proc.stderr), proc.stderr


def test_nothing_is_left_behind(greeter, docker_host):
    assert greeter.proc.returncode == 0
    assert leftovers(docker_host) == []
    assert set(glob.glob("/tmp/tdt-*")) <= greeter.sockets_before


def test_the_tests_folder_is_not_in_the_image(greeter, docker_host):
    import docker

    tag = TAG.search(greeter.proc.stderr).group(1)
    client = docker.DockerClient(base_url=docker_host)
    container = client.containers.create(tag)
    try:
        stream, _ = container.get_archive("/app")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            names = archive.getnames()
    finally:
        container.remove(force=True)
    assert "app/tools.py" in names and not any(n.startswith("app/tests") for n in names), names


def test_a_failing_test_or_a_broken_namespace_exits_1_and_the_others_run(greeter, docker_host, tmp_path):
    broken = tmp_path / "greeter"
    shutil.copytree(greeter.folder, broken)
    test_file = broken / "tests" / "test_tools.py"
    test_file.write_text(test_file.read_text().replace('"Hello, Ada!"', '"Goodbye, Ada!"'))
    tooldock_cli("new", str(tmp_path / "unbuilt"))
    (tmp_path / "unbuilt" / "tools.py").write_text("def broken(:\n")
    proc = run_image_tests(docker_host, tmp_path / "unbuilt", broken)
    assert proc.returncode == 1 and "1 failed, 3 passed" in proc.stdout, proc.stdout + proc.stderr
    assert "unbuilt: its image did not build" in proc.stderr, proc.stderr
    assert "0 of 2 namespace(s) passed; failed: unbuilt, greeter" in proc.stderr
    # an edit to the tests is not an edit to the image: the same image, by digest
    assert TAG.search(proc.stderr).group(1) == TAG.search(greeter.proc.stderr).group(1)
    assert leftovers(docker_host) == []


def test_ctrl_c_removes_everything(greeter, docker_host, tmp_path):
    slow = tmp_path / "greeter"
    shutil.copytree(greeter.folder, slow)
    (slow / "tests" / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(120)\n")
    env = {**os.environ, "DOCKER_HOST": docker_host, "TOOLDOCK_STATE_DIR": str(STATE_DIR),
           "TOOLDOCK_CACHE_DIR": str(BUILD_CACHE)}
    log = tmp_path / "out"
    with log.open("wb") as out:
        proc = subprocess.Popen([TOOLDOCK, "test", str(slow), "--image"], stdout=out, stderr=out, env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while b"collected 5 items" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert len(leftovers(docker_host)) == 2  # the worker and the tests' container
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        assert proc.wait(60) == 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert leftovers(docker_host) == []
    assert "Aborted!" in log.read_text()


def test_a_runs_containers_are_seen_by_its_own_gateway_only(monkeypatch):
    from tooldock.runtime.backends.containers import SCOPE_ENV, worker_containers

    deployed = SimpleNamespace(name="deployed", labels={"io.tooldock.namespace": "greeter"})
    tested = SimpleNamespace(name="tested", labels={"io.tooldock.namespace": "greeter", "io.tooldock.scope": "t-1"})
    client = SimpleNamespace(containers=SimpleNamespace(list=lambda **_: [deployed, tested]))
    monkeypatch.delenv(SCOPE_ENV, raising=False)
    assert [c.name for c in worker_containers(client)] == ["deployed"]
    monkeypatch.setenv(SCOPE_ENV, "t-1")
    assert [c.name for c in worker_containers(client)] == ["tested"]


def test_an_image_with_an_older_python_is_a_clear_failure():
    from tooldock.cli.imagetests import Failed, check_python
    from tooldock.cli.runtests import test_packages

    major, minor = sys.version_info[:2]
    older = f"{major}.{minor - 1}"
    image = SimpleNamespace(labels={"io.tooldock.base.python": older, "io.tooldock.base.python-bin": "/usr/bin/py"})
    with pytest.raises(Failed, match=rf"Python {re.escape(older)}, older than ToolDock's"):
        check_python(image, test_packages())
    image.labels["io.tooldock.base.python"] = f"{major}.{minor}"
    assert check_python(image, test_packages()) == "/usr/bin/py"
