"""`tooldock secrets` (the click group in tooldock.cli.secrets): values only from stdin or a hidden prompt,
status only in every answer (set / placeholder / missing, never a value), errors as CLI messages, and the
edit flow with a scripted $EDITOR. Driven in-process with CliRunner, and through real processes (stdin, a
pseudo-terminal, two concurrent writers). Values here are dummies."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from conftest import scripted_editor

from tooldock.cli.secrets import secrets
from tooldock.secrets import SecretStore
from tooldock.secrets.keys import create_identity

ENTRY = "from tooldock.cli.secrets import secrets; secrets(prog_name='tooldock secrets')"
DUMMY = "dummy-secret-4b1f0c7e"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key"),
            "SOPS_AGE_KEY_FILE": "", "TOOLDOCK_TOOLS_DIR": str(tmp_path / "tools")}


def run(env: dict[str, str], *args: str, input: str | None = None, ok: bool = True) -> Result:
    result = CliRunner().invoke(secrets, list(args), input=input, env=env, catch_exceptions=False)
    assert (result.exit_code == 0) == ok, f"{args}: exit {result.exit_code}\n{result.stderr}"
    return result


@pytest.fixture
def initialized(env: dict[str, str]) -> dict[str, str]:
    run(env, "init")
    return env


def store_of(env: dict[str, str]) -> SecretStore:
    return SecretStore(Path(env["TOOLDOCK_SECRETS_DIR"]), Path(env["TOOLDOCK_AGE_KEY_FILE"]))


def namespace_dir(env: dict[str, str], name: str, secrets_: list[str]) -> Path:
    folder = Path(env["TOOLDOCK_TOOLS_DIR"]) / name
    folder.mkdir(parents=True)
    (folder / "tooldock.yaml").write_text(yaml.safe_dump({"secrets": secrets_}))
    (folder / "tools.py").write_text("from fastmcp.tools import tool\n\n@tool\ndef ping() -> str:\n    return 'pong'\n")
    return folder


def test_init_makes_a_private_key_prints_its_recipient_and_reuses_it(env):
    first = run(env, "init")
    recipient = first.stdout.strip()
    assert recipient.startswith("age1") and env["TOOLDOCK_AGE_KEY_FILE"] in first.stderr
    key = Path(env["TOOLDOCK_AGE_KEY_FILE"])
    assert oct(key.stat().st_mode & 0o777) == "0o600" and "AGE-SECRET-KEY-1" in key.read_text()
    assert run(env, "init").stdout.strip() == recipient
    assert json.loads(run(env, "recipients", "list", "--json").stdout) == [recipient]


def test_set_reads_stdin_and_every_answer_is_status_only(initialized):
    env = initialized
    namespace_dir(env, "weather", ["API_KEY", "LATER", "ABSENT"])
    result = run(env, "set", "API_KEY", "--namespace", "weather", input=DUMMY + "\n")
    assert DUMMY not in result.stdout + result.stderr
    run(env, "set", "SHARED", input="two\nlines\n\n")
    run(env, "prepare", "LATER")
    assert store_of(env).load_all() == {
        "global": {"SHARED": "two\nlines\n"}, "namespaces": {"weather": {"API_KEY": DUMMY}}}
    listed = run(env, "list", "--json")
    assert json.loads(listed.stdout) == [
        {"key": "SHARED", "scope": "global", "status": "set"},
        {"key": "LATER", "scope": "global", "status": "placeholder"},
        {"key": "API_KEY", "scope": "weather", "status": "set"},
        {"key": "ABSENT", "scope": "weather", "status": "missing"},
    ]
    table = run(env, "list").stdout
    assert "placeholder" in table and "missing" in table and DUMMY not in table and "lines" not in table
    assert [r["key"] for r in json.loads(run(env, "list", "--namespace", "weather", "--json").stdout)] == [
        "API_KEY", "ABSENT"]
    checked = json.loads(run(env, "check", str(Path(env["TOOLDOCK_TOOLS_DIR"]) / "weather"), "--json").stdout)
    assert {k: v for k, v in checked.items() if k != "next_steps"} == {
        "namespace": "weather", "satisfied": ["API_KEY"], "missing": ["ABSENT"], "placeholders": ["LATER"],
        "undeclared": []}
    assert checked["next_steps"] and "ABSENT" in checked["next_steps"][0]
    text = run(env, "check", str(Path(env["TOOLDOCK_TOOLS_DIR"]) / "weather"), ok=False)
    assert "missing: ABSENT" in text.stdout and DUMMY not in text.stdout + text.stderr
    for path in Path(env["TOOLDOCK_SECRETS_DIR"]).iterdir():
        assert DUMMY not in path.read_text(errors="replace"), path


def test_remove_and_prepare(initialized):
    env = initialized
    run(env, "set", "K", input="v-0001")
    assert "already set" in run(env, "prepare", "K").stderr
    run(env, "remove", "K")
    assert store_of(env).load_all()["global"] == {} and json.loads(run(env, "list", "--json").stdout) == []
    assert "not in the store" in run(env, "remove", "K", ok=False).stderr


@pytest.mark.parametrize("args, stdin, message", [
    (("set", "K"), "", "empty"),
    (("set", "K"), "\n", "empty"),
    (("set", "bad-name"), "v", "not a valid secret name"),
    (("set", "TOKEN_unencrypted"), "v", "unencrypted"),
    (("set", "K", "--namespace", "Bad_NS"), "v", "namespace name"),
    (("recipients", "add", "age1nope"), None, "not an age recipient"),
])
def test_bad_input_is_a_cli_message(initialized, args, stdin, message):
    result = run(initialized, *args, input=stdin, ok=False)
    assert result.exit_code == 1 and message in result.stderr and "Traceback" not in result.stderr


def test_writes_before_init_say_to_run_init_and_reads_are_empty(env):
    assert "tooldock secrets init" in run(env, "set", "K", input="v", ok=False).stderr
    assert json.loads(run(env, "list", "--json").stdout) == []
    assert json.loads(run(env, "recipients", "list", "--json").stdout) == []
    table = run(env, "list")  # nothing on stdout; on stderr, why
    assert table.stdout == "" and "there is no store yet (tooldock secrets init makes it)" in table.stderr


def test_an_empty_store_lists_nothing_and_says_so(initialized):
    table = run(initialized, "list")
    assert table.stdout == "" and table.stderr.startswith("tooldock: no secrets in ") and "no store" not in table.stderr


def test_a_key_that_does_not_open_the_store_is_named(initialized, tmp_path):
    run(initialized, "set", "K", input=DUMMY)
    create_identity(tmp_path / "other.key")
    result = run({**initialized, "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "other.key")}, "set", "L", input="x",
                 ok=False)
    assert str(tmp_path / "other.key") in result.stderr and "age1" in result.stderr and DUMMY not in result.stderr
    absent = run({**initialized, "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "absent.key")}, "set", "L", input="x",
                 ok=False)
    recipient = json.loads(run(initialized, "recipients", "list", "--json").stdout)[0]
    assert str(tmp_path / "absent.key") in absent.stderr and recipient in absent.stderr


def test_recipients_and_rotate(initialized, tmp_path):
    env = initialized
    run(env, "set", "K", input=DUMMY)
    teammate = create_identity(tmp_path / "teammate.key")
    run(env, "recipients", "add", teammate)
    assert "already" in run(env, "recipients", "add", teammate).stderr
    assert json.loads(run(env, "recipients", "list", "--json").stdout)[1] == teammate
    before = store_of(env).enc.read_text()
    run(env, "rotate")
    assert store_of(env).enc.read_text() != before
    assert SecretStore(store_of(env).directory, tmp_path / "teammate.key").load_all()["global"] == {"K": DUMMY}


def test_edit_through_the_cli(initialized, tmp_path):
    env = initialized
    run(env, "set", "KEEP", input="keep-0002")
    editor = scripted_editor(tmp_path, "import yaml\ndata = yaml.safe_load(path.read_text())\n"
                               "data['global']['ADDED'] = 'added-0003'\npath.write_text(yaml.safe_dump(data))")
    result = run({**env, "EDITOR": editor, "VISUAL": ""}, "edit")
    assert "saved 2 global" in result.stderr and "keep-0002" not in result.stdout + result.stderr
    seen = Path((tmp_path / "seen").read_text())
    assert not seen.exists()
    if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        assert seen.parent == Path("/dev/shm")  # the plaintext lived on tmpfs
    assert store_of(env).load_all()["global"] == {"KEEP": "keep-0002", "ADDED": "added-0003"}
    assert {"key": "ADDED", "scope": "global", "status": "set"} in json.loads(run(env, "list", "--json").stdout)
    before = store_of(env).enc.read_bytes()
    assert "no change" in run({**env, "EDITOR": scripted_editor(tmp_path, "pass"), "VISUAL": ""}, "edit").stderr
    assert store_of(env).enc.read_bytes() == before
    failed = run({**env, "EDITOR": scripted_editor(tmp_path, "path.write_text('global: {K: 5}')"), "VISUAL": ""}, "edit",
                 ok=False)
    assert "global.K must be a string" in failed.stderr
    assert store_of(env).enc.read_bytes() == before and not Path((tmp_path / "seen").read_text()).exists()


# -- real processes --------------------------------------------------------------------------------------

def _cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ENTRY, *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_set_from_stdin_in_a_real_process(initialized):
    proc = _cli(initialized, "set", "PIPED", "--namespace", "ci", stdin=DUMMY + "\n")
    assert proc.returncode == 0, proc.stderr
    assert DUMMY not in proc.stdout + proc.stderr
    assert store_of(initialized).load_all()["namespaces"] == {"ci": {"PIPED": DUMMY}}


def test_two_concurrent_cli_writers_both_land(initialized):
    procs = [subprocess.Popen([sys.executable, "-c", ENTRY, "set", f"KEY_{i}"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **initialized})
             for i in range(4)]
    for i, proc in enumerate(procs):
        proc.communicate(f"value-{i}".encode(), timeout=120)
        assert proc.returncode == 0
    assert store_of(initialized).load_all()["global"] == {f"KEY_{i}": f"value-{i}" for i in range(4)}


def _read_until(fd: int, wanted: bytes, seen: bytearray, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        assert time.monotonic() < deadline, f"no {wanted!r} on the terminal: {bytes(seen)!r}"
        if select.select([fd], [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 1024)
            except OSError:  # the child closed the terminal
                return


def test_on_a_terminal_the_value_is_prompted_twice_and_never_echoed(initialized):
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
        os.environ.update(initialized)
        os.execv(sys.executable, [sys.executable, "-c", ENTRY, "set", "TYPED"])
    seen = bytearray()
    _read_until(fd, b"Value for TYPED", seen)
    os.write(fd, DUMMY.encode() + b"\n")
    _read_until(fd, b"confirmation", seen)
    os.write(fd, DUMMY.encode() + b"\n")
    _read_until(fd, b"TYPED set", seen)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, bytes(seen)
    assert DUMMY.encode() not in seen
    assert store_of(initialized).load_all()["global"] == {"TYPED": DUMMY}
