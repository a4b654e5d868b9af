"""`tooldock k8s render`: Kubernetes manifests for a tools directory (tooldock/k8s/)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from tooldock.cli.common import cache_dir, refuse_namespace_folder


@click.group()
def k8s() -> None:
    """Run a tools directory on Kubernetes: manifests for `kubectl apply` (nothing here calls a cluster)."""


@k8s.command("render")
@click.argument("tools_dir", type=click.Path(path_type=Path))
@click.option(
    "--registry",
    required=True,
    metavar="HOST[:PORT][/PREFIX]",
    help="The registry every node pulls from: the images are pushed to HOST/PREFIX/<name> (PREFIX default: "
    "tooldock) and the manifests name them by digest.",
)
@click.option(
    "--replicas",
    default=2,
    show_default=True,
    type=click.IntRange(1, 100),
    help="The gateway's replicas (and its HorizontalPodAutoscaler's minimum).",
)
@click.option(
    "--max-replicas",
    default=10,
    show_default=True,
    type=click.IntRange(1, 100),
    help="The most gateway replicas the HorizontalPodAutoscaler scales to (at 70% CPU).",
)
@click.option(
    "--output",
    "-o",
    default="build/k8s",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the manifests go: one YAML file per kind, and create-secrets.sh.",
)
@click.option(
    "--namespace",
    "k8s_namespace",
    default="tooldock",
    show_default=True,
    help="The Kubernetes namespace everything is rendered into (its Namespace object included).",
)
@click.option(
    "--redis-image",
    default=None,
    metavar="REF@sha256:...",
    help="Redis's image (the gateways' shared state), pinned by digest. Default: ToolDock's own (Debian's "
    "redis-server on ToolDock's base, as tooldock swarm runs it), built and pushed with the others as "
    "REGISTRY/PREFIX/tooldock-redis; needed with --layouts.",
)
@click.option(
    "--layouts",
    type=click.Path(path_type=Path),
    default=None,
    help="Build nothing and push nothing: take the digests from the OCI layouts `tooldock build -o DIR` wrote "
    "(DIR/<namespace>/, and DIR/tooldock-gateway/ from --gateway), pushed to --registry by other means.",
)
@click.option(
    "--build-dir",
    default="build/oci",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the builder writes the images' OCI layouts (one sub-directory each) before pushing them; "
    "a later render can take them with --layouts.",
)
@click.option(
    "--cluster-domain",
    default="cluster.local",
    show_default=True,
    help="The cluster's DNS domain (the workers' headless Services are <name>.<namespace>.svc.DOMAIN).",
)
@click.option(
    "--with-secrets",
    "secrets_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every Secret with its values to this file (mode 0600; keep it out of the output and of "
    "version control): the namespaces' secrets from the secrets store, certificates issued by --ca, the "
    "bearer token from TOOLDOCK_BEARER_TOKEN (generated and printed once when unset).",
)
@click.option(
    "--ca",
    "ca_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="--with-secrets: the cluster CA directory (tooldock cluster ca init) that issues the certificates.",
)
def render(
    tools_dir: Path,
    registry: str,
    replicas: int,
    max_replicas: int,
    output: Path,
    k8s_namespace: str,
    redis_image: str | None,
    layouts: Path | None,
    build_dir: Path,
    cluster_domain: str,
    secrets_file: Path | None,
    ca_dir: Path | None,
) -> None:
    """Write Kubernetes manifests that run every namespace in TOOLS_DIR and the gateway in front of them.

    Builds each namespace, the gateway and Redis with the daemonless builder and pushes them to --registry
    (or, with --layouts, takes the digests of images built before). Per namespace: a Deployment of workers (replicas
    from tooldock.yaml `replicas:`, default 1) listening on port 7700 over mutual TLS, a headless Service, a
    PodDisruptionBudget and a NetworkPolicy (only gateways in; nothing out unless `network: egress`). Then the
    gateway (`serve --backend network`: a Deployment of --replicas, its Service on port 8000, a
    HorizontalPodAutoscaler, a PodDisruptionBudget), Redis, a default-deny NetworkPolicy and the Namespace,
    which enforces the "restricted" Pod Security profile every pod meets. Secret values are never in the
    manifests: create-secrets.sh makes the Secrets with kubectl (or see --with-secrets). Progress on stderr;
    the files written on stdout.
    """
    from tooldock.k8s import K8sError
    from tooldock.k8s.render import Options, WithSecrets
    from tooldock.k8s.render import render as render_manifests

    refuse_namespace_folder(tools_dir, "k8s render")
    if secrets_file is not None and ca_dir is None:
        raise click.UsageError("--with-secrets needs --ca DIR: the cluster CA that issues the TLS certificates")
    if secrets_file is not None and secrets_file.resolve().parent == output.resolve():
        raise click.UsageError("--with-secrets: put the file outside --output (kubectl apply -f would apply it)")
    if max_replicas < replicas:
        raise click.UsageError(f"--max-replicas {max_replicas} is below --replicas {replicas}")

    def say(message: str) -> None:
        click.echo(f"tooldock: {message}", err=True)

    options = Options(
        tools_dir,
        registry,
        output,
        redis_image,
        k8s_namespace,
        replicas,
        max_replicas,
        cluster_domain,
        layouts,
        cache_dir(),
        build_dir,
    )
    token, generated = os.environ.get("TOOLDOCK_BEARER_TOKEN", ""), False
    if secrets_file is not None and not token:
        import secrets

        token, generated = secrets.token_urlsafe(32), True
    try:
        wanted = WithSecrets(secrets_file, ca_dir, token) if secrets_file is not None and ca_dir is not None else None
        rendered = render_manifests(options, say, wanted)
    except K8sError as exc:
        raise click.ClickException(str(exc)) from None
    if secrets_file is not None:
        say(f"wrote the Secrets with their values to {secrets_file} (mode 0600)")
        if generated:
            say(f"TOOLDOCK_BEARER_TOKEN is not set; the gateway's bearer token is:\n    {token}")
    for path in rendered.files:
        click.echo(str(path))
    say(
        f"{len(rendered.objects)} objects for {len(rendered.plan.workers)} namespace(s) in {output}; next: "
        f"{'kubectl apply -f ' + str(secrets_file) if secrets_file else 'CA=... ' + str(output / 'create-secrets.sh')}"
        f", then kubectl apply -f {output}"
    )
