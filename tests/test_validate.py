"""Static validation of tool files: each rule, reported with file, line and a fix."""

import pytest

from tooldock.namespace.validate import validate_source

GOOD = '''
from fastmcp.tools import tool

@tool
def add(a: int, b: int = 1) -> int:
    """Add."""
    return a + b

@tool(name="renamed")
async def other(x: str) -> str:
    """Other."""
    return x

def helper(x):
    return x
'''


def test_good_file_lists_its_tools_including_renamed_ones():
    report = validate_source("good.py", GOOD)
    assert report.ok
    assert report.tools == ("add", "renamed")


def test_syntax_error_reports_line():
    report = validate_source("bad.py", "from x import y\n\ndef f(:\n    pass\n")
    assert not report.ok
    (problem,) = report.problems
    assert problem.code == "syntax_error" and problem.line == 3 and problem.file == "bad.py"


def test_file_without_tool_decorator_is_rejected():
    report = validate_source("helpers.py", "def f(x: int) -> int:\n    '''Doc.'''\n    return x\n")
    assert not report.ok
    assert report.problems[0].code == "no_tools"
    assert "@tool" in report.problems[0].message


def test_missing_type_hint_names_the_parameter():
    report = validate_source("t.py", "from fastmcp.tools import tool\n@tool\ndef f(x, y: int):\n    '''D.'''\n")
    assert [p.code for p in report.problems] == ["missing_type_hint"]
    assert "'x'" in report.problems[0].message and report.problems[0].line == 3


def test_missing_docstring():
    report = validate_source("t.py", "from fastmcp.tools import tool\n@tool\ndef f(x: int):\n    return x\n")
    assert [p.code for p in report.problems] == ["missing_docstring"]


@pytest.mark.parametrize(
    ("decorator", "served"),
    [
        ('@tool(description="Adds one.")', True),
        ("@tool(description=DESCRIPTION)", True),  # computed at import time: fastmcp takes what it is
        ('@tool("add_one", description="Adds one.")', True),
        ('@tool(description="  ")', False),
        ("@tool(description=None)", False),
        ('@tool(title="Add one")', False),
    ],
)
def test_a_description_given_to_the_decorator_stands_for_the_docstring(decorator: str, served: bool):
    src = f"from fastmcp.tools import tool\nDESCRIPTION = 'Adds one.'\n{decorator}\ndef f(x: int) -> int:\n    return x + 1\n"
    report = validate_source("t.py", src)
    assert bool(report.tools) is served, report.problems
    if not served:
        assert [p.code for p in report.problems] == ["missing_docstring"]
        assert "@tool(description=...)" in report.problems[0].message


def test_star_args_are_rejected_each_by_its_own_name():
    src = "from fastmcp.tools import tool\n@tool\ndef f(*items: int, **options: str):\n    '''D.'''\n"
    report = validate_source("t.py", src)
    assert [p.code for p in report.problems] == ["unsupported_parameter"] * 2
    assert "a *items parameter" in report.problems[0].message
    assert "a **options parameter" in report.problems[1].message


def test_attribute_decorator_forms_are_recognised():
    src = "import fastmcp.tools\n@fastmcp.tools.tool()\ndef f(x: int) -> int:\n    '''D.'''\n    return x\n"
    assert validate_source("t.py", src).tools == ("f",)


def test_null_bytes_do_not_crash_the_validator():
    report = validate_source("t.py", "x = 1\0\n")
    assert not report.ok and report.problems[0].code == "syntax_error"


def test_a_tool_with_a_problem_is_skipped_and_the_files_other_tools_are_kept():
    src = ('from fastmcp.tools import tool\n@tool\ndef good(x: int):\n    """D."""\n'
           '@tool(name="renamed")\ndef bad(x):\n    """D."""\n')
    report = validate_source("t.py", src)
    assert report.ok and report.tools == ("good",) and report.skipped == ("bad",)
    assert [(p.code, p.line) for p in report.problems] == [("missing_type_hint", 6)]


