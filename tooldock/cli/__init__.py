"""The `tooldock` command line: the click group, and one module per command group.

    serve       `serve`                     the gateway (and, with --manager, the manager next to it)
    check       `check`                     a tools directory scanned as `serve` would, nothing started
    manager     `manager`                   the manager MCP server
    images      `build`, `base`, `inspect`  namespace folders -> OCI images; their SBOM and provenance
    signing     `keygen`, `sign`, `verify`  cosign-format signatures of images and their attachments
    containers  `deploy`, `ps`, `stop`      worker containers on the Docker engine
    secrets     `secrets ...`               the encrypted secrets store (human-only)
    keys        `keys ...`                  API keys for the relay socket and HTTP (create, list, revoke)
    relay       `relay`                     the stdio MCP server a sandbox runs against the relay socket
    compose     `compose up|down|init`      the gateway and manager containers on one host (Docker Compose)
    cluster     `cluster ca ...`, `cert`    the cluster CA: certificates for workers and gateways on other hosts
    k8s         `k8s render`                Kubernetes manifests for a tools directory
    swarm       `swarm up|render|status|down` ToolDock on Docker Swarm: gateway replicas, Redis, a service per namespace
    new         `new`                       a namespace folder to start from (a tool, its test, its config)
    call        `call`                      one tool of a namespace folder called from a shell, no server
    runtests    `test`                      a namespace's own tests/ run in its environment against it
    install     `install`                   a namespace added to an MCP client's configuration file
    common      what the command modules share (settings, cache directory)

Results go to stdout (JSON when asked), logs and progress to stderr. Errors from the packages below become
`click.ClickException` here and nowhere else.
"""

from __future__ import annotations

import click

import tooldock
from tooldock.cli import (
    call,
    check,
    cluster,
    compose,
    containers,
    images,
    install,
    k8s,
    keys,
    manager,
    new,
    relay,
    runtests,
    secrets,
    serve,
    signing,
    swarm,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tooldock.__version__, prog_name="tooldock")
def main() -> None:
    """ToolDock: serve folders of Python @tool functions over MCP and REST."""


for _command in (
    serve.serve,
    check.check,
    manager.manager,
    images.build,
    images.base,
    images.inspect,
    signing.keygen,
    signing.sign,
    signing.verify,
    containers.deploy,
    containers.ps,
    containers.stop,
    secrets.secrets,
    keys.keys,
    relay.relay,
    new.new,
    call.call,
    runtests.test,
    install.install,
    compose.compose,
    cluster.cluster,
    k8s.k8s,
    swarm.swarm,
):
    main.add_command(_command)
