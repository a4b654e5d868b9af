"""Generated parts read off plain code: error classes (`errors`), the worker protocol's constants
(`worker-protocol`) and the MCP protocol versions the gateway accepts (`mcp-versions`)."""

from __future__ import annotations

import inspect

from tooldock_docs.registry import MarkerError, kind, no_args, table

# The families of errors.py, each a table of its own: (root class, title, what the columns say).
FAMILIES = {
    "gateway": "ToolDockError",
    "builder": "BuilderError",
    "secrets": "SecretsError",
    "manager": "ManagerError",
    "registry": "RegistryError",
    "keys": "KeysError",
    "oauth": "OAuthConfigError",
}


def _doc(cls: type) -> str:
    doc = cls.__dict__.get("__doc__")
    if not doc:
        raise MarkerError(f"errors.{cls.__name__} has no docstring: say in one sentence what it means")
    return inspect.cleandoc(doc)


def _classes(root: type) -> list[tuple[int, type]]:
    """`root` and every class below it defined in errors.py, depth first, with its depth."""
    import tooldock.errors as errors

    found: list[tuple[int, type]] = []

    def visit(cls: type, depth: int) -> None:
        found.append((depth, cls))
        for sub in sorted(cls.__subclasses__(), key=lambda c: c.__name__):
            if sub.__module__ == errors.__name__:
                visit(sub, depth + 1)

    visit(root, 0)
    return found


def _family_names() -> list[str]:
    return list(FAMILIES)


@kind("errors", required=_family_names)
def errors_part(args: list[str]) -> str:
    """`<!-- tooldock:errors FAMILY -->`: a table of that family's error classes."""
    import tooldock.errors as errors

    if len(args) != 1 or args[0] not in FAMILIES:
        raise MarkerError(f"name one family: {', '.join(FAMILIES)}")
    root = getattr(errors, FAMILIES[args[0]])
    rows: list[list[object]] = []
    for depth, cls in _classes(root):
        name = "\u2003" * depth + f"`{cls.__name__}`"
        status = getattr(cls, "status", None)
        code = getattr(cls, "code", None)
        row: list[object] = [name]
        if args[0] == "gateway":
            row += [status, f"`{code}`"]
        elif args[0] == "manager":
            row += [f"`{code}`"]
        rows.append([*row, _doc(cls)])
    header = ["error"] + (["HTTP", "code"] if args[0] == "gateway" else ["code"] if args[0] == "manager" else [])
    return table([*header, "meaning"], rows)


@kind("worker-codes")
def worker_codes(args: list[str]) -> str:
    """`<!-- tooldock:worker-codes -->`: each worker-protocol error code, the gateway error it becomes."""
    no_args(args)
    from tooldock.errors import _BY_WORKER_CODE
    from tooldock.worker.protocol import ERROR_CODES

    if set(ERROR_CODES) != set(_BY_WORKER_CODE):
        raise MarkerError("worker.protocol.ERROR_CODES and errors._BY_WORKER_CODE list different codes")
    rows = [
        [f"`{code}`", f"`{cls.__name__}`", cls.status, f"`{cls.code}`"] for code, cls in sorted(_BY_WORKER_CODE.items())
    ]
    return table(["worker code", "gateway error", "HTTP", "REST / MCP code"], rows)


@kind("worker-protocol")
def worker_protocol(args: list[str]) -> str:
    """`<!-- tooldock:worker-protocol -->`: the protocol's version, limits, ops and error codes."""
    no_args(args)
    from tooldock.worker import protocol

    lines = [
        f"- Protocol version: **{protocol.PROTOCOL_VERSION}** (the handshake's `protocol`).",
        f"- Longest line: {protocol.MAX_LINE_BYTES:,} bytes ({protocol.MAX_LINE_BYTES // 2**20} MiB).",
        f"- The worker's ready line on stderr starts with `{protocol.READY_LINE}`.",
        f"- Ops: {', '.join(f'`{op}`' for op in sorted(protocol.OPS))}.",
        f"- Error codes: {', '.join(f'`{code}`' for code in sorted(protocol.ERROR_CODES))}.",
        f"- Handshake lists beside `tools`: {', '.join(f'`{k}`' for k in protocol.SURFACE_KINDS)}.",
        f"- List-changed notifications a Context tool may cause: "
        f"{', '.join(f'`{n}`' for n in sorted(protocol.LIST_CHANGED))}.",
        f"- Input-required results travel in a result's `_meta` under `{protocol.INPUT_REQUIRED}`.",
        f"- Session values (`ctx.set_state`): a name is at most {protocol.MAX_STATE_NAME:,} characters, and a "
        f"session's values together at most {protocol.MAX_STATE_BYTES:,} bytes of JSON.",
    ]
    return "\n".join(lines) + "\n"


@kind("mcp-versions")
def mcp_versions(args: list[str]) -> str:
    """`<!-- tooldock:mcp-versions -->`: the protocol versions the gateway's MCP SDK accepts."""
    no_args(args)
    from mcp_types import version

    rows = []
    for v in version.SUPPORTED_PROTOCOL_VERSIONS:
        era = "stateless (no `initialize`)" if v in version.MODERN_PROTOCOL_VERSIONS else "session (`initialize`)"
        notes = []
        if v == version.LATEST_HANDSHAKE_VERSION:
            notes.append("the newest version with sessions")
        if v == version.LATEST_PROTOCOL_VERSION:
            notes.append("the latest")
        if v == version.OLDEST_SUPPORTED_VERSION:
            notes.append("the oldest; served over legacy SSE (`/sse` + `/messages`) as well as `/mcp`")
        rows.append([f"`{v}`", era, "; ".join(notes)])
    return table(["version", "kind", "notes"], rows)
