"""The parallel run's grouping (tests/parallelkit.py), run for real: pytest-xdist with 3 workers over a small
suite of its own whose conftest hooks are the suite's, and a `docker_host` fixture that only records."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFTEST = f"""import os, sys
sys.path.insert(0, {str(HERE)!r})
import parallelkit, pytest
parallelkit.SECONDS.update({{"test_long": 100.0}})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return parallelkit.make_scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    parallelkit.sort(config, items)


@pytest.fixture(scope="session")
def docker_host():
    return "unix:///nowhere"


@pytest.fixture
def engine(docker_host):
    return docker_host


@pytest.fixture(autouse=True)
def record(request):
    yield
    with open(os.environ["RECORD"], "a") as out:
        out.write(request.node.nodeid + " " + os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
"""
FILES = {
    "test_direct.py": "def test_a(docker_host):\n    pass\n\n\ndef test_b():\n    pass\n",
    "test_through.py": "def test_a(engine):\n    pass\n",
    "test_long.py": "import time\n\n\ndef test_a():\n    time.sleep(1)\n",
    **{f"test_plain{n}.py": "".join(f"def test_{i}():\n    pass\n\n\n" for i in range(6)) for n in range(4)},
}


def run(tmp_path: Path, *args: str) -> list[tuple[str, str]]:
    for name, text in {"conftest.py": CONFTEST, **FILES}.items():
        (tmp_path / name).write_text(text)
    record = tmp_path / "record"
    record.write_text("")
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}  # ours, if xdist's
    env.update(RECORD=str(record), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # xdist only (-p): starts in a second
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, str(tmp_path)]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [tuple(line.split()) for line in record.read_text().splitlines()]  # type: ignore[misc]


def test_files_stay_whole_the_docker_files_share_a_worker_and_the_longest_starts_first(tmp_path: Path) -> None:
    ran = run(tmp_path, "-p", "xdist.plugin", "-n", "3")
    assert len(ran) == 2 + 1 + 1 + 4 * 6
    workers: dict[str, set[str]] = {}
    for nodeid, worker in ran:
        workers.setdefault(nodeid.split("::")[0], set()).add(worker)
    assert all(len(found) == 1 for found in workers.values()), workers  # every file on one worker
    assert workers["test_direct.py"] == workers["test_through.py"]  # docker_host directly or through a fixture
    assert len({w for found in workers.values() for w in found}) > 1  # and the run did spread
    long_worker = next(iter(workers["test_long.py"]))
    assert next(nodeid for nodeid, worker in ran if worker == long_worker) == "test_long.py::test_a"


def test_without_workers_nothing_changes(tmp_path: Path) -> None:
    assert {worker for _, worker in run(tmp_path, "-p", "xdist.plugin", "-n", "0")} == {"main"}
    assert {worker for _, worker in run(tmp_path)} == {"main"}  # xdist not loaded: its hook is optional
