"""`tooldock keygen`, `tooldock sign`, `tooldock verify`: cosign-format signatures of images and their attachments.

Exit codes: 0 verified / signed; 1 an error reading a key or an image; 3 not signed; 4 no valid signature by
the given keys (another key, or the image or payload altered); 5 wrong passphrase.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

    from tooldock.builder.cosignkey import SigningError


def signing_failed(error: SigningError) -> click.exceptions.Exit:
    """The error on stderr as click prints it; the exit code says which (see above)."""
    click.echo(f"Error: {error}", err=True)
    return click.exceptions.Exit(error.exit_code)


def passphrase(confirm: bool = False) -> bytes:
    from tooldock.builder.cosignkey import PASSWORD_ENV

    if PASSWORD_ENV in os.environ:
        return os.environ[PASSWORD_ENV].encode()
    if not sys.stdin.isatty():
        raise click.ClickException(f"no passphrase: set {PASSWORD_ENV} (no terminal to ask on)")
    typed: str = click.prompt("Passphrase for the private key", hide_input=True, confirmation_prompt=confirm)
    return typed.encode()


def private_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The signing key at `path`, decrypted with the passphrase (env or prompt); ClickException otherwise."""
    from tooldock.builder.cosignkey import SigningError, load_private

    try:
        return load_private(path, passphrase())
    except SigningError as exc:
        raise signing_failed(exc) from None


@click.command()
@click.argument("prefix", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite PREFIX.key and PREFIX.pub if they exist.")
def keygen(prefix: Path, force: bool) -> None:
    """Make an ECDSA P-256 signing key pair: PREFIX.key (encrypted as `cosign generate-key-pair` does) and PREFIX.pub.

    The private key file is cosign's (ENCRYPTED SIGSTORE PRIVATE KEY: scrypt + NaCl secretbox), so cosign can
    sign with it and ToolDock can sign with cosign's keys. The passphrase comes from TOOLDOCK_SIGNING_PASSWORD,
    else a prompt.
    """
    from tooldock.atomic import atomic_write
    from tooldock.builder.cosignkey import encrypt, generate, public_pem

    key_file, pub_file = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    existing = [str(p) for p in (key_file, pub_file) if p.exists()]
    if existing and not force:
        raise click.ClickException(f"{', '.join(existing)} exist; give another PREFIX or --force")
    secret = passphrase(confirm=True)
    key = generate()
    key_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(key_file, encrypt(key, secret), mode=0o600)
    atomic_write(pub_file, public_pem(key))
    click.echo(f"Private key written to {key_file}\nPublic key written to {pub_file}", err=True)


@click.command()
@click.argument("image")
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The private key file (PREFIX.key from `tooldock keygen` or `cosign generate-key-pair`).",
)
def sign(image: str, key_path: Path) -> None:
    """Sign IMAGE in cosign's format (sha256-<digest>.sig) and attest its attached SBOM and provenance
    (in-toto statements in DSSE envelopes, sha256-<digest>.att, as `cosign attest` writes them).

    IMAGE is an OCI layout directory (the signatures go into its index.json) or a registry reference
    HOST/REPOSITORY[:TAG][@sha256:...] (pushed as tags next to the image). The passphrase comes from
    TOOLDOCK_SIGNING_PASSWORD, else a prompt.
    """
    from tooldock.builder.cosignkey import SigningError
    from tooldock.builder.signing import sign_image

    key = private_key(key_path)
    try:
        signed = sign_image(image, key)
    except SigningError as exc:
        raise signing_failed(exc) from None
    attested = f"; attested {len(signed) - 1} attached document(s) (sha256-…att)" if len(signed) > 1 else ""
    click.echo(f"signed {signed[0]}{attested}")


def public_keys(paths: tuple[Path, ...]) -> list[ec.EllipticCurvePublicKey]:
    from tooldock.builder.cosignkey import SigningError, load_public

    try:
        return [load_public(p) for p in paths]
    except SigningError as exc:
        raise signing_failed(exc) from None


@click.command()
@click.argument("image")
@click.option(
    "--key",
    "key_paths",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A public key (PREFIX.pub); repeat for several: one valid signature by any of them is enough.",
)
@click.option("--image-only", is_flag=True, help="Check the image's signature only, not its attestations.")
@click.option("--json", "as_json", is_flag=True, help="Print what was verified as one JSON object.")
@click.option(
    "--rebuild",
    "rebuild_dir",
    default=None,
    metavar="NAMESPACE_DIR",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Also rebuild NAMESPACE_DIR with the parameters IMAGE's provenance records, in a fresh build cache, and "
    "check that the digest is IMAGE's (exit 6 when it differs, naming the inputs that differ).",
)
def verify(image: str, key_paths: tuple[Path, ...], image_only: bool, as_json: bool, rebuild_dir: Path | None) -> None:
    """Verify IMAGE's cosign signature with --key, and the attestations of its attached SBOM and provenance
    (signed by one of the keys, about IMAGE, holding the attached document).

    IMAGE: an OCI layout directory or a registry reference. With --rebuild NAMESPACE_DIR, also rebuild the
    namespace from the provenance's parameters with a fresh cache and compare digests (--key then optional).
    Exit codes: 3 not signed (or an attached document not attested), 4 no valid signature or attestation by
    the given key(s) (another key, or altered), 6 the rebuild's digest differs, 1 other errors.
    """
    import json

    from tooldock.builder.cosignkey import SigningError
    from tooldock.builder.signing import verify as verify_image

    if not key_paths and rebuild_dir is None:
        raise click.UsageError("give --key PREFIX.pub (or --rebuild NAMESPACE_DIR)")
    report: dict[str, object] = {}
    if rebuild_dir is not None:
        report["rebuilt"] = _rebuild(image, rebuild_dir)
        if not key_paths:
            click.echo(json.dumps(report, sort_keys=True) if as_json else f"rebuilt {report['rebuilt']}: same digest")
            return
    try:
        result = verify_image(image, public_keys(key_paths), attachments=not image_only)
    except SigningError as exc:
        raise signing_failed(exc) from None
    if as_json:
        report.update(digest=result.digest, signer=result.signer, attached=result.attached)
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"verified {result.digest}: signed by {result.signer}")
    for a in result.attached:
        click.echo(f"  {a['artifactType']:34} {a['digest']} attested ({a['predicateType']}) by {a['signer']}")


def _rebuild(image: str, folder: Path) -> str:
    """The digest a fresh rebuild of `folder` gives, when it is IMAGE's; exits 6 (or 1) otherwise."""
    from rich.console import Console

    from tooldock.builder.rebuild import rebuild
    from tooldock.cli.common import cache_dir
    from tooldock.errors import BuilderError

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        with console.status(f"rebuilding {folder} with a fresh cache"):
            rebuilt = rebuild(image, folder, cache_dir(), say=lambda m: console.print(f"  {m}"))
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    if not rebuilt.same:
        inputs = ", ".join(rebuilt.differing) or "none of the recorded inputs (the builder itself?)"
        click.echo(
            f"Error: the rebuild of {folder} is {rebuilt.got}, not {rebuilt.expected} (the image's); "
            f"inputs that differ from the provenance's: {inputs}",
            err=True,
        )
        raise click.exceptions.Exit(6)
    return rebuilt.got
