"""`tooldock install`: each client's configuration file, at its usual place (HOME and XDG_CONFIG_HOME pointed
at a temporary folder), gets the namespace's entry; the servers and settings already there are left exactly
as they were, the previous file is kept as .bak, a second run updates the entry in place, and the key is
written only where the client cannot read it from its environment (Claude Desktop)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tooldock_cli
from test_author_loop import one_line_error

OTHERS = {"other-server": {"command": "uvx", "args": ["other"], "env": {"OTHER_TOKEN": "theirs"}}}
KEY = "tdk_secret_value_0123456789"
FILES = {  # client -> (its file under the fake home, its table of servers)
    "claude-desktop": (".config/Claude/claude_desktop_config.json", "mcpServers"),
    "claude-code": (".claude.json", "mcpServers"),
    "cursor": (".cursor/mcp.json", "mcpServers"),
    "vscode": (".config/Code/User/mcp.json", "servers"),
}


def install(home: Path, *args: str, check: bool = True):
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "TOOLDOCK_BEARER_TOKEN": KEY}
    return tooldock_cli("install", *args, env=env, check=check)


@pytest.mark.parametrize("client", list(FILES))
def test_the_entry_is_added_beside_the_clients_other_servers(tmp_path, client):
    rel, table = FILES[client]
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    before = {table: OTHERS, "someSetting": {"keep": [1, 2]}, "inputs": [{"id": "theirs", "type": "promptString"}]}
    path.write_text(json.dumps(before))
    original = path.read_text()
    proc = install(tmp_path, client, "multi-tool", "--url", "http://gw.example:9000/mcp")
    assert proc.stdout.strip() == str(path)
    after = json.loads(path.read_text())
    assert after[table]["other-server"] == OTHERS["other-server"] and after["someSetting"] == {"keep": [1, 2]}
    assert set(after[table]) == {"other-server", "tooldock-multi-tool"}
    assert (path.parent / (path.name + ".bak")).read_text() == original
    entry = json.dumps(after[table]["tooldock-multi-tool"])
    assert "http://gw.example:9000/ns/multi-tool/mcp" in entry
    if client == "claude-desktop":  # it cannot read the environment: the one place the key is written
        assert f"Bearer {KEY}" in entry and "mcp-remote" in entry
    else:
        assert KEY not in path.read_text()
    if client == "vscode":
        assert [i["id"] for i in after["inputs"]] == ["theirs", "tooldock-key"] and "${input:tooldock-key}" in entry
    elif client == "cursor":
        assert "${env:TOOLDOCK_BEARER_TOKEN}" in entry
    elif client == "claude-code":
        assert "${TOOLDOCK_BEARER_TOKEN}" in entry
    # a second run (another URL) updates the entry in place
    install(tmp_path, client, "multi-tool", "--url", "http://other:1")
    again = json.loads(path.read_text())
    assert set(again[table]) == {"other-server", "tooldock-multi-tool"}
    assert "http://other:1/ns/multi-tool/mcp" in json.dumps(again[table]["tooldock-multi-tool"])
    assert again["someSetting"] == before["someSetting"]


def test_a_new_file_is_made_and_print_changes_nothing(tmp_path):
    install(tmp_path, "cursor", "basic-tool")
    made = tmp_path / ".cursor" / "mcp.json"
    assert list(json.loads(made.read_text())["mcpServers"]) == ["tooldock-basic-tool"]
    assert not (made.parent / "mcp.json.bak").exists()
    printed = json.loads(install(tmp_path, "vscode", "basic-tool", "--print").stdout)
    assert printed["servers"]["tooldock-basic-tool"]["type"] == "http"
    assert not (tmp_path / ".config" / "Code").exists()


def test_bad_input_gets_one_clear_line_and_changes_nothing(tmp_path):
    one_line_error(install(tmp_path, "emacs", "multi-tool", check=False), "unknown client 'emacs'", "cursor")
    one_line_error(install(tmp_path, "cursor", "Not_A_Name", check=False), "Not_A_Name")
    broken = tmp_path / ".cursor" / "mcp.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"mcpServers": {"x": 1},')
    one_line_error(install(tmp_path, "cursor", "multi-tool", check=False), "not readable JSON", "not changed")
    assert broken.read_text() == '{"mcpServers": {"x": 1},'
    env_less = tooldock_cli("install", "claude-desktop", "multi-tool", "--key-from-env", "NO_SUCH_VAR_SET",
                            env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}, check=False)
    one_line_error(env_less, "NO_SUCH_VAR_SET")
