"""Names a user chooses: namespace names and tool file names."""

from __future__ import annotations

import re
import sys

NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MAX_NAMESPACE_LEN = 63  # a DNS label: namespaces become image names and socket file names
RESERVED = frozenset({"_system"})
MAX_FILENAME_BYTES = 200  # file systems allow 255, and writes go through a longer temporary name
TOOL_FILE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\.py$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # an environment variable's (and a secret's) name
# MCP's tool names (SEP-986): 1-128 of these characters. The SDK has the same rule
# (`mcp.shared.tool_name_validation`), but importing the `mcp` package costs seconds, and `tooldock check`
# imports nothing else of it.
TOOL_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]")
MAX_TOOL_NAME_LEN = 128


class NamespaceNameError(ValueError):
    """A namespace or file name the user gave is not acceptable; the message says why and what to do."""


def validate_namespace_name(name: str) -> str:
    if name in RESERVED:
        raise NamespaceNameError(f"namespace name {name!r} is reserved; choose another name")
    if not name or len(name) > MAX_NAMESPACE_LEN:
        raise NamespaceNameError(f"namespace name must be 1-{MAX_NAMESPACE_LEN} characters long, got {len(name)}")
    if not NAMESPACE_RE.fullmatch(name):  # fullmatch: `$` alone would let a trailing newline through
        raise NamespaceNameError(
            f"invalid namespace name {name!r}: use lowercase letters, digits and hyphens, "
            "starting with a letter or digit (e.g. 'my-tools')"
        )
    return name


def tool_name_warning(name: str) -> str | None:
    """Why a tool name is outside MCP's tool-name rules (SEP-986), if it is. Such a tool is still served, as
    fastmcp serves it (with a warning in the worker's log), but clients may refuse it or list it mangled."""
    bad = "".join(dict.fromkeys(c for c in name if not TOOL_NAME_CHARS.fullmatch(c)))
    if bad:
        return (
            f"tool name {name!r} has characters MCP tool names do not allow ({', '.join(map(repr, bad))}): clients "
            "may refuse the tool; use letters, digits, '_', '-' and '.' (e.g. @tool(name='get_weather'))"
        )
    if len(name) > MAX_TOOL_NAME_LEN:
        return (
            f"tool name {name[:20]!r}... is {len(name)} characters long; MCP tool names have at most "
            f"{MAX_TOOL_NAME_LEN} (clients may refuse the tool): give a shorter one with @tool(name=...)"
        )
    return None


def validate_filename(filename: str) -> str:
    """A tool file name: a plain `name.py` inside the namespace folder, no path parts."""
    if "/" in filename or "\\" in filename or filename in {".", ".."}:
        raise NamespaceNameError(f"file name {filename!r} must not contain a path; give just 'name.py'")
    if len(filename.encode()) > MAX_FILENAME_BYTES:
        raise NamespaceNameError(
            f"file name is {len(filename.encode())} bytes long; use at most {MAX_FILENAME_BYTES} (e.g. 'math_tools.py')"
        )
    if not TOOL_FILE_RE.fullmatch(filename):
        raise NamespaceNameError(
            f"invalid tool file name {filename!r}: it must end in .py, start with a letter and contain "
            "only letters, digits and underscores (e.g. 'math_tools.py')"
        )
    shadowed = shadows_stdlib(filename)
    if shadowed:
        raise NamespaceNameError(shadowed)
    return filename


def shadows_stdlib(filename: str) -> str | None:
    """Why a tool file name cannot be used, if it would shadow a standard-library module: the namespace
    folder is first on the worker's import path, so `token.py` would break every `import tokenize`."""
    stem = filename.removesuffix(".py")
    if stem in sys.stdlib_module_names:
        return (
            f"file name {filename!r} shadows the standard-library module {stem!r} and would break imports "
            f"in the worker; choose another name (e.g. '{stem}_tools.py')"
        )
    return None
