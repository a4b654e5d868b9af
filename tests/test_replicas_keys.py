"""Session ids say which deployment minted them (issue 56): a 2025-era session opened on one gateway is served
by another sharing its TOOLDOCK_STATE_KEY (also after a rotation, the old key second in the list) and refused
like an unknown session by one on the same Redis with another key; a gateway with a state URL and no key
refuses to start, saying what to set."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES, TOOLDOCK, Gateway
from rediskit import RedisServer
from test_replicas import _call, _mcp, _open

from tooldock.runtime.mcp.sessionids import SessionIds
from tooldock.runtime.settings import Settings, SettingsError

pytestmark = pytest.mark.slow
OLD, NEW, OTHER = (secrets.token_urlsafe(32) for _ in range(3))


def test_ids_are_checked_by_any_key_of_the_list_and_bound_to_their_namespace():
    old, rotated, other = SessionIds([OLD], "sums"), SessionIds([NEW, OLD], "sums"), SessionIds([OTHER], "sums")
    sid = old.new()
    assert len(sid) == 64 and int(sid, 16) >= 0 and sid != old.new()
    assert old.genuine(sid) and rotated.genuine(sid) and not other.genuine(sid)
    assert rotated.genuine(rotated.new()) and not old.genuine(rotated.new())  # the first key mints
    assert not SessionIds([OLD], "memo").genuine(sid)
    forged = sid[:32] + ("0" if sid[32] != "0" else "1") + sid[33:]
    assert not old.genuine(forged) and not old.genuine(sid[:63]) and not old.genuine("x" * 64)


def test_a_state_url_without_a_state_key_is_refused_with_what_to_set():
    with pytest.raises(SettingsError, match=r"TOOLDOCK_STATE_KEY is not.*same secret on every gateway replica"):
        Settings.from_env({"TOOLDOCK_STATE_URL": "redis://127.0.0.1:6379/0"})
    assert Settings.from_env({"TOOLDOCK_STATE_URL": "redis://127.0.0.1:6379/0", "TOOLDOCK_STATE_KEY": OLD})


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Gateway, Gateway]]:
    tmp = tmp_path_factory.mktemp("keys")
    redis = RedisServer(tmp / "redis").start()
    tools = tmp / "tools"
    tools.mkdir()
    (tools / "sums").symlink_to(EXAMPLES / "multi-tool")
    made = [Gateway(tools, tmp / f"{n}.log", {"TOOLDOCK_STATE_URL": redis.url, "TOOLDOCK_STATE_KEY": key})
            for n, key in enumerate((OLD, f"{NEW},{OLD}", OTHER))]
    try:
        yield tuple(g.start() for g in made)  # type: ignore[misc]
    finally:
        for gateway in made:
            gateway.stop()
        redis.cleanup()


def test_another_deployments_session_id_is_unknown_and_a_rotated_key_keeps_sessions(gateways):
    minted, rotated, other = gateways
    sid = _open(minted, "sums")
    assert _call(rotated, sid, "sums", "add", a=2, b=3) == 5  # adopted: the old key is second in its list
    refused = _mcp(other, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, sid)
    assert refused.status_code == 404, refused.text  # its facts are in the Redis it shares: the id is not its
    assert _call(minted, sid, "sums", "add", a=1, b=1) == 2  # the session itself is untouched


def test_a_gateway_with_a_state_url_and_no_key_does_not_start(tmp_path: Path):
    (tmp_path / "tools").mkdir()
    env = {**Gateway(tmp_path / "tools", tmp_path / "log").env, "TOOLDOCK_STATE_URL": "redis://127.0.0.1:1/0"}
    env.pop("TOOLDOCK_STATE_KEY", None)
    env.pop("TOOLDOCK_STATE_KEY_FILE", None)
    done = subprocess.run([TOOLDOCK, "serve", str(tmp_path / "tools"), "--port", "0"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode != 0 and "TOOLDOCK_STATE_KEY" in done.stderr and "Traceback" not in done.stderr
