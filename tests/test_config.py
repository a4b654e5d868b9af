"""`tooldock.yaml` and gateway settings: every bad value is refused with a message that says why."""

import pytest

from tooldock.namespace.config import ConfigError, parse_config
from tooldock.runtime.settings import Settings, SettingsError


def test_config_round_trips_through_its_label_form():
    from tooldock.namespace.config import config_to_dict

    raw = {"description": "d", "secrets": ["A_KEY"], "env": {"X": "1"}, "network": "egress",
           "limits": {"timeout": 5, "concurrency": 2, "memory": "256m"}, "python": "3.11",
           "audit": {"arguments": True}}
    cfg = parse_config(raw)
    assert parse_config(config_to_dict(cfg)) == cfg
    assert parse_config(config_to_dict(parse_config({}))) == parse_config({})


def test_seed_example_config():
    cfg = parse_config({
        "description": "GitHub API tools", "version": "1.0.0", "author": "someone",
        "secrets": ["GITHUB_TOKEN"], "env": {"GITHUB_API_URL": "https://api.github.com", "RETRIES": 3},
        "network": "egress", "limits": {"timeout": 5, "concurrency": 2, "memory": "256m", "cpus": 0.5},
        "python": "3.12",
    })
    assert cfg.secrets == ("GITHUB_TOKEN",)
    assert dict(cfg.env) == {"GITHUB_API_URL": "https://api.github.com", "RETRIES": "3"}
    assert cfg.limits.timeout == 5.0 and cfg.limits.concurrency == 2 and cfg.network == "egress"


@pytest.mark.parametrize(
    "data, fragment",
    [
        ([1, 2], "mapping"),
        ({"unknown": 1}, "unknown key"),
        ({"secrets": ["lower-case"]}, "secrets"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"A": {"nested": 1}}}, "env.A"),
        ({"network": "host"}, "network"),
        ({"limits": {"timeout": 0}}, "limits.timeout"),
        ({"limits": {"timeout": float("nan")}}, "limits.timeout"),  # YAML's .nan: every call failed 500
        ({"limits": {"timeout": float("inf")}}, "limits.timeout"),
        ({"limits": {"rate": float("nan")}}, "limits.rate"),
        ({"idle_timeout": float("nan")}, "idle_timeout"),
        ({"limits": {"concurrency": 1.5}}, "whole number"),
        ({"limits": {"memory": "lots"}}, "limits.memory"),
        ({"limits": {"bogus": 1}}, "limits"),
        ({"python": "three"}, "python"),
        ({"audit": {"arguments": "yes"}}, "audit"),
        ({"audit": {"results": True}}, "audit"),
        ({"audit": True}, "audit"),
    ],
)
def test_bad_configs(data, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config(data)


def test_every_mistake_in_a_config_is_said_at_once():
    """Not one per reload: an LLM (or a person) fixing the file sees all it has to fix."""
    with pytest.raises(ConfigError) as caught:
        parse_config({"bogus": 1, "network": "host", "limits": {"timeout": -5, "concurrency": "lots",
                                                                  "memory": "lots"}, "tools": ["x"]})
    said = str(caught.value).split("; ")
    assert said[0].startswith("unknown key(s): bogus (known keys: audit, author,"), said
    assert said[1:] == ["'network' must be 'none' or 'egress'", "'limits.memory' must look like '256m' or '1g'",
                        "'limits.timeout' must be a positive number (at most 1e+09)",
                        "'limits.concurrency' must be a positive number (at most 1e+09)",
                        "'tools' must be a mapping like {allow: ['get_*'], deny: ['delete_*']}"], said


def test_settings_defaults_generate_a_token():
    settings = Settings.from_env({})
    assert settings.token_generated and len(settings.bearer_token) >= 32
    assert settings.bearer_token not in repr(settings)


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"TOOL_CALL_TIMEOUT_SECONDS": "soon"}, "TOOL_CALL_TIMEOUT_SECONDS"),
        ({"NAMESPACE_MAX_CONCURRENCY": "0"}, "greater than 0"),
        ({"TOOL_CALL_TIMEOUT_SECONDS": "nan"}, "finite"),
        ({"TOOLDOCK_DRAIN_TIMEOUT": "inf"}, "finite"),
        ({"MCP_SESSION_TTL_HOURS": "inf"}, "finite"),
        ({"INTERNAL_ALLOWED_CIDRS": "not-a-net"}, "INTERNAL_ALLOWED_CIDRS"),
        ({"TOOLDOCK_BEARER_TOKEN": "short"}, "at least 8"),
        ({"TOOLDOCK_DNS_REBINDING_PROTECTION": "maybe"}, "true or false"),
        ({"LOG_RETENTION_DAYS": "0"}, "greater than 0"),
        ({"METRICS_TOKEN": "short"}, "METRICS_TOKEN must be at least 8"),
        ({"TOOLDOCK_FORK_WORKERS": "sometimes"}, "true or false"),
    ],
)
def test_bad_settings(env, fragment):
    with pytest.raises(SettingsError, match=fragment):
        Settings.from_env(env)


