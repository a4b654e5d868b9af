"""The JSON Schemas of a namespace's config files (tooldock/namespace/schemas) against the code that reads them.

The code (`config.parse_config`, `toolsfile.parse_tools_file`) is the authority; the schemas are what editors
and the docs show. They must agree: every key, and on generated documents the schema accepts exactly what the
code accepts, except for the few cases listed here, each on one side:

Where the schema accepts what the code refuses (JSON Schema cannot say it):
- NaN (YAML's `.nan`, TOML's `nan`) where a positive number goes: JSON has no NaN, and NaN passes every
  JSON Schema bound (`_without_nan`).

Where the code accepts what the schema refuses (on purpose: forms that mean something else than they seem, or
that a person would not write; `_yaml_as_the_schema_wants` and `_toml_as_the_schema_wants` rewrite them the way
the schema wants them, and the schema must then accept):
- tooldock.yaml: a falsy value of the wrong type (`secrets: ""`, `env: 0`, `audit: false`,
  `tools: {allow: ""}`) read by the code as "not set";
- tooldock.yaml: `python: 3.12` unquoted (the code reads the number's text, so an unquoted 3.10 means 3.1);
- tooldock.yaml: `limits.memory` as a bare integer (bytes);
- tooldock.yaml: a final newline after a name (`secrets`, `env` names), `python` or `limits.memory`, which the
  code's regexes let through (Python's `$` matches before a final newline; ECMA-262's, the schema's, does not);
- tools.toml: `transport = ""` on a url server (the transport then follows the URL);
- tools.toml: a `version` with spaces around it or non-ASCII printable characters;
- tools.toml: URLs that `urllib.parse.urlsplit` takes but the schema's grammar (scheme, RFC 3986 host or
  IPv6 literal, numeric port, no whitespace) does not: whitespace or control characters, non-ASCII hosts,
  other characters in the host, an empty user part (`http://@host`), a non-numeric port, bracketed hosts that
  are not plain IPv6 (`_url_outside_grammar`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import re
import textwrap
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from tooldock.namespace import schemas
from tooldock.namespace.config import KNOWN_KEYS, ConfigError, parse_config
from tooldock.namespace.models import Limits, NamespaceConfig
from tooldock.namespace.toolsfile import (
    DEFAULT_STARTUP_TIMEOUT,
    MAX_SERVERS,
    SERVER_KEYS,
    TOP_KEYS,
    ToolsFileError,
    parse_tools_file,
)

ROOT = Path(__file__).resolve().parent.parent
YAML_SCHEMA = schemas.load("tooldock.yaml")
TOML_SCHEMA = schemas.load("tools.toml")
SERVER_SCHEMA = TOML_SCHEMA["properties"]["servers"]["items"]


# -- a validator with the patterns editors run ----------------------------------------------------------------


def _python_regex(pattern: str) -> str:
    """An ECMA-262 pattern (what JSON Schema's `pattern` means, and what editors run) as a Python regex: there
    `$` (outside a class) is the end of the input, where Python's also matches before a final newline."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return "".join(out)


@functools.cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(_python_regex(pattern))


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


EcmaValidator = jsonschema.validators.extend(Draft202012Validator, {"pattern": _pattern})
YAML = EcmaValidator(YAML_SCHEMA)
TOML = EcmaValidator(TOML_SCHEMA)


def _yaml_code_accepts(doc: Any) -> bool:
    try:
        parse_config(doc)
    except ConfigError:
        return False
    return True


def _toml_code_accepts(doc: dict[str, Any]) -> bool:
    try:
        parse_tools_file(doc)
    except ToolsFileError:
        return False
    return True


# -- the documented differences ---------------------------------------------------------------------------------


def _without_nan(value: Any) -> Any:
    """`value` with every NaN replaced by 1.0: a number every positive-number key takes."""
    if isinstance(value, float) and math.isnan(value):
        return 1.0
    if isinstance(value, dict):
        return {k: _without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nan(v) for v in value]
    return value


def _strip_newline(value: Any) -> Any:
    return value[:-1] if isinstance(value, str) and value.endswith("\n") else value


def _falsy_stand_in(value: Any, kind: type) -> bool:
    return value is not None and not value and not isinstance(value, kind)


def _yaml_as_the_schema_wants(doc: Any) -> Any:
    """A tooldock.yaml the code accepted, with the forms the schema refuses on purpose written as it wants them."""
    if not isinstance(doc, dict):
        return doc
    doc = copy.deepcopy(doc)
    for key, kind in (("secrets", list), ("env", dict), ("audit", dict)):
        if _falsy_stand_in(doc.get(key), kind):
            doc[key] = None
    if isinstance(doc.get("secrets"), list):
        doc["secrets"] = [_strip_newline(s) for s in doc["secrets"]]
    if isinstance(doc.get("env"), dict):
        doc["env"] = {_strip_newline(k): v for k, v in doc["env"].items()}
    for key in ("tools", "tasks"):
        if isinstance(doc.get(key), dict):
            doc[key] = {k: None if _falsy_stand_in(v, list) else v for k, v in doc[key].items()}
    python = doc.get("python")
    if isinstance(python, (int, float)) and not isinstance(python, bool):
        doc["python"] = str(python)
    doc["python"] = _strip_newline(doc.get("python"))
    limits = doc.get("limits")
    if isinstance(limits, dict):
        memory = limits.get("memory")
        if isinstance(memory, int) and not isinstance(memory, bool):
            limits["memory"] = str(memory)
        limits["memory"] = _strip_newline(limits.get("memory"))
    return doc


_REG_NAME = r"[A-Za-z0-9._~%!$&'()*+,;=-]+"


def _url_outside_grammar(url: Any) -> bool:
    """Whether a URL urlsplit takes is beyond the schema's grammar on purpose (see the module's docstring)."""
    if not isinstance(url, str):
        return False
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        return True
    authority = re.split(r"[/?#]", url.partition("://")[2], maxsplit=1)[0]
    # A bracketed host of hex digits and colons that urlsplit took is an IPv6 address: the schema must take it.
    return not re.fullmatch(rf"(?:{_REG_NAME}|\[[0-9A-Fa-f:]+\])(?::[0-9]*)?", authority)


def _toml_as_the_schema_wants(doc: dict[str, Any]) -> dict[str, Any]:
    """A tools.toml the code accepted, with the forms the schema refuses on purpose written as it wants them."""
    doc = copy.deepcopy(doc)
    for server in doc["servers"]:
        if server.get("transport") == "":
            del server["transport"]
        version = server.get("version")
        if isinstance(version, str):
            server["version"] = "".join(c if c.isascii() else "x" for c in version.strip())
        if _url_outside_grammar(server.get("url")):
            server["url"] = "http://h/mcp"
    return doc


def _agree(validator: Any, code_accepts: Callable[[Any], bool], as_wanted: Callable[[Any], Any], doc: Any) -> None:
    by_schema, by_code = validator.is_valid(doc), code_accepts(doc)
    if by_schema and not by_code:
        assert code_accepts(_without_nan(doc)), f"the schema accepts what the code refuses: {doc!r}"
    if by_code and not by_schema:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(as_wanted(doc))]
        assert not errors, f"the code accepts what the schema refuses: {doc!r}: {errors}"


