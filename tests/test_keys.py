"""API keys (issue 14, seed 002): the store keeps hashes only, checks every call against the file (revoked
and expired keys fail at once), and the scope rules decide which tools a key sees."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import tooldock_cli

from tooldock.errors import InvalidApiKey, KeysError
from tooldock.keys import ApiKey, KeyStore
from tooldock.keys import store as keystore
from tooldock.keys.validate import parse_duration

READ_ONLY = {"name": "list", "annotations": {"readOnlyHint": True}}
WRITES = {"name": "create", "annotations": {"readOnlyHint": False}}
UNANNOTATED = {"name": "delete"}


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "keys")


# -- scope rules (the seed's "tool filtering by scope") ---------------------------------------------------


def test_read_scope_sees_only_tools_annotated_read_only():
    key = ApiKey("0" * 12, "r", "read")
    assert key.visible("project", [READ_ONLY, WRITES, UNANNOTATED]) == [READ_ONLY]
    assert "read-only" in key.why_not("project", WRITES)


def test_write_and_admin_scopes_see_every_tool():
    for scope in ("write", "admin"):
        key = ApiKey("0" * 12, "w", scope)
        assert key.visible("project", [READ_ONLY, WRITES, UNANNOTATED]) == [READ_ONLY, WRITES, UNANNOTATED]


def test_namespace_globs_narrow_any_scope():
    key = ApiKey("0" * 12, "team", "admin", namespaces=("team-*", "weather"))
    assert key.allows_namespace("team-a") and key.allows_namespace("weather")
    assert not key.allows_namespace("project") and not key.allows_namespace("weather2")
    assert key.visible("project", [READ_ONLY, WRITES]) == []
    assert not key.unrestricted
    assert "does not cover namespace 'project'" in key.why_not("project", WRITES)


def test_tool_globs_match_the_name_or_namespace_slash_name():
    key = ApiKey("0" * 12, "t", "write", tools=("li*", "project/create"))
    assert key.visible("project", [READ_ONLY, WRITES, UNANNOTATED]) == [READ_ONLY, WRITES]
    assert key.visible("other", [READ_ONLY, WRITES]) == [READ_ONLY]
    read = ApiKey("0" * 12, "t", "read", tools=("project/*",))
    assert read.visible("project", [READ_ONLY, WRITES]) == [READ_ONLY]  # globs narrow; they never widen


def test_only_an_admin_key_without_globs_is_unrestricted():
    assert ApiKey("0" * 12, "a", "admin").unrestricted
    assert not ApiKey("0" * 12, "a", "write").unrestricted
    assert not ApiKey("0" * 12, "a", "admin", tools=("*",)).unrestricted


# -- the store ----------------------------------------------------------------------------------------------


def test_create_stores_only_a_hash_in_a_private_file(store: KeyStore):
    record, key = store.create("ci", "read", ("weather",), ("get_*",), 3600)
    assert key.startswith(f"tdk_{record.id}_") and len(key) > 50
    text = store.path.read_text()
    assert key not in text and key.split("_", 2)[2] not in text
    stored = json.loads(text)["keys"][0]
    assert stored["hash"].startswith("sha256:")
    assert stored["namespaces"] == ["weather"] and stored["tools"] == ["get_*"] and stored["scope"] == "read"
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.directory).st_mode) == 0o700
    assert record.expires is not None and record.created is not None
    assert timedelta(seconds=3600) <= record.expires - record.created <= timedelta(seconds=3601)  # rounded up


def test_check_accepts_a_valid_key_and_refuses_the_rest(store: KeyStore):
    record, key = store.create("ci", "write")
    assert store.check(key) == record
    other_record, other = store.create("other", "read")
    for wrong in ("", "change_me", "tdk_", f"tdk_{record.id}_", f"tdk_{record.id}_x" + key[-10:],
                  f"tdk_{other_record.id}_" + key.split("_", 2)[2], key + "x", "tdk_zzzzzzzzzzzz_abc"):
        with pytest.raises(InvalidApiKey) as caught:
            store.check(wrong)
        assert "invalid or expired API key" in caught.value.message
        assert key not in caught.value.message
    assert store.check(other) == other_record


def test_a_revoked_key_fails_at_once(store: KeyStore):
    record, key = store.create("ci", "admin")
    store.check(key)
    revoked = store.revoke(record.id)
    assert revoked.revoked is not None
    with pytest.raises(InvalidApiKey, match="revoked"):
        store.check(key)
    assert store.revoke(record.id).revoked == revoked.revoked  # revoking twice changes nothing
    with pytest.raises(KeysError, match="no API key with id 0123456789ab"):
        store.revoke("0123456789ab")


def test_an_expired_key_fails(store: KeyStore):
    before = datetime.now(UTC)
    record, key = store.create("short", "read", expires_in=60)
    assert record.expires is not None and record.expires >= before + timedelta(seconds=60)  # at least what was asked
    assert record.expires - record.created <= timedelta(seconds=61)  # stored to the second, rounded up
    assert store.check(key, now=record.expires - timedelta(seconds=1)) == record
    with pytest.raises(InvalidApiKey, match="expired"):
        store.check(key, now=record.expires)


def test_active_answers_which_checked_keys_are_still_valid(store: KeyStore, capsys: pytest.CaptureFixture[str]):
    """What the gateway's KeyGuard asks, once for every key it holds, when the keys file changed."""
    kept, _ = store.create("kept", "read")
    gone, _ = store.create("gone", "read")
    short, _ = store.create("short", "read", expires_in=60)
    store.revoke(gone.id)
    ids = [kept.id, gone.id, short.id, "0123456789ab"]
    assert short.expires is not None
    assert store.active(ids, now=short.expires - timedelta(seconds=1)) == {kept.id, short.id}
    assert store.active(ids, now=short.expires) == {kept.id}
    store.path.write_text("{not json")  # says nothing of any key: the guard decides (it revokes nothing)
    with pytest.raises(KeysError, match="not valid JSON"):
        store.active(ids)
    store.path.unlink()  # no file: no keys
    assert store.active(ids) == set()


