"""`tooldock build`, `tooldock base` and `tooldock inspect`: images, without a Docker daemon."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tooldock.cli.common import cache_dir as _cache_dir
from tooldock.errors import BuilderError

if TYPE_CHECKING:
    from rich.console import Console

    from tooldock.builder.build import Builder, BuildResult


@click.command()
@click.argument("namespace_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    default="build/oci",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the OCI image layouts (one sub-directory per namespace).",
)
@click.option(
    "--base",
    "base_ref",
    default=None,
    metavar="REF",
    help="Base image: an OCI layout directory, a registry reference (host[:port]/repo[:tag]) or an image in "
    "the Docker engine. Default: the `tooldock base` image, built once and cached.",
)
@click.option(
    "--tar",
    "tar_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write one tar that is both an OCI layout and a `docker load` archive; with several "
    "namespaces, put {namespace} in the name.",
)
@click.option(
    "--load",
    is_flag=True,
    help="Load each image into the Docker engine as tooldock/<namespace>:<version> "
    "and tooldock/<namespace>:sha256-<digest>.",
)
@click.option(
    "--push",
    "push_to",
    default=None,
    metavar="REGISTRY/PREFIX",
    help="Push each image to REGISTRY/PREFIX/<namespace>:<version> (OCI distribution API; "
    "credentials from TOOLDOCK_REGISTRY_USERNAME / TOOLDOCK_REGISTRY_PASSWORD, else what `docker login` left).",
)
@click.option(
    "--engine",
    type=click.Choice(["oci", "docker"]),
    default="oci",
    show_default=True,
    help="oci: ToolDock writes the layers itself (no daemon). docker: render a Dockerfile and run "
    "`docker build` (the image lands in the Docker engine).",
)
@click.option(
    "--gateway",
    is_flag=True,
    help="Build an image of the gateway itself (OUTPUT/tooldock-gateway/), "
    "running `tooldock serve /tools` on port 8000 (no NAMESPACE_DIR needed).",
)
@click.option(
    "--manager",
    is_flag=True,
    help="Build an image of the manager (OUTPUT/tooldock-manager/, for `tooldock compose`): the gateway image's "
    "layers, the example namespaces and what building them needs; with --load, also its base image.",
)
@click.option(
    "--attach/--no-attach",
    default=True,
    show_default=True,
    help="Attach a CycloneDX 1.6 SBOM and an in-toto SLSA v1 provenance statement to each image, as OCI 1.1 "
    "referrers: listed in the layout's index.json after the image (whose digest they do not change) and pushed "
    "with --push. Read them with `tooldock inspect`.",
)
@click.option(
    "--sign-key",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sign each image and its attachments with this cosign key (PREFIX.key, `tooldock keygen`): in the OCI "
    "layout, and in the registry with --push (passphrase: TOOLDOCK_SIGNING_PASSWORD, else a prompt).",
)
@click.option(
    "--platform",
    "platform_list",
    default=None,
    metavar="OS/ARCH[,OS/ARCH]",
    help="Build for these platforms (linux/amd64, linux/arm64; default: this machine's). Several write one OCI "
    "image index per namespace (one image per platform, each with the digest it has built alone); --load then "
    "loads this machine's platform's image and --push pushes them all and the index.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per namespace on stdout.")
def build(
    namespace_dirs: tuple[Path, ...],
    output: Path,
    base_ref: str | None,
    tar_path: Path | None,
    load: bool,
    push_to: str | None,
    engine: str,
    gateway: bool,
    manager: bool,
    attach: bool,
    sign_key: Path | None,
    platform_list: str | None,
    as_json: bool,
) -> None:
    """Build each NAMESPACE_DIR into its own reproducible OCI image, without a Docker daemon.

    Locks requirements.txt into requirements.lock (next to the namespace; commit it), extracts the tool
    schemas into tools.json and the image labels, and writes OUTPUT/<namespace>/ as an OCI layout.
    Each image gets its SBOM and build provenance attached (see --attach). Progress goes to stderr; a bad
    namespace is reported and the others are still built.
    """
    import json

    from rich.console import Console

    from tooldock.builder.archive import write_archive
    from tooldock.builder.build import Builder, BuildOptions
    from tooldock.builder.daemon import DaemonError
    from tooldock.builder.daemon import load as load_image
    from tooldock.builder.registry import RegistryError, parse_target, push
    from tooldock.builder.registryrefs import push_referrers

    if push_to is not None:
        try:
            parse_target(push_to)
        except RegistryError as exc:
            raise click.UsageError(str(exc)) from None
    if not namespace_dirs and not gateway and not manager:
        raise click.UsageError("give at least one NAMESPACE_DIR (or --gateway, --manager)")
    if (gateway or manager) and engine == "docker":
        raise click.UsageError("--gateway and --manager are built by the oci engine")
    if engine == "docker" and (tar_path or load or push_to):
        raise click.UsageError(
            "--engine docker builds into the Docker engine; --tar, --load and --push need --engine oci"
        )
    if tar_path is not None and len(namespace_dirs) > 1 and "{namespace}" not in str(tar_path):
        raise click.UsageError("with several namespaces, --tar needs {namespace} in the file name")
    if sign_key is not None and engine == "docker":
        raise click.UsageError("--sign-key needs --engine oci")
    from tooldock.builder.platforms import host
    from tooldock.cli.platformbuild import build_indexes, check_build, platforms_option

    platforms = platforms_option(platform_list)
    check_build(
        platforms,
        engine=engine,
        own_images=gateway or manager,
        base_ref=base_ref,
        tar=tar_path is not None,
        push=push_to is not None,
        sign=sign_key is not None,
    )
    single = platforms[0] if platforms is not None and len(platforms) == 1 and platforms[0] != host() else None
    from tooldock.cli.signing import private_key

    key = private_key(sign_key) if sign_key is not None else None  # asked once, before any build
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    options = BuildOptions(output=output, cache=_cache_dir(), base=base_ref, attach=attach, platform=single)
    if platforms is not None and len(platforms) > 1:
        failures = build_indexes(
            options, platforms, namespace_dirs, console, load=load, push_to=push_to, key=key, as_json=as_json
        )
        if failures:
            raise click.ClickException(f"{failures} of {len(namespace_dirs)} namespace(s) failed to build")
        return
    builder = Builder(options, say=lambda m: console.print(f"  {m}"))
    failures = 0
    jobs: list[str | Path] = [*(["gateway"] if gateway else []), *(["manager"] if manager else [])]
    for folder in [*jobs, *namespace_dirs]:
        if engine == "docker":
            assert isinstance(folder, Path)
            failures += _build_with_docker(builder, folder, console, as_json)
            continue
        try:
            with console.status(f"building {folder if isinstance(folder, Path) else f'the {folder} image'}"):
                result = builder.build(folder) if isinstance(folder, Path) else own_image(builder, folder)
                if tar_path is not None:
                    tar_file = Path(str(tar_path).replace("{namespace}", result.namespace))
                    write_archive(
                        tar_file, builder.store, result.image, result.ref, f"{result.repository}:{result.ref}"
                    )
            extra: dict[str, object] = {}
            if load:
                with console.status(f"loading {result.namespace} into Docker"):
                    try:
                        loaded = load_image(builder.store, result.image, result.repository, result.ref)
                    except DaemonError as exc:  # the image is built: only the loading needs an engine
                        raise DaemonError(f"{exc}; or write the image with --tar or --push instead") from None
                if folder == "manager":  # the base it builds workers on, from the engine
                    loaded += load_image(builder.store, builder.base()[0], "tooldock/base", "local")
                extra["loaded"] = loaded
                console.print(f"  loaded as {', '.join(loaded)}")
            if push_to is not None:
                with console.status(f"pushing {result.namespace} to {push_to}"):
                    pushed = push(builder.store, result.image, push_to, result.namespace, result.ref)
                    how = (
                        push_referrers(builder.store, result.attached, push_to, result.namespace, pushed.digest)
                        if result.attached
                        else ""
                    )
                extra["pushed"] = {
                    "reference": pushed.reference,
                    "digest": pushed.digest,
                    "uploaded": pushed.uploaded,
                    "skipped": pushed.skipped,
                    "attached": how,
                }
                console.print(
                    f"  pushed {pushed.reference} ({len(pushed.uploaded)} blobs uploaded, "
                    f"{len(pushed.skipped)} already there)"
                    + (f"; SBOM and provenance as referrers ({how})" if how else "")
                )
            if key is not None:
                from tooldock.builder.signing import sign_image

                where = [str(result.layout)]
                if push_to is not None:
                    where.append(f"{pushed.reference.rsplit(':', 1)[0]}@{pushed.digest}")
                extra["signed"] = [sign_image(w, key) for w in where]
                console.print(f"  signed in {' and '.join(where)}")
        except BuilderError as exc:
            failures += 1
            console.print(f"[red]✗ {folder}[/red]: {exc}")
            continue
        total = sum(result.timings.values())
        console.print(
            f"[green]✓ {result.namespace}[/green] {result.image.manifest_digest} -> {result.layout} "
            f"({len(result.tools)} tools, {total * 1000:.0f} ms)"
        )
        if as_json:
            click.echo(json.dumps({**result.to_json(), **extra}, sort_keys=True))
    if failures:
        raise click.ClickException(f"{failures} of {len(namespace_dirs) + len(jobs)} image(s) failed to build")


def own_image(builder: Builder, which: str) -> BuildResult:
    """The gateway's or the manager's image (the manager's seeded with a checkout's examples, if any)."""
    from tooldock.builder.gateway import build_gateway
    from tooldock.builder.managerimage import build_manager

    if which == "gateway":
        return build_gateway(builder)
    return build_manager(builder, checkout_examples())


def checkout_examples() -> Path | None:
    """The example namespaces of the checkout ToolDock runs from; None when installed from a wheel."""
    import tooldock

    folder = Path(tooldock.__file__).resolve().parent.parent / "examples"
    return folder if folder.is_dir() else None


def _build_with_docker(builder: Builder, folder: Path, console: Console, as_json: bool) -> int:
    import json

    from tooldock.builder.docker_engine import build_with_docker

    try:
        with console.status(f"docker build {folder}"):
            result = build_with_docker(builder, folder)
    except BuilderError as exc:
        console.print(f"[red]✗ {folder}[/red]: {exc}")
        return 1
    console.print(f"[green]✓ {result['namespace']}[/green] {result['image_id']} as {result['tags'][0]} (docker build)")
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
    return 0


@click.command()
@click.option(
    "--output",
    "-o",
    default="build/oci/tooldock-base",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the base image's OCI layout.",
)
@click.option(
    "--platform",
    "platform_list",
    default=None,
    metavar="OS/ARCH[,OS/ARCH]",
    help="Build the base for these platforms (linux/amd64, linux/arm64; default: this machine's); several are "
    "written as one OCI image index. Another architecture's packages are fetched with a private apt state "
    "under the build cache.",
)
def base(output: Path, platform_list: str | None) -> None:
    """Build the minimal Python base image from pinned Debian packages (apt-get download + dpkg-deb -x).

    Needs apt-get with up-to-date package lists; no Docker. Prints the image digest (or, for several
    platforms, the image index's digest) on stdout.
    """
    from tooldock.builder.platforms import host
    from tooldock.cli.platformbuild import build_bases, platforms_option

    try:
        digest = build_bases(_cache_dir(), output, platforms_option(platform_list) or [host()])
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(digest)


@click.command()
@click.argument("image")
@click.option("--sbom", "show", flag_value="sbom", help="Print the image's SBOM (CycloneDX 1.6 JSON) on stdout.")
@click.option(
    "--provenance",
    "show",
    flag_value="provenance",
    help="Print the image's build provenance (an in-toto statement, SLSA v1 predicate) on stdout.",
)
@click.option(
    "--platform",
    "platform",
    default=None,
    metavar="OS/ARCH",
    help="When IMAGE is a multi-platform image index: the platform whose image to inspect (default: this machine's).",
)
@click.option("--json", "as_json", is_flag=True, help="List the attached artifacts as one JSON object.")
def inspect(image: str, show: str | None, platform: str | None, as_json: bool) -> None:
    """List the artifacts attached to IMAGE (its SBOM and provenance), or print one.

    IMAGE is an OCI layout directory written by `tooldock build` (e.g. build/oci/hello) or a registry reference
    HOST/REPOSITORY[:TAG][@sha256:...] pushed by `tooldock build --push`; in a registry they are found through
    the referrers API, else the `sha256-<digest>` referrers tag, else cosign's `.sbom` tag.
    """
    import json

    from tooldock.builder.attach import PROVENANCE, SBOM
    from tooldock.cli.platformbuild import image_reader

    try:
        reader = image_reader(image, platform)
        found = reader.referrers()
        if show is None:
            if as_json:
                listed = [
                    {"artifactType": f.artifact_type, "digest": f.digest, "size": f.size, "found": f.source}
                    for f in found
                ]
                click.echo(json.dumps({"image": reader.digest, "attached": listed}, indent=2, sort_keys=True))
                return
            click.echo(f"image {reader.digest}")
            for f in found:
                click.echo(f"  {f.artifact_type:34} {f.digest} {f.size:>6} B  ({f.source})")
            if not found:
                click.echo("  no SBOM or provenance attached (built with --no-attach, or by another tool)")
            return
        wanted = SBOM if show == "sbom" else PROVENANCE
        match = next((f for f in found if f.artifact_type == wanted), None)
        if match is None:
            raise click.ClickException(f"{image}: no {show} attached to {reader.digest}")
        click.echo(reader.document(match.digest).decode(), nl=False)
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
