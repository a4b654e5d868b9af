"""Generated parts read off the configuration the code reads: environment variables (`settings GROUP`, from
each module's SETTINGS) and the namespace files' JSON Schemas (`schema FILE`, shipped in the package)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from tooldock_docs.registry import MarkerError, kind, table

# Marker argument -> the module whose SETTINGS, SETTINGS_TITLE and SETTINGS_INTRO it shows.
GROUPS = {
    "gateway": "tooldock.runtime.settings",
    "relay": "tooldock.runtime.relay.config",
    "secrets": "tooldock.secrets",
    "keys": "tooldock.keys",
    "oauth": "tooldock.oauth",
    "builder": "tooldock.builder",
    "manager": "tooldock.manager.settings",
    "analysis": "tooldock.manager.analysis.fetch",
    "relay-client": "tooldock.cli.relay",
    "network": "tooldock.worker.tls",
}
SCHEMA_URL = "https://tooldock.dev/schemas/"


@kind("settings", required=lambda: list(GROUPS))
def settings_part(args: list[str]) -> str:
    """`<!-- tooldock:settings GROUP -->`: a heading, the group's introduction and a table of its variables."""
    if len(args) != 1 or args[0] not in GROUPS:
        raise MarkerError(f"name one group: {', '.join(GROUPS)}")
    module = importlib.import_module(GROUPS[args[0]])
    rows = [[f"`{s.name}`", s.default, s.meaning] for s in module.SETTINGS]
    return f"## {module.SETTINGS_TITLE}\n\n{module.SETTINGS_INTRO}\n\n" + table(
        ["variable", "default", "meaning"], rows
    )


def _schemas() -> dict[str, dict[str, Any]]:
    from tooldock.namespace import schemas

    return {name: schemas.load(name) for name in schemas.SCHEMAS}


def write_schemas(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, schema in _schemas().items():
        (folder / f"{name}.schema.json").write_text(json.dumps(schema, indent=2) + "\n")


def _type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "anyOf" in prop or "oneOf" in prop:
        return " or ".join(_type(p) for p in prop.get("anyOf", prop.get("oneOf", [])))
    kind_ = prop.get("type", "any")
    kind_ = " or ".join(kind_) if isinstance(kind_, list) else kind_
    if kind_ == "array" and isinstance(prop.get("items"), dict):
        return f"array of {_type(prop['items'])}"
    return str(kind_)


def _rows(schema: dict[str, Any], root: dict[str, Any], prefix: str = "") -> list[list[object]]:
    rows: list[list[object]] = []
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        if "$ref" in prop:
            prop = {**_resolve(root, prop["$ref"]), **{k: v for k, v in prop.items() if k != "$ref"}}
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        key = f"`{prefix}{name}`"
        rows.append([key, _type(prop), "yes" if name in required else "", default, prop.get("description", "")])
        if prop.get("type") == "object" and "properties" in prop:
            rows.extend(_rows(prop, root, f"{prefix}{name}."))
        items = prop.get("items")
        if isinstance(items, dict) and "$ref" in items:
            items = _resolve(root, items["$ref"])
        if isinstance(items, dict) and items.get("type") == "object" and "properties" in items:
            rows.extend(_rows(items, root, f"{prefix}{name}[]."))
    return rows


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise MarkerError(f"only local $refs are shown; found {ref}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return dict(node)


@kind("schema", required=lambda: sorted(_schemas()))
def schema_part(args: list[str]) -> str:
    """`<!-- tooldock:schema FILE -->`: every key of FILE's JSON Schema, and where the schema is."""
    schemas = _schemas()
    if len(args) != 1 or args[0] not in schemas:
        raise MarkerError(f"name one file: {', '.join(schemas)}")
    schema = schemas[args[0]]
    rows = _rows(schema, schema)
    return (
        schema.get("description", "")
        + "\n\n"
        + table(["key", "type", "required", "default", "meaning"], rows)
        + f'\nThe schema: <a href="../schemas/{args[0]}.schema.json">{args[0]}.schema.json</a> '
        + f"(`$id` `{schema.get('$id', '')}`), also shipped in the package as "
        + f"`tooldock/namespace/schemas/{args[0]}.schema.json`.\n"
    )
