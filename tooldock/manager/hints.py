"""What write_tool's answer adds about the namespace's code as a whole (the repository analysis reads it,
never runs it): the secrets it reads and does not declare, whose values its worker would not receive; the
packages it imports that its environment does not have (process backend, manager/imports.py); and, on the
docker backend, the hosts it calls from a namespace whose containers have no network.

Network access is the person's to grant (`network: egress` in tooldock.yaml): the manager says so and does
not change it itself, as it never handles a secret's value.
"""

from __future__ import annotations

from typing import Any

from tooldock.errors import InvalidInput
from tooldock.manager.declare import code_needs, declarations, undeclared
from tooldock.manager.deps import REQUIREMENTS
from tooldock.manager.imports import missing_packages
from tooldock.manager.secrets import declare_step
from tooldock.manager.workspace import Workspace
from tooldock.namespace.config import CONFIG_FILE
from tooldock.namespace.scanner import requirements_text
from tooldock.namespace.toolsfile import declared_secrets
from tooldock.runtime.backends.environments import Environments


def written_hint(ws: Workspace, namespace: str, containers: bool, envs: Environments | None = None) -> dict[str, Any]:
    """`undeclared_secrets`, `missing_packages`, `no_network_for` and their `next_steps`, each only when there
    is something to do (nothing when tooldock.yaml is broken: check_secrets and reload_core say so).
    `containers`: the workers run on the docker backend, where `network: none` is enforced; `envs`: the
    process backend's worker environments."""
    try:
        name, config, upstream = declarations(ws, namespace)
    except InvalidInput:
        return {}
    needs = code_needs(ws, name)
    hint: dict[str, Any] = {}
    missed = undeclared(needs, declared_secrets(config.secrets, upstream))
    if missed:
        hint["undeclared_secrets"] = missed
    steps = [declare_step(key, name) for key in missed]
    if envs is not None:
        packages = _missing(ws, name, config.python, envs)
        if packages:
            hint["missing_packages"] = packages
        steps += [
            f"{p['file']}:{p['line']} imports {p['module']}, which neither a file of {name} nor its environment "
            f"provides: if it is a package from the index, call add_requirement('{name}', '{p['package']}') (it "
            "installs at once), then reload_core()"
            for p in packages
        ]
    hosts = list(needs.get("apis_called") or ())
    if containers and hosts and config.network == "none":
        hint["no_network_for"] = hosts
        steps.append(
            f"the code calls {', '.join(hosts)}, but {name}'s containers have no network (network: none): ask "
            f"the user to add `network: egress` to {name}/{CONFIG_FILE} (the manager does not grant network "
            "access itself), then call reload_core()"
        )
    if steps:
        hint["next_steps"] = steps
    return hint


def _missing(ws: Workspace, name: str, python: str | None, envs: Environments) -> list[dict[str, Any]]:
    """manager/imports.py's `missing_packages` for the namespace; [] when it cannot be read (a requirements.txt
    that is a link out of the folder, which reload_core reports): the file is written, only the hint is left
    out."""
    try:
        text = requirements_text(ws.metadata_file(name, REQUIREMENTS))
        return missing_packages(ws.namespace_dir(name), text, python, envs)
    except (InvalidInput, OSError):  # a folder deleted meanwhile, an environment being replaced: no hint
        return []