def test_a_key_from_another_store_is_refused(tmp_path: Path, store: KeyStore):
    _, key = KeyStore(tmp_path / "elsewhere").create("x", "admin")
    with pytest.raises(InvalidApiKey, match="no such key"):
        store.check(key)


def test_last_used_is_recorded_at_most_once_a_minute(store: KeyStore):
    record, key = store.create("ci", "read")
    now = datetime.now(UTC).replace(microsecond=0)
    assert store.touch(store.check(key), now)
    assert not store.touch(store.check(key), now + timedelta(seconds=30))
    assert store.touch(store.check(key), now + timedelta(seconds=61))
    assert store.check(key).last_used == now + timedelta(seconds=61)


def test_check_reads_the_file_again_only_when_it_changed(store: KeyStore, monkeypatch: pytest.MonkeyPatch):
    """A request made with a key costs a stat when nothing changed; any write (this store's, another
    gateway's, a hand edit) is seen by the next check."""
    record, key = store.create("ci", "read")
    reads = []
    original = KeyStore._records
    monkeypatch.setattr(KeyStore, "_records", lambda self: reads.append(1) or original(self))
    assert store.check(key) == record and len(reads) == 1
    assert store.check(key) == record and store.check_fresh(key) == record and len(reads) == 1
    with pytest.raises(InvalidApiKey, match="no such key"):
        store.check_fresh(key[:-1] + ("A" if key[-1] != "A" else "B"))  # refused without a read too
    assert len(reads) == 1
    other = KeyStore(store.directory)  # another gateway on the same file
    other.revoke(record.id)
    assert store.check_fresh(key) is None  # changed: only `check` may read it
    with pytest.raises(InvalidApiKey, match="revoked"):
        store.check(key)
    assert len(reads) == 3  # the revoke's own read and this one


def test_a_rewrite_of_the_same_size_is_seen(store: KeyStore):
    _, key = store.create("ci", "read")
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert store.touch(store.check(key), now)
    size = store.path.stat().st_size
    assert store.touch(store.check(key), now + timedelta(seconds=61))  # the same length of text, a new file
    assert store.path.stat().st_size == size
    assert store.check(key).last_used == now + timedelta(seconds=61)
    assert store.check_fresh(key) is not None


def test_a_change_the_stat_cannot_see_is_read_within_a_second(store: KeyStore, monkeypatch: pytest.MonkeyPatch):
    """Two same-size writes within one tick of the file system's clock that reuse the inode leave the
    signature as it was: the file is read again anyway once the last read is REREAD_AFTER old."""
    record, key = store.create("ci", "read")
    monkeypatch.setattr(KeyStore, "_signature", lambda self: "unchanged")
    monkeypatch.setattr(keystore, "REREAD_AFTER", 0.2)
    assert store.check(key) == record
    KeyStore(store.directory).revoke(record.id)
    assert store.check_fresh(key) == record  # not seen yet
    time.sleep(0.25)
    assert store.check_fresh(key) is None
    with pytest.raises(InvalidApiKey, match="revoked"):
        store.check(key)


def test_touch_is_due_once_a_minute(store: KeyStore):
    record, _ = store.create("ci", "read")
    now = datetime.now(UTC)
    assert KeyStore.touch_due(record, now)  # never used
    used = dataclasses.replace(record, last_used=now)
    assert not KeyStore.touch_due(used, now + timedelta(seconds=59))
    assert KeyStore.touch_due(used, now + timedelta(seconds=60))


def test_concurrent_creates_lose_no_key(store: KeyStore):
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda i: store.create(f"k{i}", "read"), range(40)))
    assert len({r.id for r, _ in made}) == 40
    assert {k.id for k in store.list()} == {r.id for r, _ in made}
    for record, key in made:
        assert store.check(key) == record


