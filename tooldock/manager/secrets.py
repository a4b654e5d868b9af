"""The four secrets tools (seed 000, "Secrets (values never pass through chat)"): status and placeholders only.

No function here takes or returns a value. Where a value is needed the answer names the command a person runs
in a terminal, `tooldock secrets set KEY [--namespace NS]`, which reads the value with echo off.
"""

from __future__ import annotations

from typing import Any

from tooldock.errors import InvalidInput, SecretsError
from tooldock.manager.workspace import Workspace
from tooldock.namespace.config import read_config
from tooldock.secrets import SecretStore


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
    name, scope = _key(key), _optional_namespace(ws, namespace)
    created = _store_call(lambda: store.prepare(name, scope))
    command = set_command(name, scope)
    return {
        "key": name,
        "scope": _scope(scope),
        "status": "placeholder" if created else "set",
        "meta_file": str(store.meta_file),
        "instructions": (f"Run: {command}" if created else f"{name} already has a value; to change it run: {command}")
        + " (in a terminal on the ToolDock machine; it asks for the value without echoing it). "
        "Then call reload_core().",
    }


def list_secrets(store: SecretStore, ws: Workspace, namespace: object = None) -> list[dict[str, str]]:
    scope = _optional_namespace(ws, namespace)
    rows: list[dict[str, str]] = _store_call(lambda: store.statuses(scope))
    return rows


def remove_secret(ws: Workspace, store: SecretStore, key: object, namespace: object = None) -> dict[str, Any]:
    name, scope = _key(key), _optional_namespace(ws, namespace)
    removed = _store_call(lambda: store.remove(name, scope))
    return {"removed": bool(removed), "key": name, "scope": _scope(scope)}


def declared_secrets(ws: Workspace, namespace: object) -> tuple[str, list[str]]:
    path = ws.metadata_file(namespace, "tooldock.yaml")  # refused when it is a link out of the folder
    folder = path.parent
    config, problem = read_config(folder)
    if problem is not None:
        raise InvalidInput(f"{folder.name}/tooldock.yaml is invalid: {problem.message}; fix it first")
    return folder.name, list(config.secrets)


def check_secrets(ws: Workspace, store: SecretStore, namespace: object) -> dict[str, Any]:
    name, declared = declared_secrets(ws, namespace)
    result: dict[str, Any] = _store_call(lambda: store.check(name, declared))
    steps = [
        f"{key}: call prepare_secret('{key}', '{name}'), then ask the user to run: {set_command(key, name)}"
        for key in result["missing"]
    ]
    steps += [f"{key}: ask the user to run: {set_command(key, name)}" for key in result["placeholders"]]
    if declared and not steps:
        steps.append("every declared secret is set: call reload_core() and the namespace is ready")
    result["next_steps"] = steps
    return result


def secrets_status(ws: Workspace, store: SecretStore, namespace: str) -> str:
    """`list_namespaces`'s secrets_status: ok | missing | placeholders | no_secrets_needed."""
    try:
        checked = check_secrets(ws, store, namespace)
    except InvalidInput:
        return "missing"
    if not (checked["satisfied"] or checked["missing"] or checked["placeholders"]):
        return "no_secrets_needed"
    return "missing" if checked["missing"] else "placeholders" if checked["placeholders"] else "ok"
