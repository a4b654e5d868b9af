"""What is rendered: the namespaces as scanned, each image by digest, and the deployment's own choices."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tooldock.k8s import K8sError
from tooldock.namespace.models import NamespaceSource
from tooldock.namespace.scanner import scan_tools_dir

WORKER_PORT = 7700  # every worker listens here (TOOLDOCK_WORKER_LISTEN), as on Swarm
GATEWAY_PORT = 8000
REDIS_PORT = 6379
MAX_REPLICAS = 100
DIGEST_REF = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")
_REGISTRY = re.compile(
    r"^(?P<host>(?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+(?::[0-9]{1,5})?|\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?)"
    r"(?:/(?P<prefix>[a-z0-9]+(?:[._/-][a-z0-9]+)*))?$"
)
_K8S_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
WORKER_PREFIX = "worker-"


@dataclass(frozen=True)
class Image:
    """One image as the manifests name it: `reference` is REGISTRY/PREFIX/NAME@sha256:..."""

    reference: str
    python: str = ""  # the image's interpreter (its entrypoint's first word): the workers' exec probe runs it

    def __post_init__(self) -> None:
        if not DIGEST_REF.match(self.reference):
            raise K8sError(f"image {self.reference!r} is not pinned by digest (NAME@sha256:<64 hex digits>)")


@dataclass(frozen=True)
class Worker:
    source: NamespaceSource
    image: Image

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def object_name(self) -> str:
        return WORKER_PREFIX + self.source.name

    @property
    def replicas(self) -> int:
        found = getattr(self.source.config, "replicas", None)  # `replicas:` in tooldock.yaml (Swarm's key too)
        return int(found) if isinstance(found, int) and found >= 1 else 1


@dataclass(frozen=True)
class Plan:
    namespace: str  # the Kubernetes namespace everything goes in
    workers: tuple[Worker, ...]
    gateway: Image
    redis: Image
    replicas: int = 2  # the gateway's, at the start and the HPA's minimum
    max_replicas: int = 10
    cluster_domain: str = "cluster.local"
    notes: list[str] = field(default_factory=list)

    def worker_address(self, worker: Worker) -> str:
        """What the gateway's TOOLDOCK_WORKERS names: the headless Service, resolved to every ready pod."""
        host = f"{worker.object_name}.{self.namespace}.svc.{self.cluster_domain}"
        return f"{worker.name}=tls://{host}:{WORKER_PORT}"


def parse_registry(text: str) -> tuple[str, str]:
    """`HOST[:PORT][/PREFIX]` -> (host, prefix); the prefix defaults to `tooldock`."""
    match = _REGISTRY.match(text.strip().rstrip("/"))
    if not match or "://" in text:
        raise K8sError(
            f"--registry {text!r}: expected HOST[:PORT][/PREFIX] (no scheme), e.g. registry.example.com:5000 or "
            "ghcr.io/acme/tools; images are pushed to and pulled from HOST/PREFIX/<name> (PREFIX default: tooldock)"
        )
    return match.group("host"), match.group("prefix") or "tooldock"


_DOMAIN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def check_names(namespace: str, replicas: int, max_replicas: int, domain: str = "cluster.local") -> None:
    if not _K8S_NAME.match(namespace):
        raise K8sError(
            f"--namespace {namespace!r}: a Kubernetes namespace is 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    if not _DOMAIN.match(domain) or len(domain) > 253:
        raise K8sError(f"--cluster-domain {domain!r}: a DNS domain such as cluster.local (lowercase, dot-separated)")
    if not 1 <= replicas <= MAX_REPLICAS:
        raise K8sError(f"--replicas {replicas}: give a whole number from 1 to {MAX_REPLICAS}")
    if not replicas <= max_replicas <= MAX_REPLICAS:
        raise K8sError(f"--max-replicas {max_replicas}: give a number from --replicas ({replicas}) to {MAX_REPLICAS}")


def scan(tools_dir: Path) -> tuple[list[NamespaceSource], list[str]]:
    """The namespaces to render, and notes on what is left out (upstream namespaces). A namespace with a
    problem stops the render: a cluster must not be given a namespace that does not load."""
    try:
        result = scan_tools_dir(tools_dir)
    except FileNotFoundError:
        raise K8sError(
            f"tools directory {str(tools_dir)!r} does not exist or is not a directory; give the folder that holds "
            "one sub-folder per namespace (e.g. examples/)"
        ) from None
    found = [f"{p.file}: {p.message}" for p in result.problems]
    found += [f"{ns.name}/{p.file}: {p.message}" for ns in result.namespaces for p in ns.problems]
    if found:
        raise K8sError("fix these first (`tooldock check` shows them too): " + "; ".join(found))
    notes = [
        f"{ns.name}: an upstream namespace (tools.toml) is not rendered: it runs inside a gateway, not as a worker"
        for ns in result.namespaces
        if ns.is_upstream
    ]
    chosen = [ns for ns in result.namespaces if not ns.is_upstream]
    if not chosen:
        raise K8sError(f"{tools_dir}: no namespace folder to render (one sub-folder of @tool files per namespace)")
    long = [ns.name for ns in chosen if len(WORKER_PREFIX + ns.name) > 63]
    if long:
        raise K8sError(
            f"namespace name(s) too long for Kubernetes: {', '.join(long)} (worker-<name> is a Service name, at most "
            f"63 characters: rename the folder to at most {63 - len(WORKER_PREFIX)} characters)"
        )
    return chosen, notes
