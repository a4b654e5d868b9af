"""Which secret names are set and which are placeholders, never a value, without decrypting anything.

A name is `set` when the encrypted file holds a value for it: sops keeps the names in clear, so a value
added or removed with `sops` alone counts at once. It is a `placeholder` when `secrets.meta.yaml` prepared
it and no value has come yet. The metadata's own `set` marks (written by ToolDock next to each value) are
not trusted on their own: a name `sops` removed is gone even if ToolDock had set it.
"""

from __future__ import annotations

from typing import Any

from tooldock.errors import StoreCorrupt
from tooldock.secrets.validate import by_scope


def status_of(entry: Any) -> str:
    status = entry.get("status") if isinstance(entry, dict) else None
    return "placeholder" if status == "placeholder" else "set"


def stored_names(document: dict[str, Any], where: str) -> dict[str, Any]:
    """The names that hold a value in a sops document: {"global": [KEY, ...], "namespaces": {ns: [KEY, ...]}}."""
    return by_scope(document, where, _names)


def merged(stored: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The statuses in the metadata's shape ({"global": {KEY: {"status": ...}}, "namespaces": {ns: {...}}}):
    the metadata's order first, then names only the encrypted file has."""
    scopes = [("global", stored["global"], meta["global"])]
    for ns in sorted({*stored["namespaces"], *meta["namespaces"]}):
        scopes.append((ns, stored["namespaces"].get(ns) or [], meta["namespaces"].get(ns) or {}))
    tree: dict[str, Any] = {"global": {}, "namespaces": {}}
    for scope, names, recorded in scopes:
        entries: dict[str, Any] = {}
        for key, entry in recorded.items():
            if key in names or status_of(entry) == "placeholder":
                entries[key] = {"status": "set" if key in names else "placeholder"}
        entries.update({key: {"status": "set"} for key in names if key not in entries})
        if scope == "global":
            tree["global"] = entries
        elif entries:
            tree["namespaces"][scope] = entries
    return tree


def _names(raw: Any, where: str) -> list[str]:
    """One scope's names that hold a value (a null is none, as the decrypted store reads it)."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise StoreCorrupt(f"{where} must be a mapping of KEY: value")
    return [str(key) for key, value in raw.items() if value is not None]