def test_swagger_ui_dir_must_hold_swagger_uis_two_files(tmp_path):
    (tmp_path / "swagger-ui-bundle.js").write_text("window.SwaggerUIBundle = 1;")
    with pytest.raises(SettingsError, match=r"TOOLDOCK_SWAGGER_UI_DIR: no swagger-ui.css in .*npm pack swagger-ui-dist"):
        Settings.from_env({"TOOLDOCK_SWAGGER_UI_DIR": str(tmp_path)})
    (tmp_path / "swagger-ui.css").write_text("")
    with pytest.raises(SettingsError, match="swagger-ui.css is empty"):
        Settings.from_env({"TOOLDOCK_SWAGGER_UI_DIR": str(tmp_path)})
    with pytest.raises(SettingsError, match="no swagger-ui-bundle.js in"):
        Settings.from_env({"TOOLDOCK_SWAGGER_UI_DIR": str(tmp_path / "missing")})
    (tmp_path / "swagger-ui.css").write_text("body {}")
    assert Settings.from_env({"TOOLDOCK_SWAGGER_UI_DIR": str(tmp_path)}).swagger_ui_dir == tmp_path
    assert Settings.from_env({"TOOLDOCK_SWAGGER_UI_DIR": " "}).swagger_ui_dir is None


def test_relative_state_and_socket_dirs_become_absolute(tmp_path, monkeypatch):
    """Workers run in other directories: a relative TOOLDOCK_STATE_DIR once named a missing interpreter there."""
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env({"TOOLDOCK_STATE_DIR": "state", "TOOLDOCK_SOCKET_DIR": "socks"})
    assert settings.state_dir == tmp_path / "state" and settings.sockets == tmp_path / "socks"


def test_audit_log_directory_defaults_under_the_state_dir_and_can_be_turned_off(tmp_path):
    assert Settings.from_env({"TOOLDOCK_STATE_DIR": str(tmp_path)}).log_dir == tmp_path / "logs"
    assert Settings.from_env({"TOOLDOCK_LOG_DIR": "off"}).log_dir is None
    assert Settings.from_env({"TOOLDOCK_LOG_DIR": str(tmp_path / "a")}).log_dir == tmp_path / "a"
    assert parse_config({"audit": {"arguments": True}}).audit_arguments is True
    assert parse_config({}).audit_arguments is False


def test_secret_settings_are_read_from_the_files_their_FILE_variables_name(tmp_path):
    token, metrics = tmp_path / "bearer", tmp_path / "metrics"
    token.write_text("a-token-from-a-file\n")
    metrics.write_text("  metrics-token-value  ")
    settings = Settings.from_env({"TOOLDOCK_BEARER_TOKEN_FILE": str(token), "METRICS_TOKEN_FILE": str(metrics)})
    assert settings.bearer_token == "a-token-from-a-file" and not settings.token_generated
    assert settings.metrics_token == "metrics-token-value"
    keys = tmp_path / "keys"
    keys.write_text("k" * 40 + "," + "o" * 40)
    manager = tmp_path / "manager"
    manager.write_text("internal-token-value")
    both = Settings.from_env({"TOOLDOCK_STATE_KEY_FILE": str(keys), "MANAGER_INTERNAL_TOKEN_FILE": str(manager)})
    assert both.manager_token == "internal-token-value" and len(both.state_keys) == 2


@pytest.mark.parametrize(
    "setup, fragment",
    [
        (lambda p: {"TOOLDOCK_BEARER_TOKEN_FILE": str(p / "missing")}, "TOOLDOCK_BEARER_TOKEN_FILE: cannot read"),
        (lambda p: {"TOOLDOCK_BEARER_TOKEN_FILE": str(p)}, "cannot read"),  # a directory
        (lambda p: {"TOOLDOCK_BEARER_TOKEN_FILE": str(_file(p, b""))}, "is empty"),
        (lambda p: {"TOOLDOCK_BEARER_TOKEN_FILE": str(_file(p, b"\xff\xfe"))}, "not UTF-8"),
        (lambda p: {"METRICS_TOKEN_FILE": str(_file(p, b"x" * 70_000))}, "over 64 KB"),
        (lambda p: {"TOOLDOCK_BEARER_TOKEN_FILE": str(_file(p, b"short"))}, "at least 8 characters"),
        (
            lambda p: {"TOOLDOCK_BEARER_TOKEN": "inline-token", "TOOLDOCK_BEARER_TOKEN_FILE": str(_file(p, b"x" * 9))},
            "both set",
        ),
    ],
)
def test_a_bad_secret_file_is_refused_with_the_variable_and_the_file_and_no_value(tmp_path, setup, fragment):
    with pytest.raises(SettingsError, match=fragment) as refused:
        Settings.from_env(setup(tmp_path))
    assert "inline-token" not in str(refused.value) and "xxxxxxxx" not in str(refused.value)


def _file(folder, data: bytes):
    path = folder / "value"
    path.write_bytes(data)
    return path
