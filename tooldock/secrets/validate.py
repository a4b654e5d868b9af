"""What the store accepts: secret names, namespace names, values, and the tree `edit` hands back.

Every refusal is `InvalidSecretInput` (or `EditFailed` for an edited file) naming the key or path that is
wrong, never a value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tooldock.errors import EditFailed, InvalidSecretInput, StoreCorrupt
from tooldock.namespace.names import ENV_NAME_RE, NamespaceNameError, validate_namespace_name
from tooldock.secrets.cipher import go_float
from tooldock.secrets.sopsfile import UNENCRYPTED_SUFFIX

KEY_RE = ENV_NAME_RE  # a secret reaches its tool as an environment variable
MAX_KEY_LEN = 128
MAX_VALUE_BYTES = 64 * 1024


def check_key(key: str) -> str:
    if not KEY_RE.fullmatch(key) or len(key) > MAX_KEY_LEN:
        raise InvalidSecretInput(f"{key[:80]!r} is not a valid secret name: use letters, digits and _ (GITHUB_TOKEN)")
    if key.endswith(UNENCRYPTED_SUFFIX):
        raise InvalidSecretInput(
            f"{key!r} ends in {UNENCRYPTED_SUFFIX}, which sops's format leaves unencrypted; choose another name"
        )
    return key


def check_namespace(namespace: str | None) -> str | None:
    if namespace is not None:
        try:
            validate_namespace_name(namespace)
        except NamespaceNameError as exc:
            raise InvalidSecretInput(str(exc)) from None
    return namespace


def check_value(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidSecretInput("the value is empty: nothing was stored")
    if "\x00" in value or len(value.encode()) > MAX_VALUE_BYTES:
        raise InvalidSecretInput(f"the value must be text without NUL bytes, at most {MAX_VALUE_BYTES} bytes")
    return value


def as_text(value: Any, where: str) -> str | None:
    """A stored value as the environment variable text a worker gets (sops files may hold ints, floats,
    booleans: written as `sops --decrypt` prints them); None for a null. Lists and mappings are refused."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    raise StoreCorrupt(f"{where} holds a {type(value).__name__}, not a single value")


def by_scope(tree: dict[str, Any], where: str, read: Callable[[Any, str], Any]) -> dict[str, Any]:
    """`read(scope, its name)` of each scope of a store tree (decrypted or not): {"global": ..., "namespaces":
    {ns: ...}}; StoreCorrupt naming `where` when `namespaces` is not a mapping."""
    spaces = tree.get("namespaces") or {}
    if not isinstance(spaces, dict):
        raise StoreCorrupt(f"{where}: namespaces must be a mapping of namespace: {{KEY: value}}")
    return {
        "global": read(tree.get("global"), "global"),
        "namespaces": {str(ns): read(v, f"namespaces.{ns}") for ns, v in spaces.items()},
    }


def scope_values(raw: Any, where: str) -> dict[str, str]:
    """One scope (`global`, or one namespace) of a decrypted file as {KEY: text}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise StoreCorrupt(f"{where} must be a mapping of KEY: value")
    values = {}
    for key, value in raw.items():
        text = as_text(value, f"{where}.{key}")
        if text is not None:
            values[str(key)] = text
    return values


def edited_tree(data: Any) -> dict[str, Any]:
    """The edited file in the store's shape, or EditFailed naming what is wrong (never a value)."""
    if data is None:
        data = {}
    if not isinstance(data, dict) or set(data) - {"global", "namespaces"}:
        raise EditFailed("the file must be a mapping with only `global:` and `namespaces:`")
    tree: dict[str, Any] = {"global": {}, "namespaces": {}}
    try:
        tree["global"] = _edited_scope(data.get("global"), "global")
        spaces = data.get("namespaces") or {}
        if not isinstance(spaces, dict):
            raise EditFailed("`namespaces:` must be a mapping of namespace: {KEY: value}")
        for namespace, entries in spaces.items():
            check_namespace(str(namespace))
            tree["namespaces"][str(namespace)] = _edited_scope(entries, f"namespaces.{namespace}")
    except InvalidSecretInput as exc:
        raise EditFailed(f"invalid edit: {exc}") from None
    return tree


def _edited_scope(entries: Any, where: str) -> dict[str, str]:
    if entries is None:
        return {}
    if not isinstance(entries, dict):
        raise EditFailed(f"{where} must be a mapping of KEY: value")
    scope = {}
    for key, value in entries.items():
        if not isinstance(value, str):
            raise EditFailed(f"{where}.{key} must be a string (quote it)")
        scope[check_key(str(key))] = check_value(value)
    return scope
