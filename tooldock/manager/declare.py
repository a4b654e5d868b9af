"""Secret names a namespace needs against the ones its `tooldock.yaml` declares (`secrets: [NAME]`), the
list that decides which secrets its worker receives (DESIGN: a worker gets only what it declares).

- `code_needs` / `undeclared`: names the namespace's code reads from the environment (`os.environ["X"]`,
  `os.getenv("X")`, found by the repository analysis, which reads and never runs code) that look like
  secrets and are not declared: its worker would not receive them.
- `declare`: adds a name to the list. prepare_secret calls it, since no manager tool writes `tooldock.yaml`
  otherwise. The file is edited with ruamel.yaml's round trip, so a person's comments, key order and quoting
  stay (PyYAML would drop the comments); the result is checked with the namespace's own parser, then written
  in one step (a temporary file renamed over it, with the file's permissions).
"""

from __future__ import annotations

import io
from collections.abc import Collection
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from tooldock.atomic import atomic_write
from tooldock.errors import AnalysisError, InvalidInput
from tooldock.manager.analysis.tree import analyze_tree
from tooldock.manager.workspace import Workspace
from tooldock.namespace.config import CONFIG_FILE, ConfigError, parse_config, read_config
from tooldock.namespace.models import NamespaceConfig
from tooldock.namespace.toolsfile import TOOLS_FILE, UpstreamConfig, declared_secrets, read_tools_file


def declarations(ws: Workspace, namespace: object) -> tuple[str, NamespaceConfig, UpstreamConfig | None]:
    """The namespace's name, its tooldock.yaml (InvalidInput if the file is broken) and its tools.toml (None
    when it has none or it does not parse: the gateway reports that)."""
    folder = ws.namespace_dir(namespace)
    ws.metadata_file(folder.name, CONFIG_FILE)  # refused when it is a link out of the folder
    config, problem = read_config(folder)
    if problem is not None:
        raise InvalidInput(f"{folder.name}/{CONFIG_FILE} is invalid: {problem.message}; fix it first")
    servers = ws.metadata_file(folder.name, TOOLS_FILE)  # the same check
    upstream, _ = read_tools_file(folder) if servers.is_file() else (None, None)
    return folder.name, config, upstream


def declared(ws: Workspace, namespace: object) -> tuple[str, list[str]]:
    """The namespace's name and every secret it declares, as the gateway counts them (namespace/scanner.py):
    its tooldock.yaml's and those its tools.toml's servers refer to (`${secret:NAME}`)."""
    name, config, upstream = declarations(ws, namespace)
    return name, list(declared_secrets(config.secrets, upstream))


def code_needs(ws: Workspace, namespace: str) -> dict[str, Any]:
    """The repository analysis of the namespace's folder (`secrets_needed`, `apis_called`, ...), or {}."""
    try:
        return analyze_tree(ws.namespace_dir(namespace))
    except AnalysisError:
        return {}


def undeclared(needs: dict[str, Any], names: Collection[str]) -> list[str]:
    """Secret-like names the code reads from the environment (`needs`: `code_needs`) not among `names`."""
    return [name for name in needs.get("secrets_needed") or () if name not in names]


def declare(ws: Workspace, namespace: str, key: str) -> str:
    """Add `key` to the namespace's `secrets:` list (unless either file declares it already); the file that
    declares it, as `namespace/file`."""
    name, config, upstream = declarations(ws, namespace)
    where = f"{name}/{CONFIG_FILE}"
    if key in config.secrets:
        return where
    if upstream is not None and key in upstream.secret_names():
        return f"{name}/{TOOLS_FILE}"
    path = ws.metadata_file(name, CONFIG_FILE)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    rt = YAML()
    rt.preserve_quotes = True
    rt.indent(mapping=2, sequence=4, offset=2)
    try:
        data: Any = rt.load(text)
    except YAMLError as exc:  # PyYAML read it (above); ruamel is stricter in a few corners
        raise InvalidInput(f"{name}/{CONFIG_FILE} cannot be edited ({exc}); add {key} to its secrets by hand") from None
    if data is None:  # empty, or comments only: they stay, the list goes after them
        new = text + ("" if not text or text.endswith("\n") else "\n") + f"secrets:\n  - {key}\n"
    else:
        if not isinstance(data, CommentedMap):
            raise InvalidInput(f"{name}/{CONFIG_FILE} is not a mapping; fix it first")
        if data.get("secrets") is None:
            data["secrets"] = [key]
        else:
            data["secrets"].append(key)
        out = io.StringIO()
        rt.dump(data, out)
        new = out.getvalue()
    try:  # what the gateway will read: the namespace's own parser, on PyYAML's reading of the new text
        config = parse_config(yaml.safe_load(new))
    except (yaml.YAMLError, ConfigError) as exc:
        raise InvalidInput(f"{name}/{CONFIG_FILE} cannot take {key} ({exc}); add it by hand") from None
    if key not in config.secrets:
        raise InvalidInput(f"{name}/{CONFIG_FILE} cannot take {key}; add it to its secrets by hand")
    mode = path.stat().st_mode & 0o777 if path.is_file() else 0o644
    atomic_write(path, new.encode("utf-8"), mode)
    return where
