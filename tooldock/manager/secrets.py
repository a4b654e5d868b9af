"""The four secrets tools (seed 000, "Secrets (values never pass through chat)"): status and placeholders only.

No function here takes or returns a value. Where a value is needed the answer names the command a person runs
in a terminal, `tooldock secrets set KEY [--namespace NS]`, which reads the value with echo off.
"""

from __future__ import annotations

from typing import Any

from tooldock.errors import InvalidInput, SecretsError
from tooldock.manager.declare import code_needs, declare, declared, undeclared
from tooldock.manager.workspace import Workspace
from tooldock.namespace.config import CONFIG_FILE
from tooldock.secrets import SecretStore
from tooldock.secrets.status import status_of
from tooldock.secrets.validate import check_key

HOW = "(in a terminal on the ToolDock machine; it asks for the value without echoing it)."


def set_command(key: str, namespace: str | None) -> str:
    return f"tooldock secrets set {key}" + (f" --namespace {namespace}" if namespace else "")


def _scope(namespace: str | None) -> str:
    return namespace or "global"


def _optional_namespace(ws: Workspace, namespace: object) -> str | None:
    return None if namespace in (None, "", "global") else ws.namespace_name(namespace)


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidInput("key must be a secret name such as GITHUB_TOKEN")
    return key


def _store_call(action: Any) -> Any:
    """Run one store operation; its refusals (a bad name, an unreadable store) become manager errors."""
    try:
        return action()
    except SecretsError as exc:
        raise InvalidInput(str(exc)) from None


def prepare_secret(ws: Workspace, store: SecretStore, key: object, namespace: object = None) -> dict[str, Any]:
    """A placeholder in the store; with a namespace, the name is also declared in its tooldock.yaml (so its
    worker receives the value). A name the global scope already has a value for is only declared: the
    namespace gets that value, and no placeholder of its own hides it from `list_secrets`."""
    name, scope = _key(key), _optional_namespace(ws, namespace)
    _store_call(lambda: check_key(name))  # before the name goes into tooldock.yaml (store.prepare checks again)
    answer: dict[str, Any] = {"key": name, "scope": _scope(scope)}
    command = set_command(name, scope)
    if scope is not None:
        answer["declared_in"] = declare(ws, scope, name)
        if _global_value(store, scope, name):
            return {
                **answer,
                "scope": "global",
                "status": "set",
                "meta_file": str(store.meta_file),
                "instructions": f"{name} has a global value, which namespace {scope} now receives: call "
                f"reload_core(). To give {scope} a value of its own instead, the user runs: {command} {HOW}",
            }
    created = _store_call(lambda: store.prepare(name, scope))
    first = "" if store.exists() else "tooldock secrets init (once: it creates the encrypted store), then "
    return {
        **answer,
        "status": "placeholder" if created else "set",
        "meta_file": str(store.meta_file),
        "instructions": (
            f"Run: {first}{command}" if created else f"{name} already has a value; to change it run: {command}"
        )
        + f" {HOW} Then call reload_core().",
    }


def _global_value(store: SecretStore, namespace: str, key: str) -> bool:
    """Whether `key` has a value in the global scope and none (not even a placeholder) in `namespace`'s."""
    known = _store_call(store.known)
    if key in (known["namespaces"].get(namespace) or {}):
        return False
    entry = known["global"].get(key)
    return entry is not None and status_of(entry) == "set"


def list_secrets(store: SecretStore, ws: Workspace, namespace: object = None) -> list[dict[str, str]]:
    scope = _optional_namespace(ws, namespace)
    rows: list[dict[str, str]] = _store_call(lambda: store.statuses(scope))
    return rows


def kept_after_delete(store: SecretStore, namespace: str) -> dict[str, Any]:
    """What delete_namespace adds: the secrets still in the store for that namespace's name (a namespace
    created again with the name gets them), with the calls that remove them; nothing when there are none
    or the store cannot be read (the folder is deleted either way)."""
    try:
        keys = [row["key"] for row in store.statuses(namespace)]
    except (SecretsError, OSError):
        return {}
    if not keys:
        return {}
    steps = [
        f"{key} stays in the secrets store for '{namespace}' (a namespace created again as '{namespace}' "
        f"receives it): call remove_secret('{key}', '{namespace}') if it is no longer needed"
        for key in keys
    ]
    return {"secrets_kept": keys, "next_steps": steps}


def remove_secret(ws: Workspace, store: SecretStore, key: object, namespace: object = None) -> dict[str, Any]:
    name, scope = _key(key), _optional_namespace(ws, namespace)
    removed = _store_call(lambda: store.remove(name, scope))
    return {"removed": bool(removed), "key": name, "scope": _scope(scope)}


def check_secrets(ws: Workspace, store: SecretStore, namespace: object) -> dict[str, Any]:
    name, names = declared(ws, namespace)
    result: dict[str, Any] = _store_call(lambda: store.check(name, names))
    result["undeclared"] = missed = undeclared(code_needs(ws, name), names)
    steps = [declare_step(key, name) for key in missed]
    steps += [
        f"{key}: call prepare_secret('{key}', '{name}'), then ask the user to run: {set_command(key, name)}"
        for key in result["missing"]
    ]
    steps += [f"{key}: ask the user to run: {set_command(key, name)}" for key in result["placeholders"]]
    if names and not steps:
        steps.append("every declared secret is set: call reload_core() and the namespace is ready")
    result["next_steps"] = steps
    return result


def declare_step(key: str, namespace: str) -> str:
    return (
        f"{key}: the code reads it but {namespace}/{CONFIG_FILE} does not declare it, so the worker does not "
        f"receive it: call prepare_secret('{key}', '{namespace}') (it declares it; a global value counts too)"
    )


def secrets_status(ws: Workspace, store: SecretStore, namespace: str) -> str:
    """`list_namespaces`'s secrets_status: ok | missing | placeholders | no_secrets_needed."""
    try:
        checked = check_secrets(ws, store, namespace)
    except InvalidInput:
        return "missing"
    if not (checked["satisfied"] or checked["missing"] or checked["placeholders"] or checked["undeclared"]):
        return "no_secrets_needed"
    if checked["missing"] or checked["undeclared"]:
        return "missing"
    return "placeholders" if checked["placeholders"] else "ok"
