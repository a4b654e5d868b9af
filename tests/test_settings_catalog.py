"""The settings catalogue: each module's SETTINGS (tooldock.envvars.EnvVar), from which the settings reference
(docs/reference/settings.md) is generated. Every entry is described, named once, read by the code, and a
documented default that is a plain value is the one the code uses."""

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

from tooldock.envvars import EnvVar, names
from tooldock.manager.settings import ManagerSettings
from tooldock.runtime.relay.config import RelayConfig
from tooldock.runtime.settings import SECRET_VARS, Settings

MODULES = (
    "tooldock.runtime.settings",
    "tooldock.runtime.relay.config",
    "tooldock.manager.settings",
    "tooldock.manager.analysis.fetch",
    "tooldock.secrets",
    "tooldock.cli.relay",
    "tooldock.builder",
    "tooldock.keys",
    "tooldock.oauth",
    "tooldock.worker.tls",
)
SOURCES = Path(__file__).resolve().parent.parent / "tooldock"


def _catalogue() -> list[tuple[str, EnvVar]]:
    return [(module, setting) for module in MODULES for setting in importlib.import_module(module).SETTINGS]


CATALOGUE = _catalogue()


# (a) ---------------------------------------------------------------------------------------------------------


def test_names_are_unique_across_modules():
    seen: dict[str, str] = {}
    for module, setting in CATALOGUE:
        assert setting.name not in seen, f"{setting.name} is in both {seen[setting.name]} and {module}"
        seen[setting.name] = module


@pytest.mark.parametrize("module", MODULES)
def test_each_module_describes_its_settings(module):
    mod = importlib.import_module(module)
    assert isinstance(mod.SETTINGS_TITLE, str) and mod.SETTINGS_TITLE.strip()
    assert isinstance(mod.SETTINGS_INTRO, str) and mod.SETTINGS_INTRO.strip()
    assert mod.SETTINGS and all(isinstance(setting, EnvVar) for setting in mod.SETTINGS)
    assert mod.ENV_VARS == names(mod.SETTINGS)
    assert "](#" not in mod.SETTINGS_INTRO, "links must be relative to docs/reference/settings.md, not README anchors"


@pytest.mark.parametrize("module, setting", CATALOGUE, ids=[setting.name for _, setting in CATALOGUE])
def test_each_setting_has_a_default_and_a_meaning(module, setting):
    assert re.fullmatch(r"[A-Z][A-Z0-9_]*", setting.name)
    assert setting.default.strip() and setting.default == setting.default.strip()
    assert setting.meaning.strip() and setting.meaning == setting.meaning.strip()
    assert "\n" not in setting.meaning, "one paragraph"
    assert "](#" not in setting.meaning, "links must be relative to docs/reference/settings.md, not README anchors"


# (b) ---------------------------------------------------------------------------------------------------------
# A documented default that is one backticked value (`30`, `true`, `~/.config/tooldock/keys`) must parse to what
# leaving the variable unset gives: change a default in the code without its EnvVar and this fails.

BASE = {"TOOLDOCK_BEARER_TOKEN": "x" * 16}


def _comparable(settings: Settings) -> Settings:
    # Random per run: the state key. `socket_dir` is None when unset and means `<state_dir>/sockets`.
    return dataclasses.replace(settings, bearer_token="", state_keys=(), socket_dir=settings.sockets)


def _gateway(env):
    return _comparable(Settings.from_env({**BASE, **env}))


def _manager(env):
    settings = ManagerSettings.from_env(Path("."), env={**BASE, **env})
    return dataclasses.replace(settings, runtime=_comparable(settings.runtime))


def _relay_socket(env):
    env = {**BASE, **env}
    return RelayConfig.from_env(Settings.from_env(env), env)


def _oauth(env):
    from tooldock.oauth import OAuthConfig

    return OAuthConfig.from_env({"TOOLDOCK_OAUTH_ISSUER": "https://id.example.com", **env})


def _discovery(env):
    from tooldock.runtime.backends.network import NetworkBackend

    env = {**BASE, "TOOLDOCK_WORKERS": "ns=unix:/nonexistent.sock", **env}
    return NetworkBackend.from_env(Settings.from_env(env), env).interval


def _registry(env):
    from tooldock.upstream.registry import registry_url

    return registry_url(env)


def _from_environ(target, *args):
    """A reader of os.environ: `target` ("module:function") called with `args` while the variable (and any it
    falls back on) is set in os.environ."""
    module, _, function = target.partition(":")

    def reader(env):
        read = getattr(importlib.import_module(module), function)
        with pytest.MonkeyPatch.context() as mp:
            for name, value in env.items():
                mp.setenv(name, value)
            return read(*args)

    return reader