def _agree_yaml(doc: Any) -> None:
    _agree(YAML, _yaml_code_accepts, _yaml_as_the_schema_wants, doc)


def _agree_toml(doc: dict[str, Any]) -> None:
    _agree(TOML, _toml_code_accepts, _toml_as_the_schema_wants, doc)


# -- (a) the same keys ---------------------------------------------------------------------------------------


def _properties(schema: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every property schema in `schema`, with its path of property names (through `items` and `anyOf`; the
    `oneOf` and `allOf` of a server hold constraints on its properties, not properties of their own)."""
    for key, sub in schema.get("properties", {}).items():
        if isinstance(sub, dict):
            yield (*path, key), sub
            yield from _properties(sub, (*path, key))
    if isinstance(schema.get("items"), dict):
        yield from _properties(schema["items"], path)
    for sub in schema.get("anyOf", []):
        yield from _properties(sub, path)


def _prefixed(prefix: str) -> set[str]:
    return {f.name.removeprefix(prefix) for f in dataclasses.fields(NamespaceConfig) if f.name.startswith(prefix)}


def test_the_schemas_are_valid_draft_2020_12_with_an_id_title_and_description():
    assert set(schemas.SCHEMAS) == {"tooldock.yaml", "tools.toml"}
    for name, schema in (("tooldock.yaml", YAML_SCHEMA), ("tools.toml", TOML_SCHEMA)):
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == f"https://tooldock.dev/schemas/{name}.schema.json"
        assert schema["title"] == name and len(schema["description"]) > 100
    with pytest.raises(KeyError, match=r"no schema for 'x\.json'"):
        schemas.load("x.json")


def test_every_property_has_a_description():
    for schema in (YAML_SCHEMA, TOML_SCHEMA):
        for path, sub in _properties(schema):
            assert isinstance(sub.get("description"), str) and len(sub["description"]) > 20, path


def test_tooldock_yaml_has_the_keys_the_code_knows():
    props = YAML_SCHEMA["properties"]
    assert set(props) == KNOWN_KEYS
    assert set(props["limits"]["properties"]) == {f.name for f in dataclasses.fields(Limits)}
    assert set(props["audit"]["properties"]) == _prefixed("audit_")
    assert set(props["tools"]["properties"]) == _prefixed("tools_")
    assert set(props["tasks"]["anyOf"][1]["properties"]) == _prefixed("tasks_")
    for key in ("limits", "audit", "tools"):  # each refuses a key it does not know, as the code does
        assert props[key]["additionalProperties"] is False
        assert not YAML.is_valid({key: {"bogus": 1}}) and not _yaml_code_accepts({key: {"bogus": 1}})
    assert not YAML.is_valid({"bogus": 1}) and not _yaml_code_accepts({"bogus": 1})


def test_tools_toml_has_the_keys_the_code_knows():
    assert set(TOML_SCHEMA["properties"]) == set(TOP_KEYS)
    assert set(SERVER_SCHEMA["properties"]) == set(SERVER_KEYS)
    assert TOML_SCHEMA["additionalProperties"] is False and SERVER_SCHEMA["additionalProperties"] is False
    assert TOML_SCHEMA["required"] == ["servers"] and SERVER_SCHEMA["required"] == ["namespace"]
    assert TOML_SCHEMA["properties"]["servers"]["maxItems"] == MAX_SERVERS


MINIMAL_TOML = {"servers": [{"namespace": "a", "command": "x"}]}
# A server of the kind each server key goes with, to try a value of that key in.
SERVER_FOR = {
    "namespace": {"command": "x"},
    "command": {"namespace": "a"},
    "env": {"namespace": "a", "command": "x"},
    "cwd": {"namespace": "a", "command": "x"},
    "url": {"namespace": "a"},
    "transport": {"namespace": "a", "url": "http://h/mcp"},
    "headers": {"namespace": "a", "url": "http://h/mcp"},
    "registry": {"namespace": "a"},
    "version": {"namespace": "a", "registry": "a/b"},
}


def _yaml_doc(path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _toml_doc(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    if path[0] != "servers" or len(path) == 1:
        return {**MINIMAL_TOML, path[0]: value}
    return {"servers": [{**SERVER_FOR[path[1]], path[1]: value}]}


def test_the_defaults_are_the_codes():
    for path, sub in _properties(YAML_SCHEMA):
        if "default" in sub:
            assert parse_config(_yaml_doc(path, sub["default"])) == parse_config({}) == NamespaceConfig(), path
    assert YAML_SCHEMA["properties"]["network"]["default"] == NamespaceConfig().network
    defaults = 0
    for path, sub in _properties(TOML_SCHEMA):
        if "default" in sub:
            defaults += 1
            assert parse_tools_file(_toml_doc(path, sub["default"])) == parse_tools_file(MINIMAL_TOML), path
    assert defaults == 3 and TOML_SCHEMA["properties"]["startup_timeout"]["default"] == DEFAULT_STARTUP_TIMEOUT


def test_every_example_in_the_schemas_is_accepted_by_the_schema_and_the_code():
    count = 0
    for path, sub in _properties(YAML_SCHEMA):
        for value in sub.get("examples", []):
            count += 1
            doc = _yaml_doc(path, value)
            assert YAML.is_valid(doc) and _yaml_code_accepts(doc), (path, value)
    for path, sub in _properties(TOML_SCHEMA):
        for value in sub.get("examples", []):
            count += 1
            doc = _toml_doc(path, value)
            assert TOML.is_valid(doc) and _toml_code_accepts(doc), (path, value)
    assert count > 30


# -- (b) the examples in the repository --------------------------------------------------------------------------


def _files(name: str) -> list[Path]:
    return sorted(p for folder in ("examples", "tests/fixtures") for p in (ROOT / folder).rglob(name))


_FENCE = re.compile(r"^( *)```(yaml|toml)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def _doc_blocks(kind: str) -> Iterator[tuple[str, str]]:
    """The ```yaml or ```toml blocks of the README and the docs' pages."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for found in _FENCE.finditer(text):
            if found.group(2) == kind:
                line = text.count("\n", 0, found.start()) + 1
                yield f"{page.relative_to(ROOT)}:{line}", textwrap.dedent(found.group(3))


def _yaml_examples() -> list[tuple[str, Any]]:
    found = [(str(p.relative_to(ROOT)), yaml.safe_load(p.read_text(encoding="utf-8"))) for p in _files("tooldock.yaml")]
    for where, text in _doc_blocks("yaml"):
        data = yaml.safe_load(text)
        if isinstance(data, dict) and data and set(data) <= KNOWN_KEYS:  # a tooldock.yaml, not another file
            found.append((where, data))
    return found


def _toml_examples() -> list[tuple[str, Any]]:
    found = [(str(p.relative_to(ROOT)), tomllib.loads(p.read_text(encoding="utf-8"))) for p in _files("tools.toml")]
    for where, text in _doc_blocks("toml"):
        if "[[servers]]" in text:
            found.append((where, tomllib.loads(text)))
    return found


def test_every_tooldock_yaml_in_the_repository_and_its_docs_is_valid():
    found = _yaml_examples()
    wheres = [where for where, _ in found]
    assert "examples/async-tool/tooldock.yaml" in wheres and any(".md:" in where for where in wheres)
    for where, data in found:
        assert _yaml_code_accepts(data), where
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in YAML.iter_errors(data)]
        assert not errors, f"{where}: {errors}"


