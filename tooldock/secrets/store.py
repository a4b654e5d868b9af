"""The secrets store: one directory holding the encrypted values, their plaintext status, and a lock.

    secrets.enc.yaml   sops file format (age): `global: {KEY: value}`, `namespaces: {ns: {KEY: value}}`
    secrets.meta.yaml  status only, never a value: `global: {KEY: {status: set|placeholder}}`, `namespaces: ...`
    secrets.lock       held (flock) around every read-modify-write

The directory is `TOOLDOCK_SECRETS_DIR`, else `~/.config/tooldock/secrets` (it is configuration, not a
cache). Every file is 0600 in a 0700 directory; every write replaces a file atomically.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml

from tooldock.errors import InvalidSecretInput, NoIdentity, StoreCorrupt
from tooldock.namespace.names import NamespaceNameError, validate_namespace_name
from tooldock.secrets import sopsfile
from tooldock.secrets.files import locked, write_private
from tooldock.secrets.keys import check_recipient, create_identity, key_file, load_identities, recipient_of

KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_VALUE_BYTES = 64 * 1024
Status = Literal["set", "placeholder"]


def default_dir() -> Path:
    if os.environ.get("TOOLDOCK_SECRETS_DIR"):
        return Path(os.environ["TOOLDOCK_SECRETS_DIR"]).expanduser()
    return Path.home() / ".config" / "tooldock" / "secrets"


def check_key(key: str) -> str:
    if not KEY_RE.match(key) or len(key) > 128:
        raise InvalidSecretInput(f"{key[:80]!r} is not a valid secret name: use letters, digits and _ (GITHUB_TOKEN)")
    return key


def check_namespace(namespace: str | None) -> str | None:
    if namespace is not None:
        try:
            validate_namespace_name(namespace)
        except NamespaceNameError as exc:
            raise InvalidSecretInput(str(exc)) from None
    return namespace


def check_value(value: str) -> str:
    if not value:
        raise InvalidSecretInput("the value is empty: nothing was stored")
    if "\x00" in value or len(value.encode()) > MAX_VALUE_BYTES:
        raise InvalidSecretInput(f"the value must be text without NUL bytes, at most {MAX_VALUE_BYTES} bytes")
    return value


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None  # armored age blocks as sops writes them
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: dict[str, Any]) -> bytes:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True).encode()


def _scope(tree: dict[str, Any], namespace: str | None, create: bool = False) -> dict[str, Any]:
    if namespace is None:
        return tree.setdefault("global", {}) if create else tree.get("global") or {}
    spaces = tree.setdefault("namespaces", {}) if create else tree.get("namespaces") or {}
    return spaces.setdefault(namespace, {}) if create else spaces.get(namespace) or {}


class SecretStore:
    def __init__(self, directory: Path, key_path: Path) -> None:
        self.directory, self.key_path = directory, key_path
        self.enc = directory / "secrets.enc.yaml"
        self.meta_file = directory / "secrets.meta.yaml"
        self.lock = directory / "secrets.lock"

    @classmethod
    def from_env(cls) -> SecretStore:
        return cls(default_dir(), key_file())

    # -- reading ------------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.enc.is_file()

    def _document(self) -> dict[str, Any]:
        try:
            document = yaml.safe_load(self.enc.read_text())
        except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
            raise StoreCorrupt(f"{self.enc} cannot be read as YAML: {type(exc).__name__}") from None
        if not isinstance(document, dict) or not isinstance(document.get("sops"), dict):
            raise StoreCorrupt(f"{self.enc} is not a sops file (no sops: block)")
        return document

    def _open(self) -> tuple[dict[str, Any], bytes, list[str]]:
        """Plaintext tree, data key and recipients of the current file."""
        document = self._document()
        identities = load_identities(self.key_path)
        try:
            key = sopsfile.data_key(document, identities, str(self.enc))
        except NoIdentity as exc:
            raise NoIdentity(
                f"{exc}; the key file {self.key_path} holds another identity: set TOOLDOCK_AGE_KEY_FILE to a key "
                "the store is encrypted to, or have its owner run `tooldock secrets recipients add` for yours"
            ) from None
        tree = sopsfile.decrypt(document, identities, str(self.enc))
        recipients = [str(e["recipient"]) for e in document["sops"].get("age") or [] if e.get("recipient")]
        return tree, key, recipients

    def load_all(self) -> dict[str, Any]:
        """Every value, decrypted: {"global": {...}, "namespaces": {ns: {...}}}. Empty when there is no store."""
        if not self.exists():
            return {"global": {}, "namespaces": {}}
        tree = self._open()[0]
        return {"global": dict(tree.get("global") or {}), "namespaces": dict(tree.get("namespaces") or {})}

    def meta(self) -> dict[str, Any]:
        if not self.meta_file.is_file():
            return {"global": {}, "namespaces": {}}
        try:
            data = yaml.safe_load(self.meta_file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise StoreCorrupt(f"{self.meta_file} is not valid YAML: {exc}") from None
        return {"global": dict(data.get("global") or {}), "namespaces": dict(data.get("namespaces") or {})}

    def recipients(self) -> list[str]:
        if not self.exists():
            return []
        return [str(e["recipient"]) for e in self._document()["sops"].get("age") or [] if e.get("recipient")]

    def statuses(self, namespace: str | None = None) -> list[dict[str, str]]:
        """Status only, from the metadata: [{"key", "scope", "status"}]; `namespace` filters to that scope."""
        check_namespace(namespace)
        meta, rows = self.meta(), []
        if namespace is None:
            rows += [{"key": k, "scope": "global", "status": v.get("status", "set")} for k, v in meta["global"].items()]
        for ns, entries in sorted(meta["namespaces"].items()):
            if namespace is None or ns == namespace:
                rows += [{"key": k, "scope": ns, "status": v.get("status", "set")} for k, v in (entries or {}).items()]
        return rows

    def check(self, namespace: str, declared: list[str]) -> dict[str, Any]:
        """Seed 000's `check_secrets`: which declared names are set, missing, or placeholders."""
        meta = self.meta()
        scoped, shared = meta["namespaces"].get(namespace) or {}, meta["global"]
        result: dict[str, Any] = {"namespace": namespace, "satisfied": [], "missing": [], "placeholders": []}
        for name in declared:  # a value in either scope reaches the worker (the namespace's wins)
            statuses = [e.get("status", "set") for e in (scoped.get(name), shared.get(name)) if e is not None]
            bucket = "satisfied" if "set" in statuses else "placeholders" if statuses else "missing"
            result[bucket].append(name)
        return result

    # -- writing ------------------------------------------------------------------------------------

    def init(self) -> str:
        """Make the identity (if there is none) and an empty store encrypted to it; returns its recipient."""
        recipient = recipient_of(self.key_path) if self.key_path.is_file() else create_identity(self.key_path)
        with locked(self.lock):
            if not self.exists():
                self._write({"global": {}, "namespaces": {}}, [recipient], None)
            elif recipient not in self.recipients():
                tree, key, recipients = self._open()
                self._write(tree, [*recipients, recipient], key)
        return recipient

    def _require(self) -> None:
        if not self.exists():
            raise InvalidSecretInput(
                f"there is no secrets store at {self.directory}: run `tooldock secrets init` first"
            )

    def _write(self, tree: dict[str, Any], recipients: list[str], key: bytes | None) -> None:
        write_private(self.enc, dump_yaml(sopsfile.encrypt(tree, recipients, key)))

    def _write_meta(self, meta: dict[str, Any]) -> None:
        write_private(self.meta_file, dump_yaml(meta))

    def set(self, key: str, value: str, namespace: str | None = None) -> None:
        check_key(key), check_namespace(namespace), check_value(value)
        self._require()
        with locked(self.lock):
            tree, data_key, recipients = self._open()
            _scope(tree, namespace, create=True)[key] = value
            self._write(tree, recipients, data_key)
            meta = self.meta()
            _scope(meta, namespace, create=True)[key] = {"status": "set"}
            self._write_meta(meta)

    def prepare(self, key: str, namespace: str | None = None) -> bool:
        """A placeholder in the metadata (no value); False when the key is already set there."""
        check_key(key), check_namespace(namespace)
        with locked(self.lock):
            meta = self.meta()
            scope = _scope(meta, namespace, create=True)
            if scope.get(key, {}).get("status") == "set":
                return False
            scope[key] = {"status": "placeholder"}
            self._write_meta(meta)
            return True

    def remove(self, key: str, namespace: str | None = None) -> bool:
        check_key(key), check_namespace(namespace)
        with locked(self.lock):
            removed = False
            if self.exists():
                tree, data_key, recipients = self._open()
                if key in _scope(tree, namespace):
                    del _scope(tree, namespace)[key]
                    self._write(tree, recipients, data_key)
                    removed = True
            meta = self.meta()
            if key in _scope(meta, namespace):
                del _scope(meta, namespace)[key]
                self._write_meta(meta)
                removed = True
            return removed

    def add_recipient(self, recipient: str) -> None:
        recipient = check_recipient(recipient)
        self._require()
        with locked(self.lock):
            tree, data_key, recipients = self._open()
            if recipient not in recipients:
                self._write(tree, [*recipients, recipient], data_key)

    def rotate(self) -> None:
        """A new data key; every value is encrypted again, to the same recipients."""
        self._require()
        with locked(self.lock):
            tree, _, recipients = self._open()
            self._write(tree, recipients, None)

    def replace(self, tree: dict[str, Any]) -> None:
        """Used by `edit` (which holds the lock): write a whole new tree and its metadata."""
        _, data_key, recipients = self._open()
        self._write(tree, recipients, data_key)
        meta = self.meta()
        placeholders = {
            (scope, key)
            for scope, entries in [("global", meta["global"]), *meta["namespaces"].items()]
            for key, entry in (entries or {}).items()
            if (entry or {}).get("status") == "placeholder"
        }
        fresh: dict[str, Any] = {"global": {}, "namespaces": {}}
        for key in tree.get("global") or {}:
            fresh["global"][key] = {"status": "set"}
        for ns, entries in (tree.get("namespaces") or {}).items():
            fresh["namespaces"][ns] = {key: {"status": "set"} for key in entries}
        for scope, key in placeholders:  # placeholders stay until a value arrives
            target = fresh["global"] if scope == "global" else fresh["namespaces"].setdefault(scope, {})
            target.setdefault(key, {"status": "placeholder"})
        self._write_meta(fresh)
