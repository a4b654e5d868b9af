"""What one namespace gets from the store: only its declared names, namespace scope over global over the
folder's `env:` defaults, and its secrets status. Values here are dummies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldock.secrets import SecretStore, resolve_namespace


@pytest.fixture
def store(tmp_path: Path) -> SecretStore:
    made = SecretStore(tmp_path / "store", tmp_path / "age.key")
    made.init()
    made.set("TOKEN", "global-token-01")
    made.set("TOKEN", "weather-token-02", "weather")
    made.set("SHARED", "shared-03")
    made.set("UNDECLARED", "undeclared-04")
    made.prepare("LATER", "weather")
    made.prepare("GLOBAL_LATER")
    return made


def test_only_declared_names_namespace_over_global_over_defaults(store):
    assert store.values_for("weather", ["TOKEN", "SHARED", "URL"], {"URL": "https://default", "SHARED": "dflt"}) == {
        "TOKEN": "weather-token-02", "SHARED": "shared-03", "URL": "https://default"}
    assert store.values_for("other", ["TOKEN"]) == {"TOKEN": "global-token-01"}
    assert store.values_for("other", []) == {}


@pytest.mark.parametrize("namespace, declared, defaults, status", [
    ("weather", [], None, "no_secrets_needed"),
    ("weather", ["TOKEN", "SHARED"], None, "ok"),
    ("weather", ["TOKEN", "LATER"], None, "placeholders"),
    ("other", ["LATER"], None, "missing"),  # a placeholder in another namespace's scope does not count
    ("other", ["GLOBAL_LATER"], None, "placeholders"),
    ("weather", ["LATER", "NOWHERE"], None, "missing"),
    ("weather", ["NOWHERE"], {"NOWHERE": "default"}, "ok"),
])
def test_secrets_status(store, namespace, declared, defaults, status):
    assert store.secrets_status(namespace, declared, defaults) == status


def test_resolve_names_what_is_missing_and_what_is_a_placeholder(store):
    got = resolve_namespace(store.load_all(), store.placeholders(), "weather", ["TOKEN", "LATER", "NOWHERE"])
    assert (got.values, got.status, got.missing, got.placeholders) == (
        {"TOKEN": "weather-token-02"}, "missing", ("NOWHERE",), ("LATER",))
    assert "weather-token-02" not in repr(store) + repr(got)


def test_no_store_yet_reads_as_empty(tmp_path):
    empty = SecretStore(tmp_path / "none", tmp_path / "none.key")
    assert empty.load_all() == {"global": {}, "namespaces": {}} and empty.statuses() == []
    assert empty.values_for("ns", ["A"]) == {} and empty.secrets_status("ns", ["A"]) == "missing"
    assert empty.check("ns", ["A"]) == {"namespace": "ns", "satisfied": [], "missing": ["A"], "placeholders": []}
