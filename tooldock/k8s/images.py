"""Where the images' digests come from.

`built`: each namespace, the gateway and Redis are built now by the daemonless builder and pushed to the registry,
as `tooldock build --push` does; the digest rendered is the one the registry stored (it checks it is the
built one). `from_layouts`: no build and no registry: the digests of OCI layouts that `tooldock build -o DIR`
(and `--gateway`) wrote, one sub-directory per image, for images pushed by other means (`skopeo copy`,
a CI job). The builder is reproducible, so the same sources give the same digests either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tooldock.k8s import K8sError
from tooldock.k8s.plan import Image
from tooldock.namespace.models import NamespaceSource

GATEWAY = "tooldock-gateway"  # the gateway image's name, as `tooldock build --gateway` writes it
REDIS = "tooldock-redis"  # ToolDock's Redis image (builder/debimage.py), as `tooldock swarm` names it

Say = Callable[[str], None]


def _python(config: dict[str, Any]) -> str:
    entrypoint = (config.get("config") or {}).get("Entrypoint") or []
    return str(entrypoint[0]) if entrypoint else ""


def from_layouts(folder: Path, names: Sequence[str], host: str, prefix: str) -> dict[str, Image]:
    """Each of `names` (and the gateway) from `folder/<name>/`, an OCI layout; its first image's digest."""
    if not folder.is_dir():
        raise K8sError(f"--layouts {str(folder)!r} is not a directory (write one with `tooldock build -o DIR`)")
    found: dict[str, Image] = {}
    missing = []
    for name in [*names, GATEWAY]:
        layout = folder / name
        try:
            index = json.loads((layout / "index.json").read_text())
            digest = str(index["manifests"][0]["digest"])
            manifest = json.loads((layout / "blobs" / digest.replace(":", "/")).read_text())
            config = json.loads((layout / "blobs" / manifest["config"]["digest"].replace(":", "/")).read_text())
        except FileNotFoundError:
            missing.append(name)
            continue
        except (OSError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise K8sError(f"{layout} is not a readable OCI image layout ({exc}); build it again") from None
        found[name] = Image(f"{host}/{prefix}/{name}@{digest}", _python(config))
    if missing:
        how = " and ".join(
            part
            for part in (
                f"`tooldock build -o {folder} <folders>` for {', '.join(n for n in missing if n != GATEWAY)}"
                if set(missing) - {GATEWAY}
                else "",
                f"`tooldock build -o {folder} --gateway`" if GATEWAY in missing else "",
            )
            if part
        )
        raise K8sError(f"--layouts {folder}: no OCI layout for {', '.join(missing)}; write it with {how}")
    return found


def built(
    sources: Sequence[NamespaceSource], host: str, prefix: str, cache: Path, output: Path, say: Say, redis: bool
) -> dict[str, Image]:
    """Build each namespace and the gateway (layouts under `output`) and push them to HOST/PREFIX/<name>;
    with `redis`, ToolDock's Redis image too (Debian's redis-server on the base, as `tooldock swarm` runs it)."""
    from tooldock.builder.build import Builder, BuildOptions
    from tooldock.builder.debimage import PROGRAMS, build_program
    from tooldock.builder.gateway import build_gateway
    from tooldock.builder.registry import push
    from tooldock.errors import BuilderError

    # No SBOM or provenance: `tooldock build --push` attaches them for a release; the cluster needs the images
    # (which the attachments would not change), as `tooldock swarm` builds them.
    builder = Builder(BuildOptions(output=output, cache=cache, attach=False), say=lambda m: say(f"  {m}"))
    found: dict[str, Image] = {}
    jobs: list[NamespaceSource | str] = [*sources, GATEWAY, *([REDIS] if redis else [])]
    for source in jobs:
        name = source if isinstance(source, str) else source.name
        try:
            say(f"building {name}")
            if source == REDIS:
                image, tag = build_program(builder, PROGRAMS["redis"]), "k8s"
            else:
                result = build_gateway(builder) if isinstance(source, str) else builder.build(source.path)
                image, tag = result.image, result.ref
            say(f"pushing {name} to {host}/{prefix}")
            pushed = push(builder.store, image, f"{host}/{prefix}", name, tag)
        except BuilderError as exc:
            raise K8sError(f"{name}: {exc}") from None
        found[name] = Image(f"{host}/{prefix}/{name}@{pushed.digest}", _python(image.config_json))
        say(f"{name}: {found[name].reference}")
    return found