def test_a_file_whose_only_tool_has_a_problem_serves_nothing_and_is_not_called_toolless():
    report = validate_source("t.py", 'from fastmcp.tools import tool\n@tool\ndef f(x):\n    """D."""\n')
    assert not report.ok and report.skipped == ("f",)
    assert [p.code for p in report.problems] == ["missing_type_hint"]


# Where the decorator comes from (namespace/origins.py): a file whose `@tool` is not fastmcp's serves nothing,
# and used to be accepted until a worker imported it (or, for an SDK server object, never said why).
BODY = "\n@tool\ndef f(x: int) -> int:\n    '''D.'''\n    return x\n"


@pytest.mark.parametrize(
    ("imports", "code", "says"),
    [
        ("from tooldock import tool\n", "wrong_import", "'tooldock' has no @tool decorator"),
        ("from fastmcp import tool\n", "wrong_import", "'fastmcp' has no @tool decorator"),
        ("from mcp.server.mcpserver import MCPServer as tool\n", "wrong_import", "'mcp.server.mcpserver.MCPServer'"),
        ("import os\n", "undefined_decorator", "'tool' is not defined"),
    ],
)
def test_a_tool_decorator_that_is_not_fastmcps_is_reported_with_the_import_to_use(imports, code, says):
    report = validate_source("t.py", imports + BODY)
    assert not report.ok and report.tools == ()
    (problem,) = report.problems
    assert problem.code == code and says in problem.message and problem.line == imports.count("\n") + 2
    assert "from fastmcp.tools import tool" in problem.message


@pytest.mark.parametrize(
    "imports",
    [
        "from fastmcp.tools import tool\n",
        "from fastmcp.tools.function_tool import tool\n",
        "from _helpers import tool\n",  # the user's own: trusted (the worker says so if it makes no tool)
        "from helpers import *\n",  # cannot be followed: trusted
        "try:\n    from fastmcp.tools import tool\nexcept ImportError:\n    from tooldock import tool\n",
    ],
)
def test_decorators_from_fastmcp_or_from_code_the_reading_cannot_judge_are_accepted(imports):
    report = validate_source("t.py", imports + BODY)
    assert report.ok and report.tools == ("f",) and report.problems == ()


def test_a_resource_or_prompt_decorator_that_is_not_defined_is_reported():
    report = validate_source("t.py", "@resource('data://x')\ndef r() -> str:\n    return 'x'\n")
    (problem,) = report.problems
    assert problem.code == "undefined_decorator" and "from fastmcp.resources import resource" in problem.message


def test_the_mcp_sdk_1x_fastmcp_is_reported_where_it_is_imported():
    src = "from mcp.server.fastmcp import FastMCP\n\nmcp = FastMCP('w')\n\n@mcp.tool()" + BODY.replace("\n@tool", "")
    report = validate_source("t.py", src)
    (problem,) = report.problems
    assert problem.code == "sdk_server" and problem.line == 1 and "MCP SDK 1.x" in problem.message
    # As a fallback inside `try:` it is left alone: the first import works in a worker.
    src = "try:\n    from fastmcp import FastMCP\nexcept ImportError:\n    from mcp.server.fastmcp import FastMCP\n"
    report = validate_source("t.py", src + "mcp = FastMCP('w')\n@mcp.tool" + BODY.replace("\n@tool", ""))
    assert report.ok and report.tools == ("f",)


@pytest.mark.parametrize(
    ("server", "owner"),
    [
        ("from mcp.server.mcpserver import MCPServer\nmcp = MCPServer('w')\n", "mcp"),
        ("from mcp.server import MCPServer\nmcp = MCPServer('w')\n", "mcp"),
        ("import mcp.server\nserver = mcp.server.MCPServer('w')\n", "server"),
    ],
)
def test_a_tool_registered_on_an_sdk_server_object_is_reported(server, owner):
    """The SDK's `@mcp.tool()` registers the function on a server ToolDock does not run: it was never served,
    with no word why."""
    report = validate_source("t.py", server + f"@{owner}.tool()" + BODY.replace("\n@tool", ""))
    assert not report.ok and report.skipped == ("f",)
    (problem,) = report.problems
    assert problem.code == "sdk_server" and f"{owner!r}, an MCP SDK MCPServer" in problem.message


