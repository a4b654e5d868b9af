"""`tooldock build --platform` and `tooldock base --platform`: which option goes with several platforms, and the
build of one image index per namespace (builder/multiarch.py).

One platform builds as without --platform (a single image; another architecture's made as multiarch.py says).
Several write an image index: `--load` loads the build machine's platform's image (else the first platform's),
`--push` pushes every image and then the index under the tag, `--sign-key` signs in the registry what it
pushed; `--tar` (one `docker load` archive: one image) is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tooldock.errors import BuilderError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec
    from rich.console import Console

    from tooldock.builder.attach import LayoutReader
    from tooldock.builder.build import BuildOptions
    from tooldock.builder.platforms import Platform
    from tooldock.builder.registryrefs import RemoteImage


def platforms_option(text: str | None) -> list[Platform] | None:
    """The --platform value, parsed (None when not given); a UsageError names what is wrong."""
    if text is None:
        return None
    from tooldock.builder.platforms import PlatformError, parse

    try:
        return parse(text)
    except PlatformError as exc:
        raise click.UsageError(str(exc)) from None


def check_build(
    platforms: list[Platform] | None,
    *,
    engine: str,
    own_images: bool,
    base_ref: str | None,
    tar: bool,
    push: bool,
    sign: bool,
) -> None:
    """Refuse the options that do not go with these platforms, before anything is built."""
    from tooldock.builder.platforms import host

    if platforms is None:
        return
    others = [p for p in platforms if p != host()]
    if others and engine == "docker":
        raise click.UsageError("--platform of another architecture than this machine's needs --engine oci")
    if others and own_images:
        raise click.UsageError("--gateway and --manager are built for this machine's platform only (no --platform)")
    if others and base_ref is not None:
        raise click.UsageError(
            f"--base with --platform {others[0]}: only the default base (`tooldock base`) is built for another "
            "architecture; leave out --base"
        )
    if len(platforms) > 1 and tar:
        raise click.UsageError(
            "--tar writes one image (a `docker load` archive); with several --platform values use the OCI layout "
            "(--output) or --push, or build --tar with one --platform"
        )
    if len(platforms) > 1 and sign and not push:
        raise click.UsageError(
            "--sign-key with several --platform values signs what --push pushes (each platform's image, its "
            "attachments and the index); add --push"
        )


def build_indexes(
    options: BuildOptions,
    platforms: list[Platform],
    folders: tuple[Path, ...],
    console: Console,
    *,
    load: bool,
    push_to: str | None,
    key: ec.EllipticCurvePrivateKey | None,
    as_json: bool,
) -> int:
    """Build each folder for every platform into one image index; the number that failed."""
    from tooldock.builder.daemon import DaemonError
    from tooldock.builder.daemon import load as load_image
    from tooldock.builder.multiarch import IndexBuilder, push_index
    from tooldock.builder.platforms import host

    builder = IndexBuilder(options, platforms, say=lambda m: console.print(f"  {m}"))
    names = ", ".join(p.name for p in platforms)
    failures = 0
    for folder in folders:
        try:
            with console.status(f"building {folder} for {names}"):
                result = builder.build(folder)
            extra: dict[str, object] = {}
            if load:
                wanted = host() if result.image_for(host()) else result.builds[0][0]
                image = result.image_for(wanted)
                assert image is not None
                with console.status(f"loading {result.namespace} ({wanted}) into Docker"):
                    try:
                        loaded = load_image(builder.store, image.image, result.repository, result.ref)
                    except DaemonError as exc:
                        raise DaemonError(f"{exc}; or write the image with --push instead") from None
                extra["loaded"] = loaded
                extra["loaded_platform"] = wanted.name
                console.print(f"  loaded {wanted} as {', '.join(loaded)}")
            if push_to is not None:
                with console.status(f"pushing {result.namespace} to {push_to}"):
                    pushed = push_index(builder.store, result, push_to)
                extra["pushed"] = pushed
                console.print(f"  pushed {pushed['reference']} (an index of {len(result.builds)} images)")
                if key is not None:
                    extra["signed"] = _sign(pushed, key)
                    console.print(f"  signed the index and {len(result.builds)} images in {pushed['reference']}")
        except BuilderError as exc:
            failures += 1
            console.print(f"[red]✗ {folder}[/red]: {exc}")
            continue
        console.print(f"[green]✓ {result.namespace}[/green] {result.digest} ({names}) -> {result.layout}")
        if as_json:
            click.echo(json.dumps({**result.to_json(), **extra}, sort_keys=True))
    return failures


def _sign(pushed: dict[str, object], key: ec.EllipticCurvePrivateKey) -> list[list[str]]:
    """Each pushed platform image with its attachments, then the index (builder/signing.py's sign_image)."""
    from tooldock.builder.signing import sign_image

    repository = str(pushed["reference"]).rsplit(":", 1)[0]
    platforms = pushed["platforms"]
    assert isinstance(platforms, dict)
    digests = [str(p["digest"]) for p in platforms.values()] + [str(pushed["digest"])]
    return [sign_image(f"{repository}@{digest}", key) for digest in digests]


def build_bases(store_root: Path, output: Path, platforms: list[Platform]) -> str:
    """`tooldock base --platform`: one base per platform; several in one image index. The digest written."""
    from tooldock.builder.base import build_base
    from tooldock.builder.blobs import BlobStore
    from tooldock.builder.multiarch import write_index_layout
    from tooldock.builder.oci import image_index, write_layout

    store = BlobStore(store_root)
    images = [(p, build_base(store, store_root, p.architecture)) for p in platforms]
    if len(images) == 1:
        write_layout(output, store, images[0][1], "base")
        return images[0][1].manifest_digest
    index = image_index([(p.descriptor(), image) for p, image in images])
    write_index_layout(output, store, index, "base", [image for _, image in images])
    return store.put(index)


def image_reader(image: str, platform: str | None) -> LayoutReader | RemoteImage:
    """What `tooldock inspect` reads: IMAGE's, or when IMAGE is an image index (a multi-platform build), the
    image of `platform` in it (default this machine's), said on stderr."""
    from tooldock.builder.attach import LayoutReader
    from tooldock.builder.multiarch import index_platforms
    from tooldock.builder.platforms import host
    from tooldock.builder.registryrefs import remote_image

    reader = LayoutReader(Path(image)) if Path(image).is_dir() else remote_image(image)
    found = index_platforms(image)
    if found is None:
        if platform is not None:
            raise click.UsageError(f"--platform: {image} is a single image, not a multi-platform index")
        return reader
    index, platforms = found
    wanted = (platforms_option(platform) or [host()])[0].name if platform else host().name
    if wanted not in platforms:
        raise click.UsageError(f"{image} has no {wanted} image; it has {', '.join(platforms)} (give --platform)")
    click.echo(f"{wanted} image of the index {index} ({', '.join(platforms)})", err=True)
    reader.digest = platforms[wanted]
    return reader
