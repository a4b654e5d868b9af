"""The keys file: one JSON document holding, for each API key, its id, name, scope, globs, created,
expires, last used and revoked times, and the SHA-256 of the key. Never the key: it is printed once by
`tooldock keys create` and cannot be recovered.

    {"version": 1, "keys": [{"id": "3f9c0a1b2c4d", "hash": "sha256:...", "name": "ci", "scope": "read", ...}]}

A key is `tdk_<id>_<secret>`: the id finds the record, the 256-bit secret makes a plain SHA-256 enough
(no password stretching needed for a random key). The file is `keys.json` in `TOOLDOCK_KEYS_DIR`, else in
`~/.config/tooldock/keys/`: 0600 in a 0700 directory (ToolDock's own: it is made private), replaced
atomically, and every read-modify-write holds `keys.lock` beside it. `check` looks at the file on every
call: it reads it again whenever it changed (its inode, size, modification or change time differ from the
last read; a write replaces the file, so each one changes them) or that read is a second old, else it
uses what it read then. So a revoked or expired key fails at once, in every gateway that shares the file,
and a request made with a key costs one `stat` when nothing changed (`check_fresh`, cheap enough for the
event loop), not a read and a parse of every key. The writers (create, revoke, touch) always read the
file itself, under the lock.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tooldock.errors import InvalidApiKey, KeysError
from tooldock.keys.scope import ApiKey
from tooldock.keys.validate import (
    ID_RE,
    KEY_PREFIX,
    check_id,
    check_name,
    check_namespace_glob,
    check_scope,
    check_tool_glob,
)
from tooldock.secrets.files import locked, write_private

VERSION = 1
_Keys = dict[str, list[tuple[str, ApiKey]]]  # id -> (stored hash, key) for each record with that id
REREAD_AFTER = 1.0  # seconds: the file is read again at least this often while keys are checked
TOUCH_EVERY = timedelta(seconds=60)  # `last_used` is kept to the minute: no file write on every call
REFUSED = "invalid or expired API key"


def default_dir() -> Path:
    if os.environ.get("TOOLDOCK_KEYS_DIR"):
        return Path(os.environ["TOOLDOCK_KEYS_DIR"]).expanduser().absolute()
    return Path.home() / ".config" / "tooldock" / "keys"


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def file_signature(path: Path) -> tuple[int, int, int, int] | None:
    """What changes whenever the keys file at `path` is written (each write replaces it): its inode, size,
    modification and change times; None when there is no file. Other failures to look raise OSError."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def _digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _time(value: Any, field: str, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise KeysError(f"{where}: {field} {str(value)[:40]!r} is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _ceil_second(when: datetime) -> datetime:
    whole = when.replace(microsecond=0)
    return whole if whole == when else whole + timedelta(seconds=1)


