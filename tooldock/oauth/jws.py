"""A JWT access token's signature and time claims, checked in one pass (the verifier's first sight of a token).

    header, claims = parse(token)                       # InvalidToken when it is not a well-formed JWS
    check_signature(token, header["alg"], jwk)           # the issuer's key, already cached as a PyJWK
    check_claims(claims, issuer, leeway)                 # iss, exp (required), nbf, iat; aud is the verifier's

The same checks as `jwt.decode(..., issuer=, leeway=, options={"require": ["exp", "iss", "aud"]})`, without
its per-character base64 checks (a compiled pattern instead) and without parsing each segment twice: a new
token's check is then mostly the signature itself. The algorithm comes from the allow-list the verifier
checked, and must fit the key's type (an RSA key never verifies an ES256 token) and the `alg` the issuer
gave the key, if any.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

from tooldock.errors import InvalidToken

_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_ALGORITHMS = jwt.algorithms.get_default_algorithms()
_KEY_TYPES: dict[str, tuple[type, ...]] = {
    "RS": (rsa.RSAPublicKey,),
    "PS": (rsa.RSAPublicKey,),
    "ES": (ec.EllipticCurvePublicKey,),
    "Ed": (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey),
}
MALFORMED = "the access token is not a well-formed JWT"


def _segment(text: str) -> bytes:
    if not _SEGMENT.fullmatch(text) or len(text) % 4 == 1:
        raise InvalidToken(MALFORMED)
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidToken(MALFORMED) from None


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidToken(MALFORMED) from None
    if not isinstance(value, dict):
        raise InvalidToken(MALFORMED)
    return value


def parse(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JOSE header and the claims, unverified."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken(MALFORMED)
    header = _json_object(_segment(parts[0]))
    if "crit" in header:
        raise InvalidToken("the access token names critical header extensions (crit), which ToolDock does not know")
    return header, _json_object(_segment(parts[1]))


def check_signature(token: str, alg: str, jwk: jwt.PyJWK) -> None:
    signing_input, _, signature = token.rpartition(".")
    declared = getattr(jwk, "_jwk_data", {}).get("alg")
    fits = isinstance(jwk.key, _KEY_TYPES.get(alg[:2], ()))
    if not fits or (declared is not None and declared != alg):
        raise InvalidToken(f"the access token is signed with {alg}, which its key ({declared or 'untyped'}) is not for")
    if not _ALGORITHMS[alg].verify(signing_input.encode("ascii"), jwk.key, _segment(signature)):
        raise InvalidToken("the access token's signature does not verify")


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"the access token is invalid: its {name!r} claim is not a number")
    return float(value)


def check_claims(claims: dict[str, Any], issuer: str, leeway: float) -> None:
    for name in ("exp", "iss", "aud"):
        if claims.get(name) is None:
            raise InvalidToken(f"the access token has no {name!r} claim")
    if claims["iss"] != issuer:
        raise InvalidToken(f"the access token was not issued by {issuer}")
    now = time.time()
    exp, nbf, iat = _number(claims, "exp"), _number(claims, "nbf"), _number(claims, "iat")
    assert exp is not None
    if exp <= now - leeway:
        raise InvalidToken("the access token has expired")
    if (nbf is not None and nbf > now + leeway) or (iat is not None and iat > now + leeway):
        raise InvalidToken("the access token is not valid yet (nbf or iat in the future)")
