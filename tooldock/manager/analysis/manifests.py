"""A repository's declared dependencies, `{name: spec}`: package.json `dependencies` (and
`peerDependencies`), pyproject.toml `[project] dependencies` (and Poetry's table), requirements*.txt, and
go.mod's `require` lines. Development and test dependencies are left out. Manifests at the root win over
nested ones with the same package; malformed manifests are skipped."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from tooldock.manager.analysis.walk import read_text

MAX_DEPENDENCIES = 300


def _package_json(text: str) -> dict[str, str]:
    data = json.loads(text)
    out: dict[str, str] = {}
    for key in ("dependencies", "peerDependencies"):
        table = data.get(key) if isinstance(data, dict) else None
        if isinstance(table, dict):
            out.update({str(k): str(v) for k, v in table.items() if isinstance(v, str)})
    return out


def _requirement(line: str) -> tuple[str, str] | None:
    line = line.split(" #", 1)[0].strip()
    if not line or line.startswith(("#", "-")):
        return None
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    spec = str(req.specifier) or "*"
    if req.extras:
        spec = f"[{','.join(sorted(req.extras))}]{spec}"
    return req.name, spec


def _pyproject(text: str) -> dict[str, str]:
    data: dict[str, Any] = tomllib.loads(text)
    out: dict[str, str] = {}
    for line in data.get("project", {}).get("dependencies", []) or []:
        found = _requirement(str(line))
        if found:
            out[found[0]] = found[1]
    poetry = data.get("tool", {}).get("poetry", {}).get("dependencies", {})
    if isinstance(poetry, dict):
        for name, spec in poetry.items():
            if name != "python":
                out[str(name)] = spec if isinstance(spec, str) else str(spec.get("version", "*"))
    return out


def _requirements_txt(text: str) -> dict[str, str]:
    return dict(found for found in map(_requirement, text.splitlines()) if found)


def _go_mod(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    block = False
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("require ("):
            block = True
            continue
        if block and line == ")":
            block = False
            continue
        if line.startswith("require "):
            line = line[len("require ") :].strip()
        elif not block:
            continue
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = parts[1]
    return out


READERS = {"package.json": _package_json, "pyproject.toml": _pyproject, "go.mod": _go_mod}


def dependencies(manifests: dict[str, Path]) -> dict[str, str]:
    """Dependencies from the manifests found (deepest first, so the root's entries win)."""
    out: dict[str, str] = {}
    for rel in sorted(manifests, key=lambda r: (-r.count("/"), r)):
        parts = rel.split("/")
        if any(p in ("test", "tests", "examples", "example", "fixtures", "testdata") for p in parts[:-1]):
            continue
        name = parts[-1]
        reader = READERS.get(name)
        if reader is None and name.startswith("requirements") and name.endswith(".txt") and "dev" not in name:
            reader = _requirements_txt
        text = read_text(manifests[rel]) if reader else None
        if reader is None or text is None:
            continue
        try:
            out.update(reader(text))
        except (ValueError, tomllib.TOMLDecodeError, AttributeError, TypeError, RecursionError):
            continue
    return dict(list(out.items())[:MAX_DEPENDENCIES])