def test_every_tools_toml_in_the_repository_and_its_docs_is_valid():
    from test_toolsfile import GOOD  # the code's own tests' complete file

    found = [*_toml_examples(), ("tests/test_toolsfile.py GOOD", tomllib.loads(GOOD))]
    assert any(".md:" in where for where, _ in found)
    for where, data in found:
        assert _toml_code_accepts(data), where
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in TOML.iter_errors(data)]
        assert not errors, f"{where}: {errors}"


def test_every_mistake_the_toolsfile_tests_make_is_refused_by_the_schema_too():
    from test_toolsfile import BAD

    checked = 0
    for text, said in BAD:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue
        checked += 1
        assert not TOML.is_valid(data), f"the schema accepts a file the code refuses ({said}): {text!r}"
    assert checked > 30


def test_the_schema_refuses_urls_urlsplit_raises_on():
    for url in ("http://[1:2]/mcp", "http://[::1/mcp", "http://h]/mcp", "http://[1.2.3.4]/", "http://\uff21\uff1ab/"):
        assert not TOML.is_valid({"servers": [{"namespace": "a", "url": url}]}), url
    for url in ("http://[::1]:8080/mcp", "https://[fe80::1]/mcp", "http://[2001:db8::8a2e:370:7334]"):
        assert TOML.is_valid({"servers": [{"namespace": "a", "url": url}]}), url


