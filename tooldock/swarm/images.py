"""The stack's images, built by ToolDock's daemonless builder and pushed to the registry every node pulls
from: one per namespace, the gateway's, Redis's and (publish: edge) HAProxy's. Each is referenced by digest,
`REGISTRY/tooldock/NAME@sha256:...`, so a node runs exactly what was built and a namespace whose image did
not change keeps its running tasks. No attachments (SBOM, provenance) here: `tooldock build --push` makes
those for a release; the stack needs the images only. Given a signing key (`swarm up --sign-key`), each image
is signed in the registry once pushed (cosign's `.sig`, signing.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tooldock.builder.build import Builder, BuildOptions
from tooldock.builder.debimage import PROGRAMS, build_program
from tooldock.builder.gateway import build_gateway
from tooldock.builder.oci import Image
from tooldock.builder.registry import push
from tooldock.namespace.config import read_config
from tooldock.namespace.models import NamespaceConfig

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

PREFIX = "tooldock"


@dataclass(frozen=True)
class Built:
    name: str  # namespace, or gateway / redis / haproxy
    reference: str  # REGISTRY/tooldock/REPO@sha256:...
    digest: str
    config: NamespaceConfig | None = None  # a namespace's tooldock.yaml


def namespace_dirs(tools_dir: Path) -> list[Path]:
    """The namespaces of TOOLS_DIR: its folders, but for hidden ones and those starting with `_`."""
    return sorted(p for p in tools_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


class ImageMaker:
    """Builds, pushes and (with `key`) signs; `say` gets one line per step."""

    def __init__(
        self,
        registry: str,
        output: Path,
        cache: Path,
        say: Callable[[str], None],
        key: ec.EllipticCurvePrivateKey | None = None,
    ) -> None:
        self.registry, self.say, self.key = registry, say, key
        self.builder = Builder(BuildOptions(output=output, cache=cache, attach=False), say=lambda m: say(f"  {m}"))

    def _push(self, name: str, repository: str, image: Image, tag: str) -> Built:
        pushed = push(self.builder.store, image, f"{self.registry}/{PREFIX}", repository, tag)
        reference = f"{self.registry}/{PREFIX}/{repository}@{pushed.digest}"
        signed = ""
        if self.key is not None:
            from tooldock.builder.signing import sign_image

            sign_image(reference, self.key)
            signed = ", signed"
        self.say(f"{name}: {reference} ({len(pushed.uploaded)} blobs uploaded{signed})")
        return Built(name, reference, pushed.digest)

    def namespace(self, folder: Path) -> Built:
        config, problem = read_config(folder)
        if problem is not None:
            from tooldock.errors import BuilderError

            raise BuilderError(f"{folder / problem.file}: {problem.message}")
        result = self.builder.build(folder)
        built = self._push(result.namespace, result.namespace, result.image, result.ref or "latest")
        return Built(built.name, built.reference, built.digest, config)

    def gateway(self) -> Built:
        result = build_gateway(self.builder)
        return self._push("gateway", "tooldock-gateway", result.image, result.ref)

    def program(self, which: str) -> Built:
        program = PROGRAMS[which]
        return self._push(which, program.name, build_program(self.builder, program), "swarm")
