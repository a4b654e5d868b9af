"""The secrets store on its own: concurrent writers, a writer killed mid-write, refusals of a wrong key
and of tampering, a second recipient, rotation, `edit`, and the file format read and written by an
independent implementation (Debian's `age` CLI + AES-GCM from `cryptography`, written here from sops's
format description, not through ToolDock's code)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import require, scripted_editor
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tooldock.errors import EditFailed, InvalidSecretInput, NoIdentity, StoreCorrupt
from tooldock.secrets import SecretStore
from tooldock.secrets.edit import edit
from tooldock.secrets.keys import create_identity


@pytest.fixture
def store(tmp_path: Path) -> SecretStore:
    made = SecretStore(tmp_path / "store", tmp_path / "age.key")
    made.init()
    return made


def test_files_are_private_and_hold_no_value(store):
    store.set("API_KEY", "value-0f9e8d7c", "weather")
    store.prepare("LATER")
    assert oct(store.directory.stat().st_mode & 0o777) == "0o700"
    for path in (store.enc, store.meta_file, store.key_path):
        assert oct(path.stat().st_mode & 0o777) == "0o600", path
    assert "value-0f9e8d7c" not in store.enc.read_text() + store.meta_file.read_text()
    assert yaml.safe_load(store.meta_file.read_text()) == {
        "global": {"LATER": {"status": "placeholder"}}, "namespaces": {"weather": {"API_KEY": {"status": "set"}}}}
    assert store.check("weather", ["API_KEY", "LATER", "NOPE"]) == {
        "namespace": "weather", "satisfied": ["API_KEY"], "missing": ["NOPE"], "placeholders": ["LATER"]}


def test_resolving_reads_the_encrypted_file_once_for_values_and_statuses(store, monkeypatch):
    store.set("API_KEY", "value-1a2b3c4d", "weather")
    store.prepare("LATER")
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (reads.append(self.name), real(self, *a, **k))[1])
    resolved = store.resolve("weather", ["API_KEY", "LATER"])
    assert resolved.values == {"API_KEY": "value-1a2b3c4d"} and resolved.status == "placeholders"
    assert reads.count(store.enc.name) == 1, reads
    assert store.snapshot() == (store.load_all(), store.placeholders()) == (
        {"global": {}, "namespaces": {"weather": {"API_KEY": "value-1a2b3c4d"}}}, {("global", "LATER")})


def test_bad_names_and_values_are_refused(store):
    for key, value, namespace in (("bad-name", "v", None), ("OK", "", None), ("OK", "a\x00b", None),
                                  ("OK", "v", "Bad_NS"), ("OK", "x" * 70_000, None)):
        with pytest.raises(InvalidSecretInput):
            store.set(key, value, namespace)
    assert store.load_all() == {"global": {}, "namespaces": {}}


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tooldock.secrets import SecretStore
    store = SecretStore(Path(sys.argv[1]), Path(sys.argv[2]))
    for i in range(int(sys.argv[4])):
        store.set(f"{sys.argv[3]}_{i}", f"value-{sys.argv[3]}-{i}")
""")


def test_concurrent_writers_from_two_processes_both_land(store):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.directory), str(store.key_path), name, "8"])
             for name in ("ALPHA", "BETA")]
    assert [p.wait(120) for p in procs] == [0, 0]
    values = store.load_all()["global"]
    assert len(values) == 16 and values["ALPHA_7"] == "value-ALPHA-7" and values["BETA_0"] == "value-BETA-0"


KILLED = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import tooldock.secrets.files as files
    def die(src, dst):  # the new file is written and synced: die just before it replaces the old one
        os.kill(os.getpid(), signal.SIGKILL)
    files.os.replace = die
    from tooldock.secrets import SecretStore
    SecretStore(Path(sys.argv[1]), Path(sys.argv[2])).set("NEW", "never-lands-1234")
