"""The docs extension (docs/_ext/tooldock_docs) refuses what would let the reference drift: an unknown marker,
a bad argument, an item of the code that no page documents, one documented that the code does not have."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "_ext"))

from tooldock_docs import coverage, generate


def test_an_unknown_kind_or_a_bad_argument_is_an_error():
    with pytest.raises(generate.MarkerError, match="unknown kind"):
        generate.part("nonsense", [])
    with pytest.raises(generate.MarkerError, match="name one family"):
        generate.part("errors", ["nope"])
    with pytest.raises(generate.MarkerError, match="has no tool"):
        generate.part("manager-tool", ["no_such_tool"])
    with pytest.raises(generate.MarkerError, match="name one group"):
        generate.part("settings", [])


def test_the_parts_come_from_the_code():
    settings = generate.part("settings", ["gateway"])
    assert "| `TOOLDOCK_STATE_URL` |" in settings and "| `TOOL_CALL_TIMEOUT_SECONDS` | `30` |" in settings
    errors = generate.part("errors", ["gateway"])
    assert "`StateUnavailable` | 503 | `state_unavailable` |" in errors
    assert "`/tools/{name}`" in generate.part("http-endpoints", [])
    assert "`tools.call`" in generate.part("worker-protocol", [])


def _env(documented: dict[str, set[tuple[str, str]]]) -> SimpleNamespace:
    return SimpleNamespace(tooldock_seen=documented)


def test_what_no_page_documents_and_what_the_code_lacks_are_reported():
    wanted = generate.required()
    everything = {(kind, item) for kind, items in wanted.items() if isinstance(items, list) for item in items}
    assert not list(coverage.missing(_env({"all": everything})))
    one_short = everything - {("manager-tool", "write_tool")}
    assert list(coverage.missing(_env({"all": one_short}))) == [
        "tooldock_docs: manager-tool 'write_tool' is in the code but no page documents it"
    ]
    extra = everything | {("cli", "frobnicate")}
    assert list(coverage.missing(_env({"all": extra}))) == [
        "tooldock_docs: cli 'frobnicate' is documented but the code has no such thing"
    ]


def test_a_click_directive_covers_its_command_and_with_nested_full_its_subcommands():
    env = _env({})
    page = "```{click} tooldock.cli.secrets:secrets\n:prog: tooldock secrets\n:nested: full\n```\n"
    coverage.scan_click(env, "page", page)
    seen = {item for _, item in env.tooldock_seen["page"]}
    assert {"secrets", "secrets set", "secrets recipients add"} <= seen