# -- (c) agreement on generated documents -----------------------------------------------------------------------
#
# Each document is a valid one with up to two keys given any value (right, wrong type, out of range, unknown), so
# that most of them are valid or wrong in one place: both directions get tested on every key.


def _mostly_valid(valid: dict[Any, Any], anything: dict[Any, Any], required: tuple[Any, ...] = ()) -> Any:
    """Mappings of `valid` values (the `required` keys always there), then up to two keys set from `anything`."""
    changed = st.sampled_from(list(anything)).flatmap(lambda key: anything[key].map(lambda value: (key, value)))
    base = st.fixed_dictionaries(
        {k: v for k, v in valid.items() if k in required},
        optional={k: v for k, v in valid.items() if k not in required},
    )
    return st.tuples(base, st.lists(changed, max_size=2)).map(lambda both: {**both[0], **dict(both[1])})


# Values of every JSON type, small; YAML adds null, TOML dates.
SCALARS = (
    st.booleans(),
    st.integers(-3, 3),
    st.floats(),
    st.text(max_size=4),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.sampled_from(["a", "B"]), st.integers(0, 2), max_size=2),
)
JUNK = st.one_of(st.none(), *SCALARS)
POSITIVE = st.one_of(st.floats(min_value=1e-9, max_value=1e9), st.integers(1, 10**9))
WHOLE = st.one_of(st.integers(1, 10**9), st.sampled_from([1.0, 8.0, 1e9]))
NUMBERS = st.one_of(
    st.sampled_from(
        [None, 0, -1, 1, 0.5, 1.0, 1.5, 2, 10**9, 10**9 + 1, 1e9, 1e9 + 0.5, -0.0, math.nan, math.inf, True, "5"]
    ),
    st.integers(-2, 2 * 10**9),
    st.floats(min_value=-2, max_value=2e9),
    JUNK,
)
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True)
NAMES = st.one_of(
    st.sampled_from(["GITHUB_TOKEN", "_x", "a1", "1A", "lower-case", "A B", "", "A\n", "A\nB", "é", "A\n\n"]),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,4}\n?", fullmatch=True),
    st.text(max_size=3),
)
GOOD_GLOB = st.one_of(st.text(min_size=1, max_size=4), st.sampled_from(["get_*", "*", "a" * 200]))
GLOB = st.one_of(st.sampled_from(["get_*", "*", "", "a" * 200, "a" * 201]), st.text(max_size=3), JUNK)
GLOBS = st.one_of(st.lists(GLOB, max_size=3), JUNK)
GOOD_GLOBS = st.one_of(st.lists(GOOD_GLOB, max_size=2), st.none())


def _globs(kinds: tuple[str, str]) -> Any:
    valid = {kinds[0]: GOOD_GLOBS, kinds[1]: GOOD_GLOBS}
    return _mostly_valid(valid, {**dict.fromkeys(kinds, GLOBS), "other": GLOBS})