def test_an_unreadable_keys_file_refuses_keys_and_says_why(store: KeyStore, capsys: pytest.CaptureFixture[str]):
    _, key = store.create("ci", "read")
    store.path.write_text("{not json")
    with pytest.raises(InvalidApiKey, match="cannot read its keys file"):
        store.check(key)
    assert "not valid JSON" in capsys.readouterr().err
    with pytest.raises(KeysError, match="not valid JSON"):
        store.list()
    store.path.write_text(json.dumps({"version": 1, "keys": [{"id": "0123456789ab", "hash": "sha256:x",
                                                             "name": "n", "scope": "root"}]}))
    with pytest.raises(KeysError, match="key 0123456789ab: unknown scope 'root'"):
        store.list()


@pytest.mark.parametrize("text, seconds", [("90m", 5400), ("12h", 43200), ("30d", 2592000), ("1w2d", 777600),
                                           ("45s", 45)])
def test_durations(text: str, seconds: int):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1y", "10", "d", "-1d", "0s", "1d 2h", "5000000w"])
def test_bad_durations_are_refused_with_examples(text: str):
    with pytest.raises(KeysError):
        parse_duration(text)


@pytest.mark.parametrize("args, message", [
    (("--name", "", "--scope", "read"), "not a valid key name"),
    (("--name", "ci", "--scope", "root"), "Invalid value for '--scope'"),
    (("--name", "ci", "--scope", "read", "--namespace", "Team A"), "not a namespace glob"),
    (("--name", "ci", "--scope", "read", "--tool", "a/b/c"), "not a tool glob"),
    # a set left open, or an empty side of '/': a key that would match nothing
    (("--name", "ci", "--scope", "read", "--namespace", "["), "not a namespace glob"),
    (("--name", "ci", "--scope", "read", "--tool", "[!"), "not a tool glob"),
    (("--name", "ci", "--scope", "read", "--tool", "/"), "not a tool glob"),
    (("--name", "ci", "--scope", "read", "--tool", "weather/"), "not a tool glob"),
    (("--name", "ci", "--scope", "read", "--expires", "soon"), "not a duration"),
])
def test_cli_create_refuses_bad_input(tmp_path: Path, args: tuple[str, ...], message: str):
    proc = tooldock_cli("keys", "create", *args, env={"TOOLDOCK_KEYS_DIR": str(tmp_path / "keys")}, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_create_list_revoke(tmp_path: Path):
    env = {"TOOLDOCK_KEYS_DIR": str(tmp_path / "keys")}
    created = tooldock_cli("keys", "create", "--name", "ci", "--scope", "read", "--namespace", "weather",
                           "--tool", "get_*", "--expires", "1d", env=env)
    key = created.stdout.strip()
    assert key.startswith("tdk_") and "shown only now" in created.stderr and key not in created.stderr
    made = json.loads(tooldock_cli("keys", "create", "--name", "ops", "--scope", "admin", "--json", env=env).stdout)
    assert made["key"].startswith(f"tdk_{made['id']}_") and made["scope"] == "admin" and made["expires"] is None
    listed = tooldock_cli("keys", "list", "--json", env=env).stdout
    assert key not in listed and made["key"] not in listed
    rows = {r["name"]: r for r in json.loads(listed)}
    assert rows["ci"]["state"] == "active" and rows["ci"]["namespaces"] == ["weather"]
    assert rows["ci"]["tools"] == ["get_*"] and rows["ci"]["expires"] is not None
    assert "hash" not in rows["ci"]
    tooldock_cli("keys", "revoke", made["id"], env=env)
    rows = {r["name"]: r for r in json.loads(tooldock_cli("keys", "list", "--json", env=env).stdout)}
    assert rows["ops"]["state"] == "revoked" and rows["ci"]["state"] == "active"
    table = tooldock_cli("keys", "list", env=env).stdout
    assert "revoked" in table and made["id"] in table and key not in table
    missing = tooldock_cli("keys", "revoke", "0123456789ab", env=env, check=False)
    assert missing.returncode == 1 and "no API key with id" in missing.stderr
    # a whole key given by mistake: refused with its id named, the secret part never repeated
    ci_id, secret = key.split("_")[1], key.split("_", 2)[2]
    whole = tooldock_cli("keys", "revoke", key, env=env, check=False)
    assert whole.returncode == 1 and f"its id is {ci_id}: tooldock keys revoke {ci_id}" in whole.stderr
    assert secret not in whole.stderr and secret[:8] not in whole.stderr + whole.stdout
    tooldock_cli("keys", "revoke", ci_id.upper(), env=env)  # an id in upper case is the same id
    assert {r["name"]: r["state"] for r in json.loads(tooldock_cli("keys", "list", "--json", env=env).stdout)}[
        "ci"] == "revoked"
