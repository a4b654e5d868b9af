"""Whether a Context tool may ask its client something (elicitation, sampling, roots), read from its source.

A 2026-07-28 task for a Context tool that asks first (a "guard": a confirmation before the work) answers the
`tools/call` with the question instead of a task, so the gateway gives such a tool's first round a moment
to ask before it announces the task (runtime/mcp/tasks.py). A tool that only reports progress and logs
never asks: its task is announced at once. This module tells them apart, erring towards "may ask": a tool
whose Context is used in any way but reading one of the attributes below (passed to a helper, stored,
`ctx.elicit`, `ctx.sample`, `ctx.session`, `ctx.input_responses`, ...), that calls fastmcp's `get_context()`
or returns an `InputRequiredResult`, or whose source cannot be read, may ask. A wrong "never asks" costs
nothing but the SEP-2322 shortcut: its question still reaches the client, through the task's
`input_required` status.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

# What a tool may do with its Context without asking the client anything.
QUIET = frozenset(
    {
        "debug",
        "info",
        "warning",
        "error",
        "log",
        "report_progress",
        "request_id",
        "client_id",
        "session_id",
        "read_resource",
        "get_state",
        "set_state",
        "delete_state",
    }
)
# fastmcp.server.dependencies' get_context(): the Context without a parameter; InputRequiredResult: a guard
# that returns its question rather than calling ctx.elicit.
_ASKING_NAMES = frozenset({"get_context", "InputRequiredResult"})


def may_ask(fn: Any, context_parameter: str) -> bool:
    """False only when `fn`'s source shows its Context (`context_parameter`) used for the QUIET attributes only."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, RecursionError, MemoryError):  # no source to read: assume so
        return True
    quiet_reads: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in QUIET:
            quiet_reads.add(id(node.value))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id in _ASKING_NAMES) or (
            isinstance(node, ast.Attribute) and node.attr in _ASKING_NAMES
        ):
            return True
        if isinstance(node, ast.Name) and node.id == context_parameter and id(node) not in quiet_reads:
            return True
    return False