LIMITS_VALID = {
    "timeout": POSITIVE,
    "concurrency": WHOLE,
    "memory": st.from_regex(r"[0-9]{1,4}[kmgKMG]?", fullmatch=True),
    "cpus": POSITIVE,
    "rate": POSITIVE,
    "burst": WHOLE,
}
LIMITS_ANY = {
    **dict.fromkeys(("timeout", "concurrency", "cpus", "rate", "burst"), NUMBERS),
    "memory": st.one_of(
        st.sampled_from(["256m", "1g", "1G", "512", "0", "lots", "256mb", "-1", "", "256m\n", "1.5g", 256, -1]),
        st.from_regex(r"[0-9]{1,3}[kmgKMGbt]?\n?", fullmatch=True),
        JUNK,
    ),
    "bogus": JUNK,
}
YAML_VALID = {
    "description": st.one_of(st.text(max_size=5), st.integers(), st.floats(), st.booleans(), st.none()),
    "version": st.one_of(st.sampled_from(["1.0.0", 1.1, 2]), st.none()),
    "author": st.one_of(st.text(max_size=5), st.none()),
    "secrets": st.one_of(st.lists(NAME, max_size=3), st.none()),
    "env": st.one_of(
        st.dictionaries(NAME, st.one_of(st.text(max_size=3), st.integers(), st.floats(), st.booleans()), max_size=3),
        st.none(),
    ),
    "network": st.sampled_from(["none", "egress"]),
    "limits": st.one_of(st.fixed_dictionaries({}, optional=LIMITS_VALID), st.none()),
    "python": st.one_of(st.from_regex(r"3\.[0-9]{1,2}", fullmatch=True), st.none()),
    "idle_timeout": st.one_of(POSITIVE, st.none()),
    "audit": st.one_of(st.fixed_dictionaries({}, optional={"arguments": st.booleans()}), st.none()),
    "tools": st.one_of(st.fixed_dictionaries({}, optional={"allow": GOOD_GLOBS, "deny": GOOD_GLOBS}), st.none()),
    "tasks": st.one_of(
        st.fixed_dictionaries({}, optional={"optional": GOOD_GLOBS, "required": GOOD_GLOBS}),
        st.lists(GOOD_GLOB, max_size=2),
        st.none(),
    ),
}
YAML_ANY = {
    "description": st.one_of(JUNK, st.text()),
    "version": JUNK,
    "author": JUNK,
    "secrets": st.one_of(st.lists(st.one_of(NAMES, JUNK), max_size=3), JUNK),
    "env": st.one_of(
        st.dictionaries(NAMES, st.one_of(st.text(max_size=3), st.integers(), st.floats(), JUNK), max_size=3), JUNK
    ),
    "network": st.one_of(st.sampled_from(["none", "egress", "host", "", "None", "EGRESS", None, 0]), JUNK),
    "limits": st.one_of(_mostly_valid(LIMITS_VALID, LIMITS_ANY), JUNK),
    "python": st.one_of(
        st.sampled_from(["3.12", "3.9", "3.100", "2.7", "3", "three", "3.12\n", " 3.12", 3.12, 3.1, 3]),
        st.from_regex(r"[23]\.[0-9]{0,3}", fullmatch=True),
        st.floats(3, 4),
        JUNK,
    ),
    "idle_timeout": NUMBERS,
    "audit": st.one_of(
        st.fixed_dictionaries({}, optional={"arguments": st.one_of(st.booleans(), JUNK), "results": JUNK}), JUNK
    ),
    "tools": st.one_of(_globs(("allow", "deny")), JUNK),
    "tasks": st.one_of(_globs(("optional", "required")), st.lists(GLOB, max_size=2), JUNK),
    "bogus": JUNK,
    "Network": JUNK,
    1: JUNK,
}
TOOLDOCK_YAML = st.one_of(
    _mostly_valid(YAML_VALID, YAML_ANY),
    st.fixed_dictionaries({}, optional=YAML_ANY),
    st.sampled_from([None, [], "text", 3]),
)

