"""Analysis accuracy on real servers (issue 12, "What it must show"), the same comparison as
bench/analyze_accuracy.py for the two servers the upstream tests install: `@modelcontextprotocol/server-everything`
(its installed npm package is its published source) and `mcp-server-time` (its installed wheel). analyze_tree
reads them; the servers then run and list their tools over stdio with the official SDK client; every real
tool and parameter must be found, with the right `required` flags, and nothing the server does not have."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import pytest
from test_upstream_real import everything_command, time_command  # noqa: F401 (session fixtures)

from tooldock.manager.analysis import analyze_tree

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from analyze_accuracy import compare, real_tools  # noqa: E402

pytestmark = pytest.mark.slow

# server-everything registers these two only for clients with the tasks capability, which the SDK client
# used here does not declare; the analysis reads both registrations.
TASK_ONLY = ["trigger-elicitation-request-async", "trigger-sampling-request-async"]


def test_server_everything_analysis_matches_its_tools_list(everything_command):
    argv = shlex.split(everything_command)
    package = Path(argv[1]).parent.parent  # .../@modelcontextprotocol/server-everything/dist/index.js
    result = analyze_tree(package, "npm:@modelcontextprotocol/server-everything")
    assert result["language"] == "javascript" and result["framework"] == "mcp-sdk"
    row = compare(result["tools_found"], asyncio.run(real_tools(argv)))
    assert row["names_real"] >= 17 and row["missing"] == [] and row["wrong"] == []
    assert row["params_right"] == row["params_real"] == row["required_right"]
    assert row["names_extra"] == TASK_ONLY


def test_mcp_server_time_analysis_matches_its_tools_list(time_command):
    argv = shlex.split(time_command)
    venv = Path(argv[0]).parent.parent
    source = next(venv.glob("lib/python*/site-packages/mcp_server_time"))
    result = analyze_tree(source, "pypi:mcp-server-time")
    assert result["framework"] == "mcp-python"
    row = compare(result["tools_found"], asyncio.run(real_tools(argv)))
    assert (row["names_found"], row["names_real"]) == (2, 2) and row["names_extra"] == []
    assert row["params_right"] == row["params_real"] == row["required_right"] == 4
    assert row["wrong"] == []
