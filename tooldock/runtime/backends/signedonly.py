"""Signed-only mode: with TOOLDOCK_REQUIRE_SIGNED_BY=PUB[,PUB] set, an image runs only with a valid cosign
signature by one of those public keys.

`require_signed(image_ref, keys)` is the check itself, for any caller that is about to run an image (the
docker backend's deploy calls `check_engine_image`; a Swarm or Kubernetes deploy can call `require_signed` with
the registry reference it hands the orchestrator, best pinned by digest). The signature is looked up where the
image is: the registry of a reference HOST/REPOSITORY[:TAG][@sha256:...], or an OCI layout directory. An image
in the Docker engine is looked up by its repository digests (`RepoDigests`: the registries it was pulled
from, with the manifest digest Docker checked); one built or loaded locally has none, and is refused.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooldock.builder.cosignkey import SigningError, load_public
from tooldock.builder.signing import verify
from tooldock.errors import DeployError

ENV = "TOOLDOCK_REQUIRE_SIGNED_BY"
WHAT_TO_DO = (
    "sign it (`tooldock sign IMAGE --key KEY.key`, or `tooldock build --push REGISTRY/PREFIX --sign-key KEY.key`) "
    f"with a key whose public half is in {ENV}, or unset {ENV}"
)


class UnsignedImage(DeployError):
    """Signed-only mode refused an image."""


def required_keys(environ: dict[str, str] | None = None) -> list[Path]:
    """The public key files TOOLDOCK_REQUIRE_SIGNED_BY names; empty: signed-only mode is off."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    return [Path(p.strip()).expanduser() for p in value.split(",") if p.strip()]


def require_signed(image_ref: str, keys: Sequence[Path]) -> None:
    """Return if `image_ref` (a registry reference or an OCI layout directory) has a valid signature by one of
    `keys` (public key files); raise UnsignedImage naming the image, why, and what to do, otherwise."""
    try:
        public = [load_public(k) for k in keys]
    except SigningError as exc:
        raise UnsignedImage(f"{ENV}: {exc}") from None
    if not public:
        raise UnsignedImage(f"{ENV} names no public key")
    try:
        verify(image_ref, public, attachments=False)
    except SigningError as exc:
        raise UnsignedImage(f"refusing to run image {image_ref!r} (signed-only mode): {exc}; {WHAT_TO_DO}") from None


def check_engine_image(image: Any, ref: str, keys: Sequence[Path] | None = None) -> None:
    """Signed-only mode for an image in the Docker engine (a docker-py Image): nothing when the mode is off;
    UnsignedImage unless one of the registries it was pulled from holds a valid signature of its digest."""
    keys = required_keys() if keys is None else keys
    if not keys:
        return
    pulled_as = list(image.attrs.get("RepoDigests") or [])
    if not pulled_as:
        raise UnsignedImage(
            f"refusing to run image {ref!r} (signed-only mode, {ENV}): it was not pulled from a registry (built or "
            "loaded locally), so there is no signature to look up; push it signed and pull it "
            "(`tooldock build --push REGISTRY/PREFIX --sign-key KEY.key`, then `docker pull`), or unset " + ENV
        )
    problems = []
    for candidate in pulled_as:
        try:
            require_signed(candidate, keys)
            return
        except UnsignedImage as exc:
            problems.append(str(exc))
    raise UnsignedImage("; ".join(problems) if len(problems) == 1 else f"image {ref!r}: " + " | ".join(problems))