TOML_JUNK = st.one_of(*SCALARS, st.dates())
GOOD_HOST = st.one_of(
    st.from_regex(rf"{_REG_NAME}", fullmatch=True),
    st.sampled_from(["h", "127.0.0.1", "example.com", "localhost"]),
    st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
    st.ip_addresses(v=6).map(lambda a: f"[{a.exploded}]"),
)
HOSTS = st.one_of(
    GOOD_HOST,
    st.sampled_from(["a b", "", "ü.de", "h\n", 'a"b', "a{b", "a\\b", "%41", "[1:2]", "[::1", "h]", "[1.2.3.4]"]),
    st.sampled_from(["[::ffff:1.2.3.4]", "[fe80::1%25eth0]", "[v1.x]", "[::1]x"]),
    st.from_regex(r"\[[0-9a-f:]{0,12}\]", fullmatch=True),
    st.text(alphabet="ab.-%:@[]", max_size=4),
)
GOOD_URL = st.tuples(
    st.sampled_from(["http", "https", "HTTP", "hTtPs"]),
    st.just("://"),
    GOOD_HOST,
    st.sampled_from(["", ":8080", ":"]),
    st.one_of(
        st.sampled_from(["", "/mcp", "/sse", "/x/sse/", "?q=1", "#f", "/@x", '/"<>']),
        st.from_regex(r"/[!-~]{0,6}", fullmatch=True),
    ),
).map("".join)
URLS = st.one_of(
    GOOD_URL,
    st.tuples(
        st.sampled_from(["", "", "", " ", "\t", "\x01"]),
        st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "", "http2"]),
        st.sampled_from(["://", "://", "://", ":/", "//"]),
        st.sampled_from(["", "", "", "u@", "u:p@", "@", ":@", ":p@"]),
        HOSTS,
        st.sampled_from(["", "", ":8080", ":", ":x", ":99999"]),
        st.sampled_from(["", "/mcp", "/sse", "?q=${secret:K}", "/a b", "#f", "/\n", "/${secret:K}"])
        | st.text(max_size=3),
    ).map("".join),
    TOML_JUNK,
)
GOOD_VALUE = st.one_of(
    st.from_regex(r"[^\n\r\x00$]{0,5}", fullmatch=True),
    NAME.map(lambda n: f"Bearer ${{secret:{n}}}"),
    st.integers(),
    st.floats(),
)
VALUES = st.one_of(
    st.sampled_from(
        [
            "x",
            "Bearer ${secret:T}",
            "${secret:not-a-name}",
            "${secret:}",
            "${secret:A",
            "a\nb",
            "a\rb",
            "\0",
            "${secret:${secret:A}",
            "${secret:A}${secret:1}",
            "$ {secret:A}",
        ]
    ),
    st.text(max_size=4),
    TOML_JUNK,
)
HEADER_NAME = st.from_regex(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,6}", fullmatch=True)
SHELL_WORD = st.one_of(
    st.from_regex(r"[a-z0-9_./=-]{1,5}", fullmatch=True),
    st.from_regex(r"'[^']{0,4}'", fullmatch=True),
    st.from_regex(r'"(?:[^"\\]|\\.){0,4}"', fullmatch=True),
    st.from_regex(r"[a-z]\\.", fullmatch=True),
)
SERVER_VALID = {
    "namespace": st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,8}", fullmatch=True), st.just("")),
    "command": st.lists(SHELL_WORD, min_size=1, max_size=3).map(" ".join),
    "url": GOOD_URL,
    "registry": st.from_regex(r"[A-Za-z0-9._-]{1,5}/[A-Za-z0-9._/-]{1,5}", fullmatch=True),
    "transport": st.sampled_from(["streamable-http", "sse"]),
    "headers": st.dictionaries(HEADER_NAME, GOOD_VALUE, max_size=2),
    "env": st.dictionaries(NAME, GOOD_VALUE, max_size=2),
    "cwd": st.one_of(st.from_regex(r"[a-z.]{1,3}(/[a-z.]{1,3}){0,2}", fullmatch=True), st.just("/srv/..")),
    "version": st.from_regex(r"[!-~]{0,8}", fullmatch=True),
}
SERVER_ANY = {
    "namespace": st.one_of(
        st.sampled_from(["time", "", "a b", "_a", "a" * 63, "a" * 64, "gh-1", "a\n", "-a"]),
        st.from_regex(r"[A-Za-z0-9_-]{0,4}", fullmatch=True),
        TOML_JUNK,
    ),
    "command": st.one_of(
        st.sampled_from(
            [
                "uvx mcp-server-time",
                "",
                "   ",
                "\t\n",
                "run 'unclosed",
                'run "x\\"',
                "a\\",
                "run --token ${secret:T}",
                "x\0y",
                "''",
                "\x0b",
                "echo \"a b\" 'c d' e\\ f",
            ]
        ),
        st.text(alphabet=" ab'\"\\\t$", max_size=6),
        TOML_JUNK,
    ),
    "url": URLS,
    "registry": st.one_of(
        st.sampled_from(["io.github.example/filesystem", "no-slash", "a/b", "", "a/b c", "/b", "a/", "a/b/c"]),
        st.from_regex(r"[a-z./_ -]{0,4}/[a-z./ -]{0,3}", fullmatch=True),
        TOML_JUNK,
    ),
    "transport": st.one_of(st.sampled_from(["streamable-http", "sse", "", "ws", "SSE"]), TOML_JUNK),
    "headers": st.one_of(
        st.dictionaries(
            st.one_of(st.sampled_from(["Authorization", "Bad Header", "X-Key", "a:b", "", "A\n", "é"]), NAMES),
            st.one_of(VALUES, GOOD_VALUE),
            max_size=2,
        ),
        TOML_JUNK,
    ),
    "env": st.one_of(st.dictionaries(NAMES, st.one_of(VALUES, GOOD_VALUE), max_size=2), TOML_JUNK),
    "cwd": st.one_of(
        st.sampled_from(["data", "", "..", "../up", "/abs/..", "a/../b", "a/..b", "./..", "a//..", "...", "a\n/.."]),
        st.text(alphabet="./a\n", max_size=6),
        TOML_JUNK,
    ),
    "version": st.one_of(
        st.sampled_from(["1.2.0", "", "1 2", " 1.0 ", "1.0\n", "é1", "a" * 255, "a" * 256, "\u200b", "1\x1f"]),
        st.text(max_size=4),
        TOML_JUNK,
    ),
    "extra": TOML_JUNK,
}
# The keys that go with each kind of server.
KIND_KEYS = {
    "command": ("namespace", "command", "env", "cwd"),
    "url": ("namespace", "url", "transport", "headers"),
    "registry": ("namespace", "registry", "headers", "env", "cwd", "version"),
}