def _stamp(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when is not None else None


class KeyStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path, self.lock = directory / "keys.json", directory / "keys.lock"
        # the file's signature at the last read, when that read started (monotonic), and its keys
        self._read: tuple[Any, float, _Keys] | None = None

    @classmethod
    def from_env(cls) -> KeyStore:
        return cls(default_dir())

    def __repr__(self) -> str:
        return f"KeyStore({str(self.directory)!r})"

    # -- the file -----------------------------------------------------------------------------------

    def _records(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise KeysError(f"{self.path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise KeysError(f"{self.path} is not valid JSON ({exc}); restore it or remove it") from None
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise KeysError(f'{self.path} is not a ToolDock keys file (no "keys" list)')
        if document.get("version") != VERSION:
            raise KeysError(f"{self.path} has version {document.get('version')!r}; this ToolDock reads {VERSION}")
        records = document["keys"]
        for index, record in enumerate(records):
            self._key(record, index)  # every record checked, so a bad one is reported, not skipped
        return records

    def _signature(self) -> Any:
        """`file_signature` of the keys file; a file that cannot be looked at is a KeysError."""
        try:
            return file_signature(self.path)
        except OSError as exc:
            raise KeysError(f"{self.path} cannot be read: {exc.strerror or exc}") from None

    def _fresh(self, signature: Any) -> _Keys | None:
        """The keys of the last read if the file still has its `signature` and the read is under REREAD_AFTER
        seconds old (two writes of the same size within one tick of the file system's clock that reuse the
        inode would leave the signature as it was: such a change is seen within that time)."""
        read = self._read
        if read is None or read[0] != signature or time.monotonic() - read[1] >= REREAD_AFTER:
            return None
        return read[2]

    def _keys(self, signature: Any) -> _Keys:
        """Every key with its hash, by id, read again unless `_fresh`. (A file replaced between the stat and
        the read is kept under the older signature: it is read once more.)"""
        fresh = self._fresh(signature)
        if fresh is not None:
            return fresh
        started = time.monotonic()
        keys: _Keys = {}
        for index, record in enumerate(self._records()):
            keys.setdefault(record["id"], []).append((record["hash"], self._key(record, index)))
        self._read = (signature, started, keys)
        return keys

    def _write(self, records: list[dict[str, Any]]) -> None:
        data = json.dumps({"version": VERSION, "keys": records}, indent=2) + "\n"
        write_private(self.path, data.encode())

    def _key(self, record: Any, index: int) -> ApiKey:
        where = f"{self.path}: key #{index + 1}"
        if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not ID_RE.fullmatch(record["id"]):
            raise KeysError(f"{where} has no valid id")
        where = f"{self.path}: key {record['id']}"
        if not isinstance(record.get("hash"), str) or not record["hash"].startswith("sha256:"):
            raise KeysError(f"{where} has no sha256 hash")
        namespaces, tools = record.get("namespaces") or [], record.get("tools") or []
        if not isinstance(namespaces, list) or not isinstance(tools, list):
            raise KeysError(f"{where}: namespaces and tools must be lists of globs")
        try:
            return ApiKey(
                id=record["id"],
                name=check_name(str(record.get("name", ""))),
                scope=check_scope(str(record.get("scope", ""))),
                namespaces=tuple(check_namespace_glob(str(g)) for g in namespaces),
                tools=tuple(check_tool_glob(str(g)) for g in tools),
                created=_time(record.get("created"), "created", where),
                expires=_time(record.get("expires"), "expires", where),
                last_used=_time(record.get("last_used"), "last_used", where),
                revoked=_time(record.get("revoked"), "revoked", where),
                rate=_rate(record.get("rate"), where),
            )
        except KeysError as exc:
            raise KeysError(f"{where}: {exc}") from None

    # -- operations ---------------------------------------------------------------------------------

    def create(
        self,
        name: str,
        scope: str,
        namespaces: tuple[str, ...] = (),
        tools: tuple[str, ...] = (),
        expires_in: float | None = None,
        rate: float | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key: its record is stored, the key itself is returned once and never kept."""
        record: dict[str, Any] = {
            "id": "",
            "hash": "",
            "name": check_name(name),
            "scope": check_scope(scope),
            "namespaces": sorted({check_namespace_glob(g) for g in namespaces}),
            "tools": sorted({check_tool_glob(g) for g in tools}),
        }
        moment = datetime.now(UTC)
        record["created"] = _stamp(moment.replace(microsecond=0))
        # Times are stored to the second; the expiry rounds up, so a key lives at least what was asked.
        record["expires"] = _stamp(_ceil_second(moment + timedelta(seconds=expires_in))) if expires_in else None
        record["last_used"] = record["revoked"] = None
        if rate is not None:
            record["rate"] = _rate(rate, "--rate")
        with locked(self.lock):
            records = self._records()
            taken = {r["id"] for r in records}
            key_id = secrets.token_hex(6)
            while key_id in taken:
                key_id = secrets.token_hex(6)
            key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
            record["id"], record["hash"] = key_id, _digest(key)
            self._write([*records, record])
        return self._key(record, len(records)), key

    def list(self) -> list[ApiKey]:
        return [self._key(r, i) for i, r in enumerate(self._records())]

    def revoke(self, key_id: str) -> ApiKey:
        key_id = check_id(key_id)
        with locked(self.lock):
            records = self._records()
            for index, record in enumerate(records):
                if record["id"] == key_id:
                    if record.get("revoked") is None:
                        record["revoked"] = _stamp(now_utc())
                        self._write(records)
                    return self._key(record, index)
        raise KeysError(f"no API key with id {key_id} in {self.path} (tooldock keys list shows the ids)")

    def check(self, presented: str, now: datetime | None = None) -> ApiKey:
        """The key's record if `presented` is a key of this store that is neither revoked nor expired;
        otherwise `InvalidApiKey`. Reads the file when it changed since the last read."""
        key_id = self._key_id(presented)
        try:
            keys = self._keys(self._signature())
        except KeysError as exc:  # fail closed; the reason is for the operator, not the caller
            print(f"tooldock: refusing API key {key_id}: {exc}", file=sys.stderr, flush=True)
            raise InvalidApiKey(
                f"{REFUSED}: the gateway cannot read its keys file right now (its log says why)"
            ) from None
        return self._verdict(keys, key_id, presented, now)

    def check_fresh(self, presented: str, now: datetime | None = None) -> ApiKey | None:
        """`check` without reading the file: None when it changed since the last read (or cannot be looked
        at), and `check` must read it (off the event loop)."""
        key_id = self._key_id(presented)
        try:
            signature = self._signature()
        except KeysError:
            return None
        fresh = self._fresh(signature)
        return self._verdict(fresh, key_id, presented, now) if fresh is not None else None

    @staticmethod
    def _key_id(presented: str) -> str:
        key_id, _, secret = presented.removeprefix(KEY_PREFIX).partition("_")
        if not presented.startswith(KEY_PREFIX) or not ID_RE.fullmatch(key_id) or not secret:
            raise InvalidApiKey(f"{REFUSED}: not a ToolDock API key (they start with {KEY_PREFIX})")
        return key_id

    @staticmethod
    def _verdict(keys: _Keys, key_id: str, presented: str, now: datetime | None) -> ApiKey:
        digest = _digest(presented)
        for stored, key in keys.get(key_id, ()):
            if hmac.compare_digest(stored, digest):
                state = key.state(now or now_utc())
                if state != "active":
                    raise InvalidApiKey(f"{REFUSED}: API key {key_id} is {state}", {"key_id": key_id})
                return key
        raise InvalidApiKey(f"{REFUSED}: no such key (tooldock keys create makes one)")

    def active(self, key_ids: Iterable[str], now: datetime | None = None) -> set[str]:
        """Which of `key_ids` (of keys checked before) are still keys of this store, neither revoked nor
        expired: one look at the file (a read when it changed). A file that exists but cannot be read (or is not
        a keys file) raises KeysError: that says nothing of any key (a missing file does: it holds none)."""
        now, keys = now or now_utc(), self._keys(self._signature())
        return {key_id for key_id in set(key_ids) if any(k.state(now) == "active" for _, k in keys.get(key_id, ()))}

    @staticmethod
    def touch_due(key: ApiKey, now: datetime | None = None) -> bool:
        """Whether `touch` would write: `last_used` is kept to the minute."""
        return key.last_used is None or (now or now_utc()) - key.last_used >= TOUCH_EVERY

    def touch(self, key: ApiKey, now: datetime | None = None) -> bool:
        """Record that `key` was used, at most once a minute per key; True when the file was written."""
        now = now or now_utc()
        if not self.touch_due(key, now):
            return False
        with locked(self.lock):
            records = self._records()
            for record in records:
                if record["id"] == key.id:
                    record["last_used"] = _stamp(now)
                    self._write(records)
                    return True
        return False


def _rate(raw: object, where: str) -> float | None:
    """A key's rate limit: calls per second, a positive finite number (None: no limit)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw < 1e9:
        raise KeysError(f"{where}: rate must be a positive number of calls per second, e.g. 5 or 0.5")
    return float(raw)
