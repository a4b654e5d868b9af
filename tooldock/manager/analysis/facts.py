"""What every language analyzer reports about one file, and the helpers they share: the parameter shape,
JSON-schema tables, the hosts of URL literals and which environment variables look like secrets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}

# Hosts of schema, specification and placeholder URLs: identifiers and links, not APIs a server calls.
NOT_APIS = {
    "json-schema.org",
    "www.w3.org",
    "w3.org",
    "schema.org",
    "schemas.xmlsoap.org",
    "purl.org",
    "xmlns.com",
    "spdx.org",
    "opensource.org",
    "www.apache.org",
    "modelcontextprotocol.io",
    "spec.modelcontextprotocol.io",
    "localhost",
    "127.0.0.1",
    "0.0.0.0",
}
PLACEHOLDER_HOST = re.compile(r"(^|\.)example\.(com|org|net)$|(^|\.)(example|test|invalid|localhost)$")

# A variable is a secret when one of its `_`-separated words is one of these (or ends with APIKEY, ...).
SECRET_WORDS = {
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "APIKEY",
    "PAT",
    "PASSPHRASE",
    "DSN",
    "COOKIE",
}
SECRET_SUFFIXES = ("APIKEY", "TOKEN", "SECRET", "PASSWORD", "_KEY")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HOST = re.compile(r"[A-Za-z0-9.-]+")


@dataclass
class Facts:
    """One file's findings. `tools` are dicts in analyze_repo's `tools_found` shape."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    env: set[str] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    frameworks: set[str] = field(default_factory=set)

    def merge(self, other: Facts) -> None:
        self.tools += other.tools
        self.env |= other.env
        self.hosts |= other.hosts
        self.frameworks |= other.frameworks


def param(
    name: str, type_: str = "string", description: str = "", required: bool = True, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": type_, "description": description, "required": required}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def tool(name: str, file: str, description: str, parameters: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "file": file, "description": description, "parameters": parameters}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def schema_type(schema: dict[str, Any]) -> str:
    """The JSON type of a property schema: `type` (its first non-null entry when a list), or inferred."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            kinds = [schema_type(o) for o in options if isinstance(o, dict) and o.get("type") != "null"]
            if kinds:
                return kinds[0]
    if "enum" in schema:
        return "string"
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "any"


def schema_params(schema: Any) -> list[dict[str, Any]] | None:
    """`{"type": "object", "properties": {...}, "required": [...]}` -> parameters; None when not such a schema.
    Values the analyzer could not evaluate are whatever the caller put there (non-dicts are kept as `any`)."""
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties")
    if props is None:
        return [] if schema.get("type") == "object" else None
    if not isinstance(props, dict):
        return None
    required = schema.get("required")
    required_names = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    out = []
    for name, prop in props.items():
        if not isinstance(name, str):
            continue
        prop = prop if isinstance(prop, dict) else {}
        desc = prop.get("description")
        enum = prop.get("enum")
        out.append(
            param(
                name,
                schema_type(prop),
                desc if isinstance(desc, str) else "",
                name in required_names,
                enum=enum if isinstance(enum, list) else None,
                default=prop.get("default"),
            )
        )
    return out


def url_host(text: str) -> str | None:
    """The host of a string that starts with an http(s) URL, unless it is a schema, docs or placeholder host."""
    if not text.startswith(("http://", "https://")):
        return None
    try:
        host = (urlsplit(text.split()[0]).hostname or "").lower()
    except ValueError:
        return None
    if not host or not HOST.fullmatch(host) or ("." not in host and host != "localhost"):
        return None
    if host in NOT_APIS or PLACEHOLDER_HOST.search(host):
        return None
    return host


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return bool(set(upper.split("_")) & SECRET_WORDS) or upper.endswith(SECRET_SUFFIXES)


def env_name(text: object) -> str | None:
    return text if isinstance(text, str) and ENV_NAME.fullmatch(text) else None