def _server_of_kind(kind: str) -> Any:
    valid = {k: SERVER_VALID[k] for k in KIND_KEYS[kind]}
    return _mostly_valid(valid, SERVER_ANY, required=("namespace", kind))


VALID_SERVER = st.sampled_from(list(KIND_KEYS)).flatmap(
    lambda kind: st.fixed_dictionaries(
        {k: SERVER_VALID[k] for k in ("namespace", kind)},
        optional={k: SERVER_VALID[k] for k in KIND_KEYS[kind] if k not in ("namespace", kind)},
    )
)
SERVERS = st.one_of(
    st.sampled_from(list(KIND_KEYS)).flatmap(_server_of_kind),
    st.fixed_dictionaries({}, optional=SERVER_ANY),
    TOML_JUNK,
)
TOML_VALID = {
    "servers": st.lists(VALID_SERVER, min_size=1, max_size=3),
    "active_toolsets": st.lists(st.text(min_size=1, max_size=4), max_size=3),
    "restart": st.booleans(),
    "startup_timeout": st.one_of(st.floats(min_value=1e-9, max_value=600), st.integers(1, 600)),
}
TOML_ANY = {
    "servers": st.one_of(
        st.lists(st.one_of(VALID_SERVER, SERVERS), min_size=1, max_size=3),
        st.sampled_from([[], [{"namespace": f"s{i}", "command": "x"} for i in range(MAX_SERVERS + 1)]]),
        st.just([{"namespace": f"s{i}", "command": "x"} for i in range(MAX_SERVERS)]),
        TOML_JUNK,
    ),
    "active_toolsets": st.one_of(st.lists(st.one_of(st.text(max_size=3), TOML_JUNK), max_size=3), TOML_JUNK),
    "restart": st.one_of(st.booleans(), TOML_JUNK),
    "startup_timeout": st.one_of(st.sampled_from([0, 0.5, 30, 600, 600.0, 600.5, -1, math.nan, math.inf]), NUMBERS),
    "bogus": TOML_JUNK,
}
TOOLS_TOML = st.one_of(
    _mostly_valid(TOML_VALID, TOML_ANY, required=("servers",)),
    st.fixed_dictionaries({}, optional=TOML_ANY),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TOOLDOCK_YAML)
def test_the_tooldock_yaml_schema_agrees_with_parse_config(doc):
    _agree_yaml(doc)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TOOLS_TOML)
def test_the_tools_toml_schema_agrees_with_parse_tools_file(doc):
    _agree_toml(doc)


# The same, on cases chosen by hand: each key's valid values and the mistakes next to them, so that a changed type,
# enum or bound in a schema fails here every time, not only when Hypothesis happens to draw the value.
YAML_CASES = [
    None,
    {},
    [1],
    {"bogus": 1},
    *({key: value} for key in ("description", "version", "author") for value in ("x", 1, 1.5, True, None, [], {})),
    *({"secrets": v} for v in (["A_KEY"], ["_a1"], ["1A"], ["a-b"], "A_KEY", [1], None, [], "", 0, ["A\n"])),
    *({"env": v} for v in ({"A": "x"}, {"A": 1}, {"A": 1.5}, {"A": True}, {"A": None}, {"A": []}, {"1A": "x"})),
    *({"env": v} for v in ({"A": {}}, None, {}, [], ["A=x"], "A=x", 0, {"A\n": "x"})),
    *({"network": v} for v in ("none", "egress", "host", "", None, True, ["none"])),
    *(
        {"limits": {key: v}}
        for key in ("timeout", "cpus", "rate")
        for v in (1, 0.5, 1e9, 0, -1, 1e9 + 1, math.nan, math.inf, True, "1", None)
    ),
    *(
        {"limits": {key: v}}
        for key in ("concurrency", "burst")
        for v in (1, 2.0, 10**9, 0, -1, 1.5, 10**9 + 1, math.nan, True, "1", None)
    ),
    *({"limits": {"memory": v}} for v in ("256m", "1G", "512", "256mb", "lots", "", 256, -1, 8.0, 1.5, True, None)),
    {"limits": {"memory": "1g\n"}},
    *({"limits": v} for v in ({}, None, {"bogus": 1}, [], "30", 0)),
    *({"python": v} for v in ("3.12", "3.9", "3", "3.123", "2.7", "three", 3.12, 3.1, 3, None, "3.12\n", True)),
    *({"idle_timeout": v} for v in (300, 0.5, 0, -1, 1e9 + 1, math.nan, math.inf, True, "300", None)),
    *({"audit": v} for v in ({"arguments": True}, {"arguments": False}, {"arguments": "yes"}, {"arguments": None})),
    *({"audit": v} for v in ({"results": True}, {}, None, True, False, [], "x")),
    *({"tools": v} for v in ({"allow": ["get_*"], "deny": ["x"]}, {"allow": []}, {"allow": None}, {"allow": ""})),
    *({"tools": v} for v in ({"allow": "get_*"}, {"allow": [""]}, {"allow": ["a" * 201]}, {"allow": [1]}, ["x"])),
    *({"tools": v} for v in ({"other": []}, None, {}, "x", 0)),
    *({"tasks": v} for v in (["a_*"], [], {"optional": ["a"], "required": ["b"]}, {"required": "b"}, {"x": []})),
    *({"tasks": v} for v in ({"optional": None}, {"optional": 0}, None, "a_*", 0, [""], [1])),
]