""")


def test_a_writer_killed_mid_write_leaves_the_previous_file_intact(store):
    store.set("OLD", "old-value-5678")
    before = store.enc.read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILLED, str(store.directory), str(store.key_path)])
    assert proc.returncode == -9
    assert store.enc.read_bytes() == before
    assert store.load_all()["global"] == {"OLD": "old-value-5678"}
    store.set("AFTER", "after-value-9012")  # the lock died with the writer
    assert set(store.load_all()["global"]) == {"OLD", "AFTER"}


def test_a_wrong_identity_is_refused_with_the_key_file_named(store, tmp_path):
    store.set("K", "some-value-3456")
    stranger = SecretStore(store.directory, tmp_path / "stranger.key")
    create_identity(stranger.key_path)
    with pytest.raises(NoIdentity) as refused:
        stranger.load_all()
    assert str(stranger.key_path) in str(refused.value) and "age1" in str(refused.value)
    with pytest.raises(NoIdentity):
        SecretStore(store.directory, tmp_path / "absent.key").load_all()


@pytest.mark.parametrize("target", ["value", "mac", "path"])
def test_tampering_is_refused_and_nothing_half_decrypted_is_returned(store, target):
    store.set("FIRST", "first-value-1111")
    store.set("SECOND", "second-value-2222")
    document = yaml.safe_load(store.enc.read_text())
    if target == "value":
        token = document["global"]["SECOND"]
        data = base64.b64decode(token.split("data:")[1].split(",")[0])
        flipped = base64.b64encode(bytes([data[0] ^ 1]) + data[1:]).decode()
        document["global"]["SECOND"] = token.replace(token.split("data:")[1].split(",")[0], flipped)
    elif target == "mac":
        store.set("THIRD", "third-value-3333")  # a genuine MAC and timestamp, but for other values
        newer = yaml.safe_load(store.enc.read_text())["sops"]
        document["sops"]["mac"], document["sops"]["lastmodified"] = newer["mac"], newer["lastmodified"]
    else:  # a value moved to another key: its additional data (the path) no longer matches
        document["global"]["FIRST"], document["global"]["SECOND"] = document["global"]["SECOND"], document["global"]["FIRST"]
    store.enc.write_text(yaml.safe_dump(document))
    with pytest.raises(StoreCorrupt) as refused:
        store.load_all()
    assert ("MAC" in str(refused.value)) == (target == "mac")
    for value in ("first-value-1111", "second-value-2222"):
        assert value not in str(refused.value)


def test_a_second_recipient_decrypts_and_rotation_changes_every_ciphertext(store, tmp_path):
    store.set("SHARED", "shared-value-4444", "team")
    teammate = SecretStore(store.directory, tmp_path / "teammate.key")
    store.add_recipient(create_identity(teammate.key_path))
    assert teammate.load_all()["namespaces"]["team"]["SHARED"] == "shared-value-4444"
    before = yaml.safe_load(store.enc.read_text())
    store.rotate()
    after = yaml.safe_load(store.enc.read_text())
    assert [e["enc"] for e in after["sops"]["age"]] != [e["enc"] for e in before["sops"]["age"]]
    assert after["namespaces"]["team"]["SHARED"] != before["namespaces"]["team"]["SHARED"]
    assert teammate.load_all() == store.load_all()
    with pytest.raises(InvalidSecretInput):
        store.add_recipient("not-a-recipient")


def test_edit_lands_a_valid_edit_and_shreds_the_plaintext(store, tmp_path):
    store.set("KEEP", "keep-value-5555")
    store.prepare("WAITING", "ns")
    editor = scripted_editor(tmp_path, "text = path.read_text()\n"
                               "path.write_text(text.replace('namespaces: {}', \"namespaces:\\n  ns:\\n    NEW: 'new-6666'\"))")
    edit(store, editor)
    seen = Path((tmp_path / "seen").read_text())
    assert not seen.exists()
    assert store.load_all() == {"global": {"KEEP": "keep-value-5555"}, "namespaces": {"ns": {"NEW": "new-6666"}}}
    assert store.check("ns", ["NEW", "WAITING"])["placeholders"] == ["WAITING"]


@pytest.mark.parametrize("body", ["path.write_text('global: [oops')", "path.write_text('global:\\n  bad-key: x')",
                                  "sys.exit(3)"])
def test_an_invalid_or_failed_edit_changes_nothing_and_shreds_the_plaintext(store, tmp_path, body):
    store.set("KEEP", "keep-value-7777")
    before = store.enc.read_bytes()
    with pytest.raises(EditFailed) as failed:
        edit(store, scripted_editor(tmp_path, body))
    assert "keep-value-7777" not in str(failed.value)
    assert not Path((tmp_path / "seen").read_text()).exists()
    assert store.enc.read_bytes() == before


# -- the format, checked by an independent reader and writer ---------------------------------------------

def _age_decrypt(armored: str, key_file: Path) -> bytes:
    return subprocess.run(["age", "-d", "-i", str(key_file)], input=armored.encode(), capture_output=True,
                          check=True).stdout


def _aes_open(token: str, key: bytes, additional: str) -> str:
    fields = dict(part.split(":", 1) for part in token[len("ENC[AES256_GCM,"):-1].split(","))
    iv, data, tag = (base64.b64decode(fields[n]) for n in ("iv", "data", "tag"))
    assert len(iv) == 32 and fields["type"] == "str"
    return AESGCM(key).decrypt(iv, data + tag, additional.encode()).decode()


def test_an_independent_reader_opens_what_tooldock_wrote(store):
    require("age")
    store.set("GITHUB_TOKEN", "ghp-independent-8888")
    store.set("SLACK", "xoxb-independent-9999", "chat")
    document = yaml.safe_load(store.enc.read_text())
    key = _age_decrypt(document["sops"]["age"][0]["enc"], store.key_path)
    assert len(key) == 32
    assert _aes_open(document["global"]["GITHUB_TOKEN"], key, "global:GITHUB_TOKEN:") == "ghp-independent-8888"
    assert _aes_open(document["namespaces"]["chat"]["SLACK"], key, "namespaces:chat:SLACK:") == "xoxb-independent-9999"
    mac = _aes_open(document["sops"]["mac"], key, str(document["sops"]["lastmodified"]))
    assert mac == hashlib.sha512(b"ghp-independent-8888xoxb-independent-9999").hexdigest().upper()
    assert document["sops"]["version"].startswith("3.") and document["sops"]["unencrypted_suffix"] == "_unencrypted"


def test_tooldock_reads_what_an_independent_writer_made(tmp_path):
    require("age")
    key_file = tmp_path / "age.key"
    subprocess.run(["age-keygen", "-o", str(key_file)], check=True, capture_output=True)
    recipient = subprocess.run(["age-keygen", "-y", str(key_file)], check=True, capture_output=True,
                               text=True).stdout.strip()
    data_key = os.urandom(32)
    armored = subprocess.run(["age", "-r", recipient, "-a"], input=data_key, capture_output=True, check=True).stdout

    def seal(value: str, additional: str) -> str:
        iv = os.urandom(32)
        out = AESGCM(data_key).encrypt(iv, value.encode(), additional.encode())
        b64 = base64.b64encode
        return f"ENC[AES256_GCM,data:{b64(out[:-16]).decode()},iv:{b64(iv).decode()},tag:{b64(out[-16:]).decode()},type:str]"

    modified = "2026-11-01T10:00:00Z"
    mac = hashlib.sha512(b"from-elsewhere-1234plain-note").hexdigest().upper()
    document = {
        "global": {"API_KEY": seal("from-elsewhere-1234", "global:API_KEY:")},
        "namespaces": {"notes": {"NOTE_unencrypted": "plain-note"}},
        "sops": {"kms": [], "gcp_kms": [], "azure_kv": [], "hc_vault": [], "pgp": [],
                 "age": [{"recipient": recipient, "enc": armored.decode()}],
                 "lastmodified": modified, "mac": seal(mac, modified),
                 "unencrypted_suffix": "_unencrypted", "version": "3.9.4"},
    }
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "secrets.enc.yaml").write_text(yaml.safe_dump(document))
    read = SecretStore(tmp_path / "store", key_file).load_all()
    assert read == {"global": {"API_KEY": "from-elsewhere-1234"}, "namespaces": {"notes": {"NOTE_unencrypted": "plain-note"}}}