READERS = {
    **{name: _gateway for name in importlib.import_module("tooldock.runtime.settings").ENV_VARS},
    "TOOLDOCK_DISCOVERY_INTERVAL": _discovery,  # read by `serve --backend network` (runtime/backends/network.py)
    "MCP_REGISTRY_URL": _registry,  # listed with the gateway's settings, read by tooldock.upstream.registry
    **{name: _manager for name in importlib.import_module("tooldock.manager.settings").ENV_VARS},
    **{name: _relay_socket for name in importlib.import_module("tooldock.runtime.relay.config").ENV_VARS},
    "TOOLDOCK_SECRETS_DIR": _from_environ("tooldock.secrets.store:default_dir"),
    "TOOLDOCK_AGE_KEY_FILE": _from_environ("tooldock.secrets.keys:key_file"),
    "TOOLDOCK_KEYS_DIR": _from_environ("tooldock.keys.store:default_dir"),
    **{name: _oauth for name in importlib.import_module("tooldock.oauth").ENV_VARS},
    "EDITOR": _from_environ("tooldock.secrets.edit:_editor_command", None),
    "SOURCE_DATE_EPOCH": _from_environ("tooldock.builder.tarball:source_date_epoch"),
    "DOCKER_CONFIG": _from_environ("tooldock.builder.registryauth:docker_config_path"),
    "TOOLDOCK_CACHE_DIR": _from_environ("tooldock.cli.common:cache_dir"),
}
# Plain-value defaults this test cannot check, and why.
EXCEPTIONS = {
    "NPM_REGISTRY_URL": "read inside fetch_package (a download), with no function of its own to call",
    "PYPI_URL": "read inside fetch_package (a download), with no function of its own to call",
    "TOOLDOCK_SCHEMA_ZYGOTE": "read inside builder.schema.extract while it extracts a namespace's schemas",
    "TOOLDOCK_SCHEMA_ZYGOTE_IDLE": "passed as text to the schema helper process it starts; never parsed here",
}
# Known disagreements between a documented default and the code: strict xfails, so fixing one is noticed.
KNOWN_WRONG: dict[str, str] = {}
# Variables a reader falls back on: unset while a default is checked.
FALLBACKS = ("XDG_CACHE_HOME", "SOPS_AGE_KEY_FILE", "VISUAL", "BEARER_TOKEN", "CORE_URL")
# A value other than the default, to show the variable is read at all (else the check above proves nothing).
OTHER = {
    "TOOLDOCK_LOG_FORMAT": "json",
    "INTERNAL_ALLOWED_CIDRS": "10.0.0.0/8",
    "TOOLDOCK_RELAY_SOCKET_MODE": "600",
    "EDITOR": "nano",
    "TOOLDOCK_OAUTH_SCOPES": "read=api://tooldock/read",
    "TOOLDOCK_OAUTH_ALGORITHMS": "ES256",
}
LITERAL = re.compile(r"`([^`]+)`")


def _other(name: str, literal: str) -> str:
    if name in OTHER:
        return OTHER[name]
    if literal in ("true", "false"):
        return "false" if literal == "true" else "true"
    if re.fullmatch(r"\d+", literal):
        return str(int(literal) * 2 + 1)
    if re.fullmatch(r"\d+\.\d*", literal):
        return str(float(literal) * 2 + 1)
    if literal.startswith(("http://", "https://")):
        return "http://127.0.0.1:9"
    if literal.startswith(("~", "$", "/")):
        return "/tmp/tooldock-other/" + literal.rsplit("/", 1)[-1]
    raise AssertionError(f"no other value for {name}={literal}: add one to OTHER")


def _plain_defaults():
    for _module, setting in CATALOGUE:
        match = LITERAL.fullmatch(setting.default)
        if not match:
            continue  # "generated per run", "unset", "the gateway's group", "—": nothing to compare
        marks = ()
        if setting.name in KNOWN_WRONG:
            marks = pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[setting.name])
        yield pytest.param(setting.name, match.group(1), id=setting.name, marks=marks)


def test_every_plain_default_has_a_reader_or_a_reason():
    plain = {param.values[0] for param in _plain_defaults()}
    assert plain - READERS.keys() - EXCEPTIONS.keys() == set()
    assert EXCEPTIONS.keys() <= plain and KNOWN_WRONG.keys() <= plain
    assert not EXCEPTIONS.keys() & READERS.keys()


@pytest.mark.parametrize("name, literal", list(_plain_defaults()))
def test_documented_default_is_the_code_default(name, literal, monkeypatch):
    if name in EXCEPTIONS:
        pytest.skip(EXCEPTIONS[name])
    for variable in (*FALLBACKS, name):
        monkeypatch.delenv(variable, raising=False)
    read = READERS[name]
    unset = read({})
    if "$TOOLDOCK_STATE_DIR" in literal:
        literal = literal.replace("$TOOLDOCK_STATE_DIR", str(Settings.from_env(BASE).state_dir))
    assert read({name: literal}) == unset, f"{name}: the documented default `{literal}` is not what the code uses"
    assert read({name: _other(name, literal)}) != unset, f"{name} is not read by {read.__name__}"


# (c) ---------------------------------------------------------------------------------------------------------


def _source_text() -> str:
    text = "\n".join(path.read_text(encoding="utf-8") for path in sorted(SOURCES.rglob("*.py")))
    return re.sub(r'EnvVar\(\s*"[A-Z0-9_]+"', "EnvVar(", text)  # the catalogue's own entries


SOURCE_TEXT = _source_text()


@pytest.mark.parametrize("name", [setting.name for _, setting in CATALOGUE])
def test_each_setting_is_read_by_the_code(name):
    if name.endswith("_FILE") and name.removesuffix("_FILE") in SECRET_VARS:
        return  # read as f"{name}_FILE" by runtime.settings.with_secret_files, for each of SECRET_VARS
    assert f'"{name}"' in SOURCE_TEXT or f"'{name}'" in SOURCE_TEXT, f"nothing in tooldock/ reads {name}"