@pytest.mark.parametrize("doc", YAML_CASES, ids=[repr(c)[:60] for c in YAML_CASES])
def test_the_tooldock_yaml_schema_agrees_with_parse_config_on_chosen_cases(doc):
    _agree_yaml(doc)


def _server(**keys: Any) -> dict[str, Any]:
    return {"servers": [{"namespace": "a", **keys}]}


TOML_CASES = [
    MINIMAL_TOML,
    {},
    {"servers": []},
    {"servers": {}},
    {"servers": [1]},
    {**MINIMAL_TOML, "bogus": 1},
    *({**MINIMAL_TOML, "active_toolsets": v} for v in (["a*"], [], [""], "a*", [1], 1)),
    *({**MINIMAL_TOML, "restart": v} for v in (True, False, "yes", 1, 0)),
    *({**MINIMAL_TOML, "startup_timeout": v} for v in (30, 0.5, 600, 600.5, 0, -1, math.inf, math.nan, True, "30")),
    *({"servers": [{"namespace": v, "command": "x"}]} for v in ("a", "", "a-b_1", "_a", "a b", "a" * 64, 1)),
    {"servers": [{"command": "x"}]},
    *(_server(command=v) for v in ("x", "", "  ", "a 'b c'", "a 'b", "a\\", "${secret:T}", "\0", 3, "''")),
    *(_server(url=v) for v in ("http://h/mcp", "HTTPS://h", "ftp://h", "http:///mcp", "https://u:p@h", "http://h:x")),
    *(_server(url=v) for v in ("http://[::1]:80/mcp", "http://[1:2]/", "https://h/${secret:K}", "", "http://h h/")),
    *(_server(registry=v) for v in ("a/b", "io.github.x/y/z", "ab", "a/b c", "", 1)),
    _server(command="x", url="http://h/mcp"),
    _server(command="", url="http://h/mcp"),
    _server(command="x", registry="a/b"),
    _server(url="http://h/mcp", registry="a/b"),
    _server(),
    *(_server(url="http://h/mcp", transport=v) for v in ("streamable-http", "sse", "ws", "", 1)),
    *(_server(command="x", transport=v) for v in ("sse", "")),
    _server(registry="a/b", transport="sse"),
    *(_server(url="http://h/mcp", headers=v) for v in ({"A": "b"}, {"A B": "b"}, {"A": True}, {"A": 1}, ["A"])),
    *(_server(url="http://h/mcp", headers=v) for v in ({"A": "${secret:T}"}, {"A": "${secret:t-1}"}, {"A": "a\nb"})),
    _server(command="x", headers={"A": "b"}),
    _server(registry="a/b", headers={"A": "b"}),
    *(_server(command="x", env=v) for v in ({"A": "b"}, {"1A": "b"}, {"A": 1.5}, {"A": False}, {"A": "\0"}, [])),
    _server(url="http://h/mcp", env={"A": "b"}),
    _server(registry="a/b", env={"A": "b"}),
    *(_server(command="x", cwd=v) for v in ("data", "", "..", "a/../b", "/a/..", "..a", 1)),
    *(_server(url="http://h/mcp", cwd=v) for v in ("", "data")),
    *(_server(registry="a/b", version=v) for v in ("1.2.0", "", "1 2", "a" * 256, 3, " 1.0")),
    *(_server(**{kind: value}, version="1.0") for kind, value in (("command", "x"), ("url", "http://h/mcp"))),
    _server(command="x", version=""),
    _server(command="x", extra=1),
]


@pytest.mark.parametrize("doc", TOML_CASES, ids=[repr(c)[:60] for c in TOML_CASES])
def test_the_tools_toml_schema_agrees_with_parse_tools_file_on_chosen_cases(doc):
    _agree_toml(doc)


def test_the_schemas_are_package_data():
    """Shipped inside the package (the wheel holds tooldock/namespace/schemas/*.json), read as JSON."""
    folder = ROOT / "tooldock" / "namespace" / "schemas"
    for name, file in schemas.SCHEMAS.items():
        assert json.loads((folder / file).read_text(encoding="utf-8")) == schemas.load(name)