def test_a_fastmcp_server_objects_tools_are_accepted():
    src = "from fastmcp import FastMCP\nmcp = FastMCP('w')\n@mcp.tool" + BODY.replace("\n@tool", "")
    report = validate_source("t.py", src)
    assert report.ok and report.tools == ("f",) and report.functions == (("f", 4),)


@pytest.mark.parametrize("terms", [3000, 100_000])
def test_code_nested_beyond_pythons_limit_is_a_problem_not_a_crash(terms):
    """`check`, `serve`'s scan and write_tool read files with `ast`, which raises RecursionError (not a
    SyntaxError) on an expression thousands of levels deep; Python cannot import such a file either."""
    code = GOOD.replace("@tool", "X = " + "+".join(["1"] * terms) + "\n\n\n@tool", 1)
    report = validate_source("deep.py", code)
    assert report.tools == ()
    assert [(p.code, p.line) for p in report.problems] == [("syntax_error", None)]
    assert "nested too deeply" in report.problems[0].message and "split it" in report.problems[0].message


@pytest.mark.parametrize(
    "line, advice",
    [("from . import _helpers", "import _helpers"), ("from .lib.util import a, b", "from lib.util import a, b")],
)
def test_a_top_level_relative_import_cannot_work_in_a_tool_file_and_says_what_to_write(line, advice):
    src = f"{line}\nfrom fastmcp.tools import tool\n@tool\ndef f(x: int) -> int:\n    '''D.'''\n    return x\n"
    report = validate_source("t.py", src)
    ((problem,),) = [report.problems]
    assert report.tools == () and problem.code == "import_error" and problem.line == 1
    assert f"relative import '{line}'" in problem.message and f"'{advice}'" in problem.message


def test_a_relative_import_tried_first_inside_try_is_a_fallback_and_fine():
    src = (
        "try:\n    from . import _helpers\nexcept ImportError:\n    import _helpers\n"
        "from fastmcp.tools import tool\n@tool\ndef f(x: int) -> int:\n    '''D.'''\n    return x\n"
    )
    assert validate_source("t.py", src).tools == ("f",)


def test_versions_of_a_tool_are_one_tool_and_an_unversioned_repeat_is_a_duplicate():
    head = "from fastmcp.tools import tool\n"
    versioned = head + "".join(
        f"@tool(name='calc', version={v})\ndef c{v}(x: int) -> int:\n    '''V{v}.'''\n    return x\n" for v in (1, 2)
    )
    report = validate_source("t.py", versioned)
    assert report.tools == ("calc",) and report.versioned == ("calc",) and not report.problems
    repeated = head + "".join(f"@tool(name='calc')\ndef c{v}(x: int) -> int:\n    '''V{v}.'''\n    return x\n" for v in (1, 2))
    report = validate_source("t.py", repeated)
    assert report.tools == ("calc",) and report.skipped == ("c2",)
    ((problem,),) = [report.problems]
    assert problem.code == "duplicate_tool" and problem.line == 7 and "also at line 3" in problem.message


def test_an_empty_tool_name_is_the_functions_name_as_fastmcp_makes_it():
    """`@tool(name="")` is a tool named after its function (fastmcp's `name or fn.__name__`): it was not read
    as a tool at all, so its rules went unchecked and `check` counted one tool fewer than `serve` served."""
    served = validate_source("t.py", "from fastmcp.tools import tool\n@tool(name='')\ndef f(x: int) -> int:\n    '''D.'''\n")
    assert served.tools == ("f",)
    unchecked = validate_source("t.py", "from fastmcp.tools import tool\n@tool('')\ndef f(x) -> int:\n    return 1\n")
    assert sorted(p.code for p in unchecked.problems) == ["missing_docstring", "missing_type_hint"]
