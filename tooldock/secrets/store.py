"""The secrets store: one directory holding the encrypted values, their plaintext status, and a lock.

    secrets.enc.yaml   sops file format (age): `global: {KEY: value}`, `namespaces: {ns: {KEY: value}}`
    secrets.meta.yaml  status only, never a value: `global: {KEY: {status: set|placeholder}}`, `namespaces: ...`
    secrets.lock       held (flock) around every read-modify-write

A name's status comes from the encrypted file's names and the metadata's placeholders (status.py).

The directory is `TOOLDOCK_SECRETS_DIR`, else `~/.config/tooldock/secrets` (it is configuration, not a
cache). Every file is 0600 in a 0700 directory; every write replaces a file atomically.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tooldock.errors import InvalidSecretInput, NoIdentity, SecretsError, StoreCorrupt
from tooldock.secrets import sopsfile, yamlfile
from tooldock.secrets.files import locked, write_private
from tooldock.secrets.keys import check_recipient, create_identity, key_file, load_identities, recipient_of
from tooldock.secrets.resolve import Resolved, SecretsStatus, resolve_namespace
from tooldock.secrets.status import merged, status_of, stored_names
from tooldock.secrets.validate import by_scope, check_key, check_namespace, check_value, scope_values

Status = Literal["set", "placeholder"]


def default_dir() -> Path:
    if os.environ.get("TOOLDOCK_SECRETS_DIR"):
        return Path(os.environ["TOOLDOCK_SECRETS_DIR"]).expanduser()
    return Path.home() / ".config" / "tooldock" / "secrets"


def _scope(tree: dict[str, Any], namespace: str | None, create: bool = False) -> dict[str, Any]:
    if namespace is None:
        return tree.setdefault("global", {}) if create else tree.get("global") or {}
    spaces = tree.setdefault("namespaces", {}) if create else tree.get("namespaces") or {}
    return spaces.setdefault(namespace, {}) if create else spaces.get(namespace) or {}


@dataclass
class _Opened:
    """The current file, decrypted: plaintext tree, data key, age recipients, and its `sops:` block."""

    tree: dict[str, Any] = field(repr=False)
    key: bytes = field(repr=False)
    recipients: list[str]
    meta: dict[str, Any]


class SecretStore:
    """One store directory and the age key file that opens it. Reads of a store that does not exist yet
    give empty results; writes that need one say to run `tooldock secrets init`."""

    def __init__(self, directory: Path, key_path: Path) -> None:
        self.directory, self.key_path = directory, key_path
        self.enc = directory / "secrets.enc.yaml"
        self.meta_file = directory / "secrets.meta.yaml"
        self.lock = directory / "secrets.lock"

    @classmethod
    def from_env(cls) -> SecretStore:
        return cls(default_dir(), key_file())

    def __repr__(self) -> str:
        return f"SecretStore({str(self.directory)!r}, key={str(self.key_path)!r})"

    # -- reading ------------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.enc.is_file()

    def _document(self) -> dict[str, Any]:
        try:
            document = yamlfile.load(self.enc.read_text(encoding="utf-8"))
        except (OSError, ValueError, yamlfile.YAMLError) as exc:  # never quote the parser: it may echo text
            raise StoreCorrupt(f"{self.enc} cannot be read as YAML: {type(exc).__name__}") from None
        if not isinstance(document, dict) or not isinstance(document.get("sops"), dict):
            raise StoreCorrupt(f"{self.enc} is not a sops file (no sops: block)")
        return document

    def _open(self, document: dict[str, Any] | None = None) -> _Opened:
        """Decrypt the current file (or `document`, the file already read); raises before returning anything
        if it does not verify."""
        document = self._document() if document is None else document
        try:
            identities = load_identities(self.key_path)
        except NoIdentity as exc:
            raise NoIdentity(f"{exc}; {self.enc} is encrypted to: {', '.join(sopsfile.recipients(document))}") from None
        try:
            key = sopsfile.data_key(document, identities, str(self.enc))
        except NoIdentity as exc:
            raise NoIdentity(
                f"{exc}; the key file {self.key_path} holds another identity: set TOOLDOCK_AGE_KEY_FILE to a key "
                "the store is encrypted to, or have its owner run `tooldock secrets recipients add` for yours"
            ) from None
        tree = sopsfile.decrypt_with(document, key, str(self.enc))
        return _Opened(tree, key, sopsfile.recipients(document), document["sops"])

    def load_all(self) -> dict[str, Any]:
        """Every value, decrypted: {"global": {KEY: text}, "namespaces": {ns: {KEY: text}}}; empty when there
        is no store. Typed values in a sops-written file come back as text (`8080`, `true`)."""
        if not self.exists():
            return {"global": {}, "namespaces": {}}
        return by_scope(self._open().tree, str(self.enc), scope_values)

    def meta(self) -> dict[str, Any]:
        """The status file: {"global": {KEY: {"status": ...}}, "namespaces": {ns: {...}}}."""
        if not self.meta_file.is_file():
            return {"global": {}, "namespaces": {}}
        try:
            data = yamlfile.load(self.meta_file.read_text(encoding="utf-8")) or {}
        except (OSError, ValueError, yamlfile.YAMLError) as exc:
            raise StoreCorrupt(f"{self.meta_file} cannot be read as YAML: {exc}") from None
        if not isinstance(data, dict):
            raise StoreCorrupt(f"{self.meta_file} must be a mapping with global: and namespaces:")
        return {"global": dict(data.get("global") or {}), "namespaces": dict(data.get("namespaces") or {})}

    def recipients(self) -> list[str]:
        return sopsfile.recipients(self._document()) if self.exists() else []

    def _stored(self, document: dict[str, Any] | None = None) -> dict[str, Any]:
        """The names that hold a value, from the encrypted file without decrypting it (see status.py)."""
        if document is None and not self.exists():
            return {"global": [], "namespaces": {}}
        return stored_names(self._document() if document is None else document, str(self.enc))

    def known(self, document: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every name's status (see status.py), in `meta()`'s shape."""
        return merged(self._stored(document), self.meta())

    def statuses(self, namespace: str | None = None, document: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """Status only, never a value: [{"key", "scope", "status"}]; `namespace` filters to that scope;
        `document`: the encrypted file already read."""
        check_namespace(namespace)
        known, rows = self.known(document), []
        if namespace is None:
            rows += [{"key": k, "scope": "global", "status": status_of(v)} for k, v in known["global"].items()]
        for ns, entries in sorted(known["namespaces"].items()):
            if namespace is None or ns == namespace:
                rows += [{"key": k, "scope": ns, "status": status_of(v)} for k, v in entries.items()]
        return rows

    def placeholders(self, document: dict[str, Any] | None = None) -> set[tuple[str, str]]:
        """(scope, key) of every placeholder; scope is "global" or a namespace name."""
        return {(e["scope"], e["key"]) for e in self.statuses(document=document) if e["status"] == "placeholder"}

    def check(self, namespace: str, declared: list[str]) -> dict[str, Any]:
        """Seed 000's `check_secrets`, without decrypting: which declared names are set, missing, or
        placeholders (a value in either scope counts; the namespace's own wins at injection)."""
        known = self.known()
        scoped, shared = known["namespaces"].get(namespace) or {}, known["global"]
        result: dict[str, Any] = {"namespace": namespace, "satisfied": [], "missing": [], "placeholders": []}
        for name in declared:
            statuses = [status_of(e) for e in (scoped.get(name), shared.get(name)) if e is not None]
            bucket = "satisfied" if "set" in statuses else "placeholders" if statuses else "missing"
            result[bucket].append(name)
        return result

    def resolve(self, namespace: str, declared: list[str], env_defaults: dict[str, str] | None = None) -> Resolved:
        """Values and status for one namespace (decrypts the store; see `resolve`)."""
        return resolve_namespace(*self.snapshot(), namespace, declared, env_defaults)

    def snapshot(self) -> tuple[dict[str, Any], set[tuple[str, str]]]:
        """`load_all()` and `placeholders()` from one reading of the file: the two agree even while
        `tooldock secrets` rewrites it, and a reload parses it once."""
        if not self.exists():
            return self.load_all(), self.placeholders()
        document = self._document()
        return by_scope(self._open(document).tree, str(self.enc), scope_values), self.placeholders(document)

    def values_for(
        self, namespace: str, declared: list[str], env_defaults: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Only the declared names: the namespace's scope over the global one over `env_defaults`."""
        return self.resolve(namespace, declared, env_defaults).values

    def secrets_status(
        self, namespace: str, declared: list[str], env_defaults: dict[str, str] | None = None
    ) -> SecretsStatus:
        """One of ok, missing, placeholders, no_secrets_needed (see `resolve`)."""
        return self.resolve(namespace, declared, env_defaults).status

    # -- writing ------------------------------------------------------------------------------------

    def init(self) -> str:
        """Make the identity (if there is none) and an empty store encrypted to it (if there is none, or
        add the identity as a recipient when it can already open the store); returns its recipient."""
        recipient = recipient_of(self.key_path) if self.key_path.is_file() else create_identity(self.key_path)
        with locked(self.lock):
            if not self.exists():
                self._write({"global": {}, "namespaces": {}}, [recipient], None)
            elif recipient not in self.recipients():
                opened = self._open()
                self._write(opened.tree, [*opened.recipients, recipient], opened.key, opened.meta)
        return recipient

    def _require(self) -> None:
        if not self.exists():
            raise InvalidSecretInput(
                f"there is no secrets store at {self.directory}: run `tooldock secrets init` first"
            )

    def _write(
        self, tree: dict[str, Any], recipients: list[str], key: bytes | None, carried: dict[str, Any] | None = None
    ) -> None:
        write_private(self.enc, yamlfile.dump(sopsfile.encrypt(tree, recipients, key, carried)))

    def _write_meta(self, meta: dict[str, Any]) -> None:
        write_private(self.meta_file, yamlfile.dump(meta))

    def _rewrite(self, opened: _Opened, recipients: list[str] | None = None) -> None:
        """Write the (changed) tree under the same data key."""
        self._write(opened.tree, recipients or opened.recipients, opened.key, opened.meta)

    def set(self, key: str, value: str, namespace: str | None = None) -> None:
        check_key(key), check_namespace(namespace), check_value(value)
        self._require()
        with locked(self.lock):
            opened = self._open()
            _scope(opened.tree, namespace, create=True)[key] = value
            self._rewrite(opened)
            meta = self.meta()
            _scope(meta, namespace, create=True)[key] = {"status": "set"}
            self._write_meta(meta)

    def prepare(self, key: str, namespace: str | None = None) -> bool:
        """A placeholder in the metadata (no value); False when the key already has a value."""
        check_key(key), check_namespace(namespace)
        with locked(self.lock):
            current = _scope(self.known(), namespace).get(key)  # a value, also one `sops` wrote: kept as it is
            if current is not None and status_of(current) == "set":
                return False
            meta = self.meta()
            scope = _scope(meta, namespace, create=True)
            scope[key] = {"status": "placeholder"}
            self._write_meta(meta)
            return True

    def remove(self, key: str, namespace: str | None = None) -> bool:
        """Remove the value and the status; False when neither was there."""
        check_key(key), check_namespace(namespace)
        with locked(self.lock):
            removed = False
            if self.exists():
                opened = self._open()
                if key in _scope(opened.tree, namespace):
                    del _scope(opened.tree, namespace)[key]
                    self._rewrite(opened)
                    removed = True
            meta = self.meta()
            if key in _scope(meta, namespace):
                del _scope(meta, namespace)[key]
                self._write_meta(meta)
                removed = True
            return removed

    def add_recipient(self, recipient: str) -> bool:
        """Encrypt the data key to one more age recipient; False when it already was."""
        recipient = check_recipient(recipient)
        self._require()
        with locked(self.lock):
            opened = self._open()
            if recipient in opened.recipients:
                return False
            self._rewrite(opened, [*opened.recipients, recipient])
            return True

    def rotate(self) -> None:
        """A new data key; every value is encrypted again, to the same age recipients."""
        self._require()
        with locked(self.lock):
            opened = self._open()
            foreign = [g for g in sopsfile.FOREIGN_KEY_GROUPS if opened.meta.get(g)]
            if foreign:
                raise SecretsError(
                    f"{self.enc} is also encrypted to {', '.join(foreign)} keys, which ToolDock cannot encrypt a "
                    "new data key to: rotate it with `sops rotate --in-place` instead"
                )
            self._write(opened.tree, opened.recipients, None)

    def replace(self, tree: dict[str, Any]) -> None:
        """Used by `edit`, which holds the lock: write new `global` and `namespaces` (other top-level keys of a
        sops-written file stay), then the metadata. Every key in the tree is `set`; a placeholder stays until
        a value arrives; any other key no longer in the tree goes."""
        opened = self._open()
        others = {k: v for k, v in opened.tree.items() if k not in ("global", "namespaces")}  # a sops user's keys
        opened.tree = {**tree, **others}
        self._rewrite(opened)
        fresh: dict[str, Any] = {"global": {}, "namespaces": {}}
        for key in tree.get("global") or {}:
            fresh["global"][key] = {"status": "set"}
        for ns, entries in (tree.get("namespaces") or {}).items():
            fresh["namespaces"][ns] = {key: {"status": "set"} for key in entries}
        for scope, key in self.placeholders():
            target = fresh["global"] if scope == "global" else fresh["namespaces"].setdefault(scope, {})
            target.setdefault(key, {"status": "placeholder"})
        self._write_meta(fresh)
