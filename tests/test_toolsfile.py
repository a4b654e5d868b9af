"""`tools.toml` parsing (tooldock/namespace/toolsfile.py) and how the scanner treats an upstream folder:
every mistake is a problem naming the key and what to write instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldock.namespace.scanner import scan_tools_dir
from tooldock.namespace.toolsfile import expand_secrets, read_tools_file

GOOD = """
active_toolsets = ["time_*", "docs_search"]
restart = false
startup_timeout = 12

[[servers]]
namespace = "time"
command = "uvx mcp-server-time --local-timezone 'Europe/Paris'"
env = { API_KEY = "${secret:TIME_KEY}", MODE = "fast", LEVEL = 3 }
cwd = "data"

[[servers]]
namespace = "docs"
url = "https://docs.example.com/mcp"
headers = { Authorization = "Bearer ${secret:DOCS_TOKEN}" }

[[servers]]
namespace = "legacy"
url = "http://127.0.0.1:9000/sse"

[[servers]]
namespace = ""
registry = "io.github.example/filesystem"
version = "1.2.0"
"""


def parse(tmp_path: Path, text: str):
    (tmp_path / "tools.toml").write_text(text)
    return read_tools_file(tmp_path)


def test_a_complete_file(tmp_path):
    config, problem = parse(tmp_path, GOOD)
    assert problem is None and config is not None
    assert config.active_toolsets == ("time_*", "docs_search")
    assert config.restart is False and config.startup_timeout == 12
    time, docs, legacy, registry = config.servers
    assert time.transport == "stdio" and time.argv == ["uvx", "mcp-server-time", "--local-timezone", "Europe/Paris"]
    assert dict(time.env) == {"API_KEY": "${secret:TIME_KEY}", "MODE": "fast", "LEVEL": "3"} and time.cwd == "data"
    assert docs.transport == "streamable-http" and dict(docs.headers)["Authorization"].startswith("Bearer ")
    assert legacy.transport == "sse"  # a URL ending in /sse is a legacy SSE server unless transport says otherwise
    assert registry.registry == "io.github.example/filesystem" and registry.namespace == ""
    assert registry.version == "1.2.0" and registry.label == "(no prefix) (registry io.github.example/filesystem@1.2.0)"
    assert config.secret_names() == ("TIME_KEY", "DOCS_TOKEN")


def test_a_file_saved_with_a_byte_order_mark_and_crlf_reads_the_same(tmp_path):
    (tmp_path / "tools.toml").write_bytes(b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode())
    config, problem = read_tools_file(tmp_path)
    assert problem is None and config == parse(tmp_path, GOOD)[0]


def test_seed_001_minimal_format(tmp_path):
    config, problem = parse(
        tmp_path, 'active_toolsets = ["pjpd*"]\n[[servers]]\nnamespace = "pjpd"\ncommand = "pjpd"\n'
    )
    assert problem is None and config.servers[0].command == "pjpd" and config.restart is True


def test_secret_references_expand_only_known_values():
    assert expand_secrets("Bearer ${secret:T}", {"T": "abc"}) == "Bearer abc"
    assert expand_secrets("Bearer ${secret:T}", {}) == "Bearer ${secret:T}"


BAD = [
    ('[[servers]]\nnamespace = "a"\nurl = "http://[1:2]/mcp"', "url must be an http:// or https:// URL"),
    ('[[servers]]\nnamespace = "a"\nurl = "http://[::1/mcp"', "url must be an http:// or https:// URL"),
    ('[[servers]\nnamespace = "a"', "invalid TOML"),
    ("active_toolsets = []", "no servers: add at least one [[servers]] table"),
    ('bogus = 1\n[[servers]]\nnamespace = "a"\ncommand = "x"', "unknown key(s) bogus"),
    ('active_toolsets = "a*"\n[[servers]]\nnamespace = "a"\ncommand = "x"', "active_toolsets must be a list"),
    ('active_toolsets = [""]\n[[servers]]\nnamespace = "a"\ncommand = "x"', "active_toolsets must be a list"),
    ('restart = "yes"\n[[servers]]\nnamespace = "a"\ncommand = "x"', "restart must be true or false"),
    ('startup_timeout = 0\n[[servers]]\nnamespace = "a"\ncommand = "x"', "startup_timeout must be a number"),
    ('startup_timeout = 9999\n[[servers]]\nnamespace = "a"\ncommand = "x"', "startup_timeout must be a number"),
    ('[[servers]]\ncommand = "x"', "servers[0].namespace is required"),
    ('[[servers]]\nnamespace = "a b"\ncommand = "x"', "must be letters, digits"),
    ('[[servers]]\nnamespace = "_a"\ncommand = "x"', "must be letters, digits"),
    ('[[servers]]\nnamespace = "a"', "needs exactly one of command"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nurl = "http://127.0.0.1/mcp"', "it has command, url"),
    ('[[servers]]\nnamespace = "a"\ncommand = ""', "needs exactly one of command"),
    ('[[servers]]\nnamespace = "a"\ncommand = "   "', "command is empty"),
    ('[[servers]]\nnamespace = "a"\ncommand = "run \'unclosed"', "not a valid shell string"),
    ('[[servers]]\nnamespace = "a"\ncommand = "run --token ${secret:T}"', "may not hold a ${secret:...}"),
    ('[[servers]]\nnamespace = "a"\ncommand = 3', "command must be a string"),
    ('[[servers]]\nnamespace = "a"\nurl = "ftp://host/mcp"', "must be an http:// or https:// URL"),
    ('[[servers]]\nnamespace = "a"\nurl = "http:///mcp"', "must be an http:// or https:// URL"),
    ('[[servers]]\nnamespace = "a"\nurl = "https://u:p@host/mcp"', "must not hold credentials"),
    ('[[servers]]\nnamespace = "a"\nurl = "https://h/mcp?k=${secret:K}"', "may not hold a ${secret:...}"),
    ('[[servers]]\nnamespace = "a"\nurl = "https://h/mcp"\ntransport = "ws"', 'transport must be "streamable-http"'),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\ntransport = "sse"', "transport only applies to a url server"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nheaders = { A = "b" }', "headers only apply to url"),
    ('[[servers]]\nnamespace = "a"\nurl = "https://h/mcp"\nenv = { A = "b" }', "env only applies to command"),
    ('[[servers]]\nnamespace = "a"\nurl = "https://h/mcp"\ncwd = "x"', "cwd only applies to command"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\ncwd = "../up"', "cwd must stay inside the namespace folder"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nenv = ["A"]', "env must be a table"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nenv = { "1A" = "b" }', "'1A' is not a valid environment"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nenv = { A = true }', "env.A must be a string"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nenv = { A = "a\\nb" }', "env.A must be one line"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nenv = { A = "${secret:not-a-name}" }', "must name a secret"),
    ('[[servers]]\nnamespace = "a"\nurl = "https://h/mcp"\nheaders = { "Bad Header" = "x" }', "not a valid header"),
    ('[[servers]]\nnamespace = "a"\nregistry = "no-slash"', "registry must be a registry server name"),
    ('[[servers]]\nnamespace = "a"\nregistry = "a/b"\nversion = "1 2"', "version must be an exact version"),
    ('[[servers]]\nnamespace = "a"\nregistry = "a/b"\nversion = 3', "version must be a string"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nversion = "1.0"', "version only applies to a registry server"),
    ('[[servers]]\nnamespace = "a"\ncommand = "x"\nextra = 1', "unknown key(s) extra"),
    ("servers = [1]", "servers[0] must be a [[servers]] table"),
]


@pytest.mark.parametrize(("text", "expected"), BAD, ids=[b[1][:40] for b in BAD])
def test_mistakes_are_reported_with_what_to_do(tmp_path, text, expected):
    config, problem = parse(tmp_path, text)
    assert config is None and problem is not None
    assert problem.file == "tools.toml" and problem.code == "invalid_config"
    assert expected in problem.message


def test_every_mistake_is_said_at_once(tmp_path):
    """A file with a mistake in two servers and one at the top: the three at once, not one per reload."""
    text = ('restart = "yes"\n[[servers]]\nnamespace = "a"\n\n[[servers]]\nnamespace = "b"\ncommand = "x"\n'
            'colour = 1\n')
    said = parse(tmp_path, text)[1].message
    assert said.startswith("restart must be true or false; servers[0] needs exactly one of command"), said
    assert "; servers[1]: unknown key(s) colour (known keys: namespace, command, url," in said, said


def test_too_many_servers(tmp_path):
    text = "".join(f'[[servers]]\nnamespace = "s{i}"\ncommand = "x"\n' for i in range(65))
    assert "at most 64 servers" in parse(tmp_path, text)[1].message


def test_a_toml_syntax_error_names_its_line(tmp_path):
    problem = parse(tmp_path, "active_toolsets = []\n\n[[servers]\n")[1]
    assert problem.line == 3


def test_not_utf8(tmp_path):
    (tmp_path / "tools.toml").write_bytes(b"\xff\xfe")
    assert "cannot read the file" in read_tools_file(tmp_path)[1].message


def test_scanner_marks_upstream_folders_and_declares_their_secrets(tmp_path):
    folder = tmp_path / "gh"
    folder.mkdir()
    (folder / "tools.toml").write_text(GOOD)
    (folder / "tooldock.yaml").write_text("description: GitHub\nsecrets: [OTHER]\n")
    (folder / "stray.py").write_text("x = 1\n")
    (folder / "_private.py").write_text("x = 1\n")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tools.toml").write_text("servers = 3\n")
    scan = scan_tools_dir(tmp_path)
    gh, bad = scan.get("gh"), scan.get("broken")
    assert gh.is_upstream and gh.upstream is not None and gh.files == ()
    assert gh.config.secrets == ("OTHER", "TIME_KEY", "DOCS_TOKEN") and gh.config.description == "GitHub"
    assert [(p.file, p.code) for p in gh.problems] == [("stray.py", "mixed_namespace")]
    assert bad.is_upstream and bad.upstream is None and bad.problems[0].code == "invalid_config"
