"""`tooldock k8s render`, put together: scan, images by digest, objects, files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldock.k8s import K8sError, gateway, output, secrets, workers
from tooldock.k8s.images import GATEWAY, REDIS, Say, built, from_layouts
from tooldock.k8s.plan import DIGEST_REF, Image, Plan, Worker, check_names, parse_registry, scan


@dataclass(frozen=True)
class Options:
    tools_dir: Path
    registry: str
    output: Path
    redis_image: str | None  # None: ToolDock's own, built and pushed with the others
    namespace: str = "tooldock"
    replicas: int = 2
    max_replicas: int = 10
    cluster_domain: str = "cluster.local"
    layouts: Path | None = None  # digests from these OCI layouts; None: build and push now
    cache: Path = Path("build/cache")  # the builder's cache (when building)
    build_output: Path = Path("build/oci")  # where the builder writes its layouts (when building)


@dataclass(frozen=True)
class Rendered:
    plan: Plan
    objects: list[dict[str, Any]]
    files: list[Path]


def objects(plan: Plan) -> list[dict[str, Any]]:
    found = gateway.objects(plan)
    for worker in plan.workers:
        found += workers.objects(plan, worker)
    return found


def make_plan(options: Options, say: Say) -> Plan:
    check_names(options.namespace, options.replicas, options.max_replicas, options.cluster_domain)
    host, prefix = parse_registry(options.registry)
    if options.redis_image is not None and not DIGEST_REF.match(options.redis_image):
        raise K8sError(
            f"--redis-image {options.redis_image!r}: give Redis's image pinned by digest, "
            "REGISTRY/REPOSITORY@sha256:<64 hex digits> (`skopeo inspect docker://IMAGE` shows the digest)"
        )
    if options.layouts is not None and options.redis_image is None:
        raise K8sError(
            "--layouts builds nothing, Redis's image included: give it by digest with --redis-image (a render that "
            "builds prints the one it pushed: REGISTRY/PREFIX/tooldock-redis@sha256:...)"
        )
    sources, notes = scan(options.tools_dir)
    for note in notes:
        say(f"note: {note}")
    names = [s.name for s in sources]
    if options.layouts is not None:
        images = from_layouts(options.layouts, names, host, prefix)
    else:
        own_redis = options.redis_image is None
        images = built(sources, host, prefix, options.cache, options.build_output, say, own_redis)
    return Plan(
        options.namespace,
        tuple(Worker(s, images[s.name]) for s in sources),
        images[GATEWAY],
        Image(options.redis_image) if options.redis_image is not None else images[REDIS],
        options.replicas,
        options.max_replicas,
        options.cluster_domain,
        notes,
    )


@dataclass(frozen=True)
class WithSecrets:
    """`--with-secrets`: where the Secrets with their values go, the CA that issues the certificates, the
    gateway's bearer token."""

    path: Path
    ca_dir: Path
    bearer_token: str = field(repr=False)


def render(options: Options, say: Say, with_secrets: WithSecrets | None = None) -> Rendered:
    """Everything checked (and, with `with_secrets`, every value found) before the first file is written."""
    plan = make_plan(options, say)
    found = objects(plan)
    private = (
        secrets.with_values(plan, with_secrets.ca_dir, with_secrets.bearer_token, store_values(plan))
        if with_secrets is not None
        else []
    )
    files = output.write(options.output, output.by_kind(found), secrets.script(plan))
    if with_secrets is not None:
        output.write_private(with_secrets.path, private)
    return Rendered(plan, found, files)


def store_values(plan: Plan) -> dict[str, dict[str, str]]:
    """Each namespace's declared secrets from the secrets store (TOOLDOCK_SECRETS_DIR), all of them set."""
    from tooldock.errors import SecretsError
    from tooldock.secrets.resolve import resolve_namespace
    from tooldock.secrets.store import SecretStore

    wanted = [w for w in plan.workers if w.source.config.secrets]
    if not wanted:
        return {}
    try:
        snapshot = SecretStore.from_env().snapshot()
    except SecretsError as exc:
        raise K8sError(f"the secrets store: {exc}") from None
    values, unset = {}, []
    for worker in wanted:
        config = worker.source.config
        resolved = resolve_namespace(*snapshot, worker.name, config.secrets, dict(config.env))
        values[worker.name] = resolved.values
        unset += [f"{worker.name}: {name}" for name in (*resolved.missing, *resolved.placeholders)]
    if unset:
        raise K8sError(
            f"no value in the secrets store for {', '.join(unset)}: set each with `tooldock secrets set NAME "
            "--namespace NS` (or leave out --with-secrets and use create-secrets.sh)"
        )
    return values
