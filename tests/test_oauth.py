"""The OAuth settings and scope mapping on their own (issue 62; the token checks against a real provider are in
tests/test_oauth_real.py): every bad setting refused with a message that names it, the grants as API keys
see them, the metadata document and challenges."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldock.errors import InsufficientScope, OAuthConfigError
from tooldock.oauth import OAuthConfig, challenge, metadata_url, resource_for, resource_metadata
from tooldock.oauth.grants import claim_values, principal_for
from tooldock.runtime.settings import Settings, SettingsError

ISSUER = {"TOOLDOCK_OAUTH_ISSUER": "https://id.example.com/realms/main"}


def test_off_unless_an_issuer_is_set():
    assert OAuthConfig.from_env({}) is None
    assert Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16}).oauth is None


@pytest.mark.parametrize("env, says", [
    ({"TOOLDOCK_OAUTH_ISSUER": "id.example.com"}, "TOOLDOCK_OAUTH_ISSUER"),
    ({"TOOLDOCK_OAUTH_ISSUER": "http://id.example.com"}, "must use https"),
    ({**ISSUER, "TOOLDOCK_OAUTH_RESOURCE": "https://tools.example.com/mcp#x"}, "TOOLDOCK_OAUTH_RESOURCE"),
    ({**ISSUER, "TOOLDOCK_OAUTH_ALGORITHMS": "RS256,none"}, "never none"),
    ({**ISSUER, "TOOLDOCK_OAUTH_ALGORITHMS": "HS256"}, "nor HMAC"),
    ({**ISSUER, "TOOLDOCK_OAUTH_LEEWAY": "-1"}, "TOOLDOCK_OAUTH_LEEWAY"),
    ({**ISSUER, "TOOLDOCK_OAUTH_KEYS_MAX_AGE": "nan"}, "TOOLDOCK_OAUTH_KEYS_MAX_AGE"),
    ({**ISSUER, "TOOLDOCK_OAUTH_SCOPES": "reader=x"}, "<read|write|admin>=<scope>"),
    ({**ISSUER, "TOOLDOCK_OAUTH_CLIENT_ID": "gw"}, "go together"),
    ({**ISSUER, "TOOLDOCK_OAUTH_CLIENT_SECRET_FILE": "/nonexistent/secret"}, "cannot read /nonexistent/secret"),
])
def test_bad_settings_are_refused_by_name(env, says):
    with pytest.raises(OAuthConfigError, match=says):
        OAuthConfig.from_env(env)
    with pytest.raises(SettingsError, match=says):  # as `tooldock serve` reports it: a message, no traceback
        Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16, **env})


def test_the_secret_never_shows():
    config = OAuthConfig.from_env({**ISSUER, "TOOLDOCK_OAUTH_CLIENT_ID": "gw",
                                   "TOOLDOCK_OAUTH_CLIENT_SECRET": "s3cret-value-0123"})
    assert config is not None and config.client_secret == "s3cret-value-0123"
    assert "s3cret" not in repr(config) and "s3cret" not in str(config)


def test_the_resource_defaults_to_the_gateways_url_and_needs_setting_on_0_0_0_0():
    config = OAuthConfig.from_env({**ISSUER, "TOOLDOCK_OAUTH_ISSUER": "http://127.0.0.1:3000"})
    assert config is not None and config.for_gateway("http://127.0.0.1:8000").resource == "http://127.0.0.1:8000/mcp"
    with pytest.raises(OAuthConfigError, match="TOOLDOCK_OAUTH_RESOURCE is needed"):
        config.for_gateway("http://0.0.0.0:8000")


def test_a_grants_file_maps_groups_onto_scopes_and_globs(tmp_path: Path):
    grants = tmp_path / "grants.yaml"
    grants.write_text("claim: groups\ngrants:\n  - value: admins\n    scope: admin\n"
                      "  - value: weather-team\n    scope: write\n    namespaces: [weather]\n    tools: ['get_*']\n")
    config = OAuthConfig.from_env({**ISSUER, "TOOLDOCK_OAUTH_GRANTS_FILE": str(grants)})
    assert config is not None and config.claim == "groups"
    who = principal_for({"iss": "i", "sub": "bob", "azp": "app", "groups": ["weather-team"]}, config.claim,
                        config.grants, None, None)
    assert (who.scope, who.namespaces, who.tools, who.client_id) == ("write", ("weather",), ("get_*",), "app")
    assert who.allows_tool("weather", {"name": "get_forecast"}) and not who.allows_tool("weather", {"name": "rm"})
    assert not who.allows_namespace("billing") and not who.unrestricted
    grants.write_text("grants:\n  - value: x\n    scope: owner\n")
    with pytest.raises(OAuthConfigError, match="grant 1: unknown scope 'owner'"):
        OAuthConfig.from_env({**ISSUER, "TOOLDOCK_OAUTH_GRANTS_FILE": str(grants)})
    grants.write_text("grants: [")
    with pytest.raises(OAuthConfigError, match="TOOLDOCK_OAUTH_GRANTS_FILE"):
        OAuthConfig.from_env({**ISSUER, "TOOLDOCK_OAUTH_GRANTS_FILE": str(grants)})


def test_scopes_are_read_from_scope_scp_and_roles_and_the_widest_wins():
    assert claim_values({"scope": "a b", "scp": "c", "roles": ["d"]}, "scope") == {"a", "b", "c", "d"}
    config = OAuthConfig.from_env(ISSUER)
    assert config is not None
    who = principal_for({"sub": "s", "scope": "tooldock:read tooldock:write"}, "scope", config.grants, None, None)
    assert who.scope == "write"
    with pytest.raises(InsufficientScope) as refused:
        principal_for({"sub": "s", "scope": "openid"}, "scope", config.grants, None, None, "https://t.example/mcp")
    assert refused.value.details == {"scope": "tooldock:read"}
    assert refused.value.challenge is not None and 'scope="tooldock:read"' in refused.value.challenge


def test_a_read_principal_is_refused_a_write_tool_with_the_scope_that_would_allow_it():
    config = OAuthConfig.from_env(ISSUER)
    assert config is not None
    who = principal_for({"sub": "s", "scope": "tooldock:read"}, "scope", config.grants, None, None,
                        "https://t.example/mcp")
    refusal = who.refusal("project", {"name": "create", "annotations": {"readOnlyHint": False}})
    assert isinstance(refusal, InsufficientScope) and refusal.details["scope"] == "tooldock:write"
    assert "OAuth token of 's'" in refusal.message


def test_metadata_and_challenges():
    config = OAuthConfig.from_env({**ISSUER, "TOOLDOCK_OAUTH_RESOURCE": "https://t.example/mcp"})
    assert config is not None
    assert resource_for(config, "/ns/weather/tools") == "https://t.example/ns/weather/mcp"
    assert resource_for(config, "/tools") == "https://t.example/mcp"
    assert metadata_url("https://t.example/mcp") == "https://t.example/.well-known/oauth-protected-resource/mcp"
    assert resource_metadata(config, "https://t.example/mcp")["authorization_servers"] == [ISSUER[
        "TOOLDOCK_OAUTH_ISSUER"]]
    header = challenge("https://t.example/mcp", "invalid_token", 'bad "quoted"\\ text')
    assert header == ('Bearer resource_metadata="https://t.example/.well-known/oauth-protected-resource/mcp", '
                      'error="invalid_token", error_description="bad quoted text"')


# the first sight of a JWT, checked by hand (tooldock/oauth/jws.py) --------------------------------------------


def _signed(claims: dict, alg: str = "RS256", key: object = None, **header: object) -> tuple[str, object]:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if key is None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if alg.startswith(("RS", "PS")) \
            else ec.generate_private_key(ec.SECP256R1())
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": "k1", **header}), key


def _jwk(key: object, alg: str | None) -> object:
    import json

    import jwt
    from jwt.algorithms import ECAlgorithm, RSAAlgorithm

    kind = RSAAlgorithm if hasattr(key, "private_numbers") and hasattr(key.private_numbers(), "p") else ECAlgorithm
    data = json.loads(kind.to_jwk(key.public_key()))
    return jwt.PyJWK.from_dict({**data, **({"alg": alg} if alg else {})})


GOOD = {"iss": "https://id.example.com", "aud": "https://t/mcp", "sub": "a", "exp": 4102444800, "iat": 1700000000}


def test_a_well_signed_token_passes_and_each_claim_is_checked():
    from tooldock.errors import InvalidToken
    from tooldock.oauth import jws

    token, key = _signed(GOOD)
    header, claims = jws.parse(token)
    jws.check_signature(token, header["alg"], _jwk(key, "RS256"))
    jws.check_claims(claims, "https://id.example.com", 30)
    for bad, says in (({"exp": 1000}, "expired"), ({"nbf": 4102444800}, "not valid yet"),
                      ({"iat": 4102444800}, "not valid yet"), ({"iss": "https://other"}, "not issued by"),
                      ({"exp": True}, "not a number"), ({"exp": "soon"}, "not a number"), ({"aud": None}, "no 'aud'")):
        with pytest.raises(InvalidToken, match=says):
            jws.check_claims({**GOOD, **bad}, "https://id.example.com", 30)
    forged, _ = _signed(GOOD)  # another key
    with pytest.raises(InvalidToken, match="signature does not verify"):
        jws.check_signature(forged, "RS256", _jwk(key, "RS256"))


def test_a_key_of_another_type_or_algorithm_never_verifies():
    from tooldock.errors import InvalidToken
    from tooldock.oauth import jws

    token, ec_key = _signed(GOOD, "ES256")
    rsa_token, rsa_key = _signed(GOOD)
    with pytest.raises(InvalidToken, match="which its key"):  # an ES256 header against an RSA key
        jws.check_signature(token, "ES256", _jwk(rsa_key, None))
    with pytest.raises(InvalidToken, match="which its key"):  # PS256 claimed, the issuer's key says RS256
        jws.check_signature(rsa_token, "PS256", _jwk(rsa_key, "RS256"))
    jws.check_signature(token, "ES256", _jwk(ec_key, "ES256"))  # the control


@pytest.mark.parametrize("token", ["a.b", "a.b.c.d", "!!!.e30.sig", "e30.W10.sig", "bnVsbA.e30.x",
                                   "eyJjcml0IjpbImV4cCJdLCJhbGciOiJSUzI1NiJ9.e30.x"])
def test_a_malformed_token_is_refused_without_a_traceback(token):
    from tooldock.errors import InvalidToken
    from tooldock.oauth import jws

    with pytest.raises(InvalidToken, match="well-formed|critical"):
        jws.parse(token)
