"""Secrets reach workers (process backend): only the names a namespace declares, namespace scope over
global, masked everywhere, and a change restarts only the namespaces whose values changed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, TOOLDOCK, Gateway, run_mcp, tooldock_cli

VAULT_TOKEN = "vault-token-7f3a9c1e5b"  # test values: distinctive, so a grep for them cannot match by chance
SHARED_KEY = "shared-key-d41e88a0c2"
OTHER_TOKEN = "other-token-93b7e2f105"
MANAGER = "manager-token-0123456789"


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    env = {"TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key")}
    tooldock_cli("secrets", "init", env=env)
    return env


def secrets_set(env: dict[str, str], key: str, value: str, namespace: str | None = None) -> None:
    import subprocess

    args = [TOOLDOCK, "secrets", "set", key, *(["--namespace", namespace] if namespace else [])]
    proc = subprocess.run(args, input=value + "\n", capture_output=True, text=True, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr
    assert value not in proc.stdout + proc.stderr


@pytest.fixture
def secret_gateway(make_gateway, store) -> Gateway:
    secrets_set(store, "VAULT_TOKEN", VAULT_TOKEN, "vault")
    secrets_set(store, "SHARED_KEY", SHARED_KEY)  # global scope
    secrets_set(store, "OTHER_TOKEN", OTHER_TOKEN)  # set, but declared by nobody
    tooldock_cli("secrets", "prepare", "NEEDY_KEY", "--namespace", "needy", env=store)
    return make_gateway(FIXTURES / "secrets", env={**store, "MANAGER_INTERNAL_TOKEN": MANAGER})


def reload(gateway: Gateway) -> dict:
    response = gateway.post("/reload", headers={"X-Manager-Token": MANAGER})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_worker_gets_only_the_secrets_its_namespace_declares(secret_gateway):
    gw = secret_gateway
    assert gw.call("vault", "token_hash").json()["result"] == sha(VAULT_TOKEN)
    assert gw.call("vault", "secret_names").json()["result"] == ["SHARED_KEY", "VAULT_TOKEN"]
    assert gw.call("plain", "secret_names").json()["result"] == []


def test_namespaces_report_their_secrets_status(secret_gateway):
    gw = secret_gateway
    assert gw.namespace("vault")["secrets_status"] == "ok"
    assert gw.namespace("plain")["secrets_status"] == "no_secrets_needed"
    needy = gw.namespace("needy")
    assert needy["secrets_status"] == "placeholders"
    assert needy["secrets_placeholders"] == ["NEEDY_KEY"]


def test_a_tool_failing_on_an_unset_secret_is_told_how_to_set_it(secret_gateway):
    body = secret_gateway.call("needy", "use_key").json()
    assert "tooldock secrets set NEEDY_KEY --namespace needy" in body["error"]["message"]
    assert body["error"]["details"]["secret"] == "NEEDY_KEY"


def test_secret_values_never_leave_the_gateway(secret_gateway):
    gw = secret_gateway
    seen = []
    for where in ("error", "log", "result"):
        response = gw.call("vault", "leak", where=where)
        seen.append(response.text)
    assert "***" in seen[0] and "***" in seen[2]
    seen.append(json.dumps(run_mcp(gw, "vault", lambda s: s.call_tool("leak", {"where": "error"})).model_dump()))
    for path in ("/namespaces", "/health", "/tools", "/openapi.json"):
        seen.append(gw.get(path, "vault").text)
    gw.wait_for(lambda: "the token is ***" in gw.logs, what="the worker's masked log line")
    seen.append(gw.logs)
    for value in (VAULT_TOKEN, SHARED_KEY, OTHER_TOKEN):
        assert not any(value in text for text in seen), "a secret value leaked"


PEM = (  # a value of several lines: output is masked line by line, where the whole value never appears at once
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7test0001\n"
    "Zm9yIHRlc3RzIG9ubHkgLSBub3QgYSByZWFsIGtleQ==test0002\n-----END PRIVATE KEY-----"
)


def test_a_secret_of_several_lines_is_masked_line_by_line_too(make_gateway, store):
    secrets_set(store, "VAULT_TOKEN", PEM, "vault")
    gw = make_gateway(FIXTURES / "secrets", env=store)
    assert gw.call("vault", "token_hash").json()["result"] == sha(PEM)
    seen = [gw.call("vault", "leak", where=where).text for where in ("error", "log", "result")]
    gw.wait_for(lambda: "the token is ***" in gw.logs, what="the worker's masked log line")
    seen.append(gw.logs)
    for line in PEM.splitlines():
        assert not any(line in text for text in seen), f"a line of the secret leaked: {line[:12]}..."


def test_only_namespaces_whose_values_changed_restart(secret_gateway, store):
    gw = secret_gateway
    secrets_set(store, "VAULT_TOKEN", "vault-token-rotated-55aa", "vault")
    secrets_set(store, "OTHER_TOKEN", "other-token-rotated-66bb")  # nobody declares it: nobody restarts
    report = reload(gw)
    assert report["workers_restarted"] == ["vault"]
    assert gw.call("vault", "token_hash").json()["result"] == sha("vault-token-rotated-55aa")
    tooldock_cli("secrets", "remove", "VAULT_TOKEN", "--namespace", "vault", env=store)
    assert reload(gw)["workers_restarted"] == ["vault"]
    assert gw.call("vault", "token_hash").json()["result"] == "unset"
    assert gw.namespace("vault")["secrets_status"] == "missing"
    os.kill(gw.proc.pid, signal.SIGHUP)  # nothing changed: nothing restarts, and the gateway keeps serving
    assert gw.call("plain", "secret_names").status_code == 200


def test_a_store_the_gateway_cannot_open_stops_start_up(make_gateway, store, tmp_path):
    secrets_set(store, "VAULT_TOKEN", VAULT_TOKEN, "vault")
    other_key = tmp_path / "other.key"
    tooldock_cli("secrets", "init", env={"TOOLDOCK_SECRETS_DIR": str(tmp_path / "elsewhere"),
                                         "TOOLDOCK_AGE_KEY_FILE": str(other_key)})
    gw = make_gateway(FIXTURES / "secrets", env={**store, "TOOLDOCK_AGE_KEY_FILE": str(other_key)}, start=False)
    with pytest.raises(RuntimeError) as failed:
        gw.start(timeout=60)
    assert "secrets store" in str(failed.value) and str(other_key) in str(failed.value)
    assert VAULT_TOKEN not in str(failed.value)


def test_the_async_tool_example_works_once_its_secret_is_set(make_gateway, store, tmp_path):
    """examples/async-tool as the README tells it; its API host is pointed at a closed loopback port, so
    the call fails only for lack of network (tests never leave loopback)."""
    import shutil

    from conftest import EXAMPLES

    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "async-tool", src / "async-tool")
    config = src / "async-tool" / "tooldock.yaml"
    config.write_text(config.read_text().replace("https://api.openweathermap.org", "http://127.0.0.1:9"))
    gw = make_gateway(src, env={**store, "MANAGER_INTERNAL_TOKEN": MANAGER})
    before = gw.call("async-tool", "get_weather", city="Berlin").json()["error"]["message"]
    assert "tooldock secrets set WEATHER_API_KEY --namespace async-tool" in before
    secrets_set(store, "WEATHER_API_KEY", "weather-key-1c2d3e4f", "async-tool")
    assert reload(gw)["workers_restarted"] == ["async-tool"]
    after = gw.call("async-tool", "get_weather", city="Berlin").json()["error"]
    assert "ConnectError" in after["message"] and "WEATHER_API_KEY" not in after["message"]
    assert gw.namespace("async-tool")["secrets_status"] == "ok"


def test_with_watch_a_secret_set_is_live_without_a_reload(make_gateway, store):
    """`serve --watch` also watches the secrets store: `tooldock secrets set` restarts the namespaces whose
    values changed, with no signal; the log names the store's file, never a value."""
    secrets_set(store, "VAULT_TOKEN", VAULT_TOKEN, "vault")
    gw = make_gateway(FIXTURES / "secrets", env={**store, "FS_WATCHER_DEBOUNCE_MS": "200"}, args=("--watch",))
    assert f"and {Path(store['TOOLDOCK_SECRETS_DIR']).resolve()} (debounce 200 ms)" in gw.logs
    assert gw.call("vault", "token_hash").json()["result"] == sha(VAULT_TOKEN)
    # The folder's own attributes are no change to its secrets: another gateway starting on the same store
    # used to chmod it, and every running gateway with --watch reloaded for nothing.
    os.chmod(store["TOOLDOCK_SECRETS_DIR"], 0o700)
    time.sleep(1.5)
    assert "changed: the secrets store" not in gw.logs
    secrets_set(store, "VAULT_TOKEN", "vault-token-watched-77cc", "vault")
    gw.wait_for(lambda: gw.call("vault", "token_hash").json()["result"] == sha("vault-token-watched-77cc"),
                30, "the new value")
    gw.wait_for(lambda: "changed: the secrets store: reloaded in" in gw.logs, 10, "the reload's line")
    assert "restarted vault" in gw.logs
    assert VAULT_TOKEN not in gw.logs and "vault-token-watched-77cc" not in gw.logs


def test_with_watch_a_store_set_up_after_start_is_seen(make_gateway, tmp_path):
    """The manager's prepare_secret tells the person to run `tooldock secrets init`, then `set`: on a fresh
    machine that is after the gateway started, when the store's folder did not exist to be watched (a
    SIGHUP was needed). `--watch` now makes the folder (0700) and watches it from the start."""
    env = {"TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key")}
    gw = make_gateway(FIXTURES / "secrets", env={**env, "FS_WATCHER_DEBOUNCE_MS": "200"}, args=("--watch",))
    store = tmp_path / "store"
    assert f"and {store.resolve()} (debounce 200 ms)" in gw.logs
    assert store.is_dir() and (store.stat().st_mode & 0o777) == 0o700
    tooldock_cli("secrets", "init", env=env)
    secrets_set(env, "VAULT_TOKEN", VAULT_TOKEN, "vault")
    gw.wait_for(lambda: gw.call("vault", "token_hash").json().get("result") == sha(VAULT_TOKEN), 30, "the value")
    assert "changed: the secrets store: reloaded in" in gw.logs and VAULT_TOKEN not in gw.logs
