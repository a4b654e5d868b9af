"""Which values one namespace gets, and its secrets status, from the decrypted store.

A namespace gets only the names its `tooldock.yaml` declares (`secrets:`), each from the namespace's own
scope, else the global scope, else the folder's `env:` default. Its status is `no_secrets_needed` (it
declares none), `missing` (some declared name has no value and no placeholder anywhere), `placeholders`
(none missing, but some only prepared), else `ok`. Pure functions over `SecretStore.snapshot()` (its
`load_all()` and `placeholders()` from one reading), so a caller decrypts once for every namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

SecretsStatus = Literal["ok", "missing", "placeholders", "no_secrets_needed"]


@dataclass(frozen=True)
class Resolved:
    values: dict[str, str] = field(repr=False)  # never in a log line by accident
    status: SecretsStatus
    missing: tuple[str, ...] = ()
    placeholders: tuple[str, ...] = ()


def resolve_namespace(
    store_values: Mapping[str, Any],
    placeholders: Iterable[tuple[str, str]],
    namespace: str,
    declared: Iterable[str],
    env_defaults: Mapping[str, str] | None = None,
) -> Resolved:
    """`store_values` as `load_all()` returns it; `placeholders` as (scope, key) with scope "global" or a
    namespace name; `env_defaults` the folder's `env:`."""
    names = list(dict.fromkeys(declared))
    if not names:
        return Resolved({}, "no_secrets_needed")
    scoped = (store_values.get("namespaces") or {}).get(namespace) or {}
    shared = store_values.get("global") or {}
    defaults = env_defaults or {}
    prepared = set(placeholders)
    values: dict[str, str] = {}
    missing, waiting = [], []
    for name in names:
        for source in (scoped, shared, defaults):
            if isinstance(source.get(name), str):
                values[name] = source[name]
                break
        else:
            if (namespace, name) in prepared or ("global", name) in prepared:
                waiting.append(name)
            else:
                missing.append(name)
    status: SecretsStatus = "missing" if missing else "placeholders" if waiting else "ok"
    return Resolved(values, status, tuple(missing), tuple(waiting))
