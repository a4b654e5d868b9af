"""Scanning a tools directory: the drop-in rules, problems as data, fingerprints."""

from pathlib import Path

import pytest

from tooldock.namespace.names import NamespaceNameError, validate_filename, validate_namespace_name
from tooldock.namespace.scanner import scan_tools_dir

TOOL = 'from fastmcp.tools import tool\n\n@tool\ndef {name}(x: int) -> int:\n    """Doc."""\n    return x\n'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_examples_scan_into_three_namespaces():
    scan = scan_tools_dir(Path(__file__).parent.parent / "examples")
    assert [ns.name for ns in scan.namespaces] == ["async-tool", "basic-tool", "multi-tool"]
    multi = scan.get("multi-tool")
    assert multi.tool_names == ("add", "multiply", "reverse_text", "word_count")
    assert not multi.problems
    weather = scan.get("async-tool")
    assert weather.has_requirements and weather.config.secrets == ("WEATHER_API_KEY",)


def test_ignored_names_and_metadata(tmp_path):
    write(tmp_path / "ns" / "tools.py", TOOL.format(name="a"))
    write(tmp_path / "ns" / "_helpers.py", "X = 1\n")
    write(tmp_path / "ns" / ".hidden.py", "syntax error here (\n")
    write(tmp_path / "ns" / "README.md", "# hi\n")
    write(tmp_path / "_private" / "t.py", TOOL.format(name="b"))
    write(tmp_path / ".git" / "t.py", TOOL.format(name="c"))
    write(tmp_path / "not-a-dir.py", TOOL.format(name="d"))
    scan = scan_tools_dir(tmp_path)
    assert [ns.name for ns in scan.namespaces] == ["ns"]
    assert scan.get("ns").tool_names == ("a",)
    assert not scan.get("ns").problems


def test_bad_file_does_not_stop_the_others(tmp_path):
    write(tmp_path / "ns" / "good.py", TOOL.format(name="ok"))
    write(tmp_path / "ns" / "bad.py", "def broken(:\n")
    write(tmp_path / "other" / "t.py", TOOL.format(name="fine"))
    scan = scan_tools_dir(tmp_path)
    ns = scan.get("ns")
    assert ns.tool_names == ("ok",)
    assert [(p.file, p.code, p.line) for p in ns.problems] == [("bad.py", "syntax_error", 1)]
    assert scan.get("other").tool_names == ("fine",)


def test_a_tool_file_over_the_size_limit_is_a_problem_that_says_what_to_do(tmp_path):
    write(tmp_path / "ns" / "small.py", TOOL.format(name="ok"))
    write(tmp_path / "ns" / "big.py", TOOL.format(name="big") + "#" * 1_000_000 + "\n")
    ns = scan_tools_dir(tmp_path).get("ns")
    assert ns.tool_names == ("ok",)
    ((file, message),) = [(p.file, p.message) for p in ns.problems]
    assert file == "big.py" and "larger than 1000000 bytes" in message and "split it into several files" in message


def test_invalid_namespace_folder_is_reported_not_loaded(tmp_path):
    write(tmp_path / "Bad_Name" / "t.py", TOOL.format(name="x"))
    scan = scan_tools_dir(tmp_path)
    assert scan.namespaces == ()
    assert scan.problems[0].code == "invalid_namespace_name"
    assert "lowercase" in scan.problems[0].message


def test_duplicate_tool_names_across_files(tmp_path):
    write(tmp_path / "ns" / "a.py", TOOL.format(name="same"))
    write(tmp_path / "ns" / "b.py", TOOL.format(name="same"))
    ns = scan_tools_dir(tmp_path).get("ns")
    assert ns.tool_names == ("same",)
    assert ns.problems[0].code == "duplicate_tool" and ns.problems[0].file == "b.py"


def test_invalid_config_blocks_the_namespace_with_a_clear_problem(tmp_path):
    write(tmp_path / "ns" / "t.py", TOOL.format(name="x"))
    write(tmp_path / "ns" / "tooldock.yaml", "limits:\n  timeout: -1\n")
    ns = scan_tools_dir(tmp_path).get("ns")
    assert ns.files == ()
    assert ns.problems[0].file == "tooldock.yaml" and "limits.timeout" in ns.problems[0].message


def test_symlink_escaping_the_namespace_is_refused(tmp_path):
    outside = write(tmp_path / "outside.py", TOOL.format(name="escaped"))
    (tmp_path / "tools" / "ns").mkdir(parents=True)
    (tmp_path / "tools" / "ns" / "link.py").symlink_to(outside)
    ns = scan_tools_dir(tmp_path / "tools").get("ns")
    assert ns.tool_names == ()
    assert "outside" in ns.problems[0].message


def test_fingerprint_changes_with_any_file_and_only_then(tmp_path):
    write(tmp_path / "ns" / "t.py", TOOL.format(name="x"))
    first = scan_tools_dir(tmp_path).get("ns").fingerprint
    assert scan_tools_dir(tmp_path).get("ns").fingerprint == first
    write(tmp_path / "ns" / "_helper.py", "Y = 2\n")
    second = scan_tools_dir(tmp_path).get("ns").fingerprint
    assert second != first
    write(tmp_path / "ns" / "requirements.txt", "httpx\n")
    assert scan_tools_dir(tmp_path).get("ns").fingerprint != second


def test_missing_tools_dir_raises_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        scan_tools_dir(tmp_path / "nope")


@pytest.mark.parametrize("name", ["github", "my-tools", "a", "0x", "a" * 63])
def test_valid_namespace_names(name):
    assert validate_namespace_name(name) == name


@pytest.mark.parametrize("name", ["", "_system", "Upper", "has space", "dots.no", "-lead", "a" * 64, "../x"])
def test_invalid_namespace_names(name):
    with pytest.raises(NamespaceNameError):
        validate_namespace_name(name)


@pytest.mark.parametrize("name", ["../evil.py", "a/b.py", "x.txt", "_private.py", ".py", "a b.py"])
def test_invalid_tool_file_names(name):
    with pytest.raises(NamespaceNameError):
        validate_filename(name)


def test_versions_of_a_tool_in_several_files_are_one_tool(tmp_path):
    versioned = "from fastmcp.tools import tool\n\n@tool(name='calc', version='{v}')\ndef c(x: int) -> int:\n    '''V.'''\n    return x\n"
    write(tmp_path / "ns" / "a.py", versioned.format(v=1))
    write(tmp_path / "ns" / "b.py", versioned.format(v=2))
    write(tmp_path / "ns" / "c.py", TOOL.format(name="calc"))  # no version: a duplicate as before
    ns = scan_tools_dir(tmp_path).get("ns")
    assert ns.tool_names == ("calc",)
    assert [(p.file, p.code) for p in ns.problems] == [("c.py", "duplicate_tool")]
