"""`tooldock cluster`: the cluster CA that gateways and workers on different hosts authenticate each other
with (mutual TLS), and the certificates it issues (tooldock/cluster/)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tooldock.cluster import CertInfo, ClusterError, ca

ca_dir_argument = click.argument("ca_dir", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
days_help = "Days the CA certificate is valid (it signs peer certificates no longer than that)."


def _fail(exc: ClusterError | OSError) -> click.ClickException:
    if isinstance(exc, OSError):
        return click.ClickException(f"{exc.filename or 'the CA directory'}: {exc.strerror or exc}")
    return click.ClickException(str(exc))


def _said(what: str, info: CertInfo) -> str:
    return f"{what} {info.subject!r} (SHA-256 {info.fingerprint[:16]}..., valid until {info.not_after:%Y-%m-%d})"


@click.group()
def cluster() -> None:
    """Certificates for gateways and workers on different hosts (the worker protocol over mutual TLS)."""


@cluster.group("ca")
def ca_group() -> None:
    """The cluster CA: make it, rotate it, retire old CAs."""


@ca_group.command("init")
@ca_dir_argument
@click.option("--days", default=ca.CA_DAYS, show_default=True, type=click.IntRange(1), help=days_help)
def ca_init(ca_dir: Path, days: int) -> None:
    """Make a cluster CA in DIR (created 0700): its key ca.key (0600, never printed), its certificate ca.pem
    and the trust bundle trust.pem. Refuses a DIR that already holds a CA (rotate it instead)."""
    try:
        info = ca.init(ca_dir, days)
    except (ClusterError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(_said(f"tooldock: made the cluster CA in {ca_dir}:", info), err=True)
    click.echo(f"tooldock: next: tooldock cluster cert {ca_dir} --name NAME, for each worker and gateway", err=True)


@ca_group.command("rotate")
@ca_dir_argument
@click.option("--days", default=ca.CA_DAYS, show_default=True, type=click.IntRange(1), help=days_help)
def ca_rotate(ca_dir: Path, days: int) -> None:
    """Make a new CA in DIR, which signs every certificate issued from now on. The CAs trusted until now stay
    in the trust bundle beside it (so certificates of both are accepted) until `ca retire`; the bundle is
    copied into every peer directory under DIR/certs.

    Then: give every peer the new trust.pem (peers read it again for their next connection), issue each a new
    certificate (tooldock cluster cert), roll those out, and retire the old CA."""
    try:
        info = ca.rotate(ca_dir, days)
    except (ClusterError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(_said("tooldock: the new current CA is", info), err=True)
    click.echo(
        f"tooldock: both CAs are trusted now; roll out {ca_dir}/trust.pem, issue new certificates, then "
        f"`tooldock cluster ca retire {ca_dir}`",
        err=True,
    )


@ca_group.command("retire")
@ca_dir_argument
@click.option(
    "--force",
    is_flag=True,
    help="Retire even while peer directories under DIR/certs hold certificates of a CA being retired "
    "(those peers are refused from then on).",
)
def ca_retire(ca_dir: Path, force: bool) -> None:
    """Trust only the current CA: drop every other CA from the trust bundle in DIR and in each peer directory
    under DIR/certs. Certificates of a retired CA are refused at their next connection (connections already
    made stay open until they end)."""
    try:
        dropped = ca.retire(ca_dir, force)
    except (ClusterError, OSError) as exc:
        raise _fail(exc) from None
    for info in dropped:
        click.echo(_said("tooldock: no longer trusted:", info), err=True)
    if not dropped:
        click.echo("tooldock: only the current CA was trusted; nothing retired", err=True)


@cluster.command("cert")
@ca_dir_argument
@click.option(
    "--name",
    required=True,
    help="The peer's name (a worker's or a gateway's): the certificate's common name and DNS name, and the "
    "directory DIR/certs/NAME.",
)
@click.option("--days", default=ca.LEAF_DAYS, show_default=True, type=click.IntRange(1), help="Days it is valid.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the peer's files here instead of DIR/certs/NAME (then `ca rotate` and `ca retire` do not update "
    "its trust.pem).",
)
def cert(ca_dir: Path, name: str, days: int, out: Path | None) -> None:
    """Issue a certificate for NAME, a worker or a gateway (usable as TLS client and server), signed by the
    current CA of DIR, with a new ECDSA P-256 key. Writes the peer's TLS directory: cert.pem, key.pem (0600,
    never printed) and trust.pem, as `python -m tooldock.worker --tls-dir` and TOOLDOCK_TLS_DIR read it.
    Issuing again for the same NAME replaces its files (renewal, or moving it to a rotated CA)."""
    try:
        target, info = ca.issue(ca_dir, name, days, out)
    except (ClusterError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(_said(f"tooldock: wrote {target}:", info), err=True)
    click.echo(str(target))


@cluster.command("status")
@ca_dir_argument
@click.option("--json", "as_json", is_flag=True, help='Print {"trusted": [...], "peers": [...]} as JSON.')
def status(ca_dir: Path, as_json: bool) -> None:
    """The CAs DIR trusts (which one is current) and the peer certificates under DIR/certs: subject, issuer,
    SHA-256 fingerprint, expiry. Never a key."""
    try:
        found = ca.status(ca_dir)
    except (ClusterError, OSError) as exc:
        raise _fail(exc) from None
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    for entry in found["trusted"]:
        mark = "current" if entry["current"] else "trusted"
        until, print_ = str(entry["not_after"])[:10], str(entry["fingerprint"])[:16]
        click.echo(f"CA    {mark:8} {entry['subject']}  until {until}  {print_}")
    for entry in found["peers"]:
        click.echo(f"peer  {entry['name']!s:20} issuer {entry['issuer']}  until {str(entry['not_after'])[:10]}")
