"""Static validation of tool files: each rule, reported with file, line and a fix."""

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


def test_star_args_are_rejected():
    report = validate_source("t.py", "from fastmcp.tools import tool\n@tool\ndef f(*args: int):\n    '''D.'''\n")
    assert [p.code for p in report.problems] == ["unsupported_parameter"]


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
