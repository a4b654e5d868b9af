"""JSON Schemas (draft 2020-12) of a namespace's two config files, shipped in the package for editors (the YAML
language server, Taplo) and the docs. `tooldock/namespace/config.py` and `toolsfile.py` stay the authority: the
schemas describe what they accept, and tests/test_schemas.py checks that the two agree."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

# The file each config file's schema is in, next to this module.
SCHEMAS = {
    "tooldock.yaml": "tooldock.yaml.schema.json",
    "tools.toml": "tools.toml.schema.json",
}


def load(name: str) -> dict[str, Any]:
    """The schema of config file `name` ("tooldock.yaml" or "tools.toml"), parsed."""
    if name not in SCHEMAS:
        raise KeyError(f"no schema for {name!r}; there are schemas for {', '.join(SCHEMAS)}")
    schema: dict[str, Any] = json.loads((files(__name__) / SCHEMAS[name]).read_text(encoding="utf-8"))
    return schema
