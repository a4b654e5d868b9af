"""What every pod shares: the "restricted" Pod Security profile, probes, resources, labels.

Restricted (https://kubernetes.io/docs/concepts/security/pod-security-standards/): non-root, the runtime's
default seccomp profile, no privilege escalation, every capability dropped; plus a read-only root file
system (writable places are emptyDir volumes) and no service account token (nothing here calls the API).
"""

from __future__ import annotations

import math
import re
from typing import Any

from tooldock.namespace.models import Limits

PART_OF = "tooldock"
COMPONENT = "app.kubernetes.io/component"
NAMESPACE_LABEL = "tooldock.dev/namespace"  # a worker pod's ToolDock namespace
NONROOT = 65532  # the uid and gid ToolDock's images run as
TLS_MOUNT = "/etc/tooldock/tls"
DEFAULT_MEMORY, DEFAULT_CPU = "512Mi", "500m"  # a worker's limits when its tooldock.yaml gives none


def labels(component: str, **more: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": PART_OF, COMPONENT: component, **more}


def pod_security(uid: int = NONROOT) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def scratch(name: str, path: str, size: str = "64Mi") -> tuple[dict[str, Any], dict[str, Any]]:
    """A writable emptyDir (volume, mount): the root file system is read-only."""
    return {"name": name, "emptyDir": {"sizeLimit": size}}, {"name": name, "mountPath": path}


def secret_volume(name: str, secret: str, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {"name": name, "secret": {"secretName": secret, "defaultMode": 0o440}},
        {"name": name, "mountPath": path, "readOnly": True},
    )


def pod_spec(containers: list[dict[str, Any]], volumes: list[dict[str, Any]], uid: int = NONROOT) -> dict[str, Any]:
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,  # no <SERVICE>_PORT variables: they would collide with settings
        "securityContext": pod_security(uid),
        "terminationGracePeriodSeconds": 30,
        "containers": containers,
        "volumes": sorted(volumes, key=lambda v: str(v["name"])),
    }


def memory(text: str) -> str:
    """tooldock.yaml's `256m` / `1g` (Docker's units, powers of 1024) as a Kubernetes quantity."""
    match = re.fullmatch(r"([0-9]+)([kmgKMG]?)", text)
    if not match:
        return text
    number, unit = match.groups()
    return number + {"": "", "k": "Ki", "m": "Mi", "g": "Gi"}[unit.lower()]


def cpu(value: float) -> str:
    return f"{max(1, math.ceil(value * 1000))}m"


def resources(limits: Limits) -> dict[str, Any]:
    """Limits from tooldock.yaml (`limits.memory`, `limits.cpus`), requested in full for memory (a worker
    is not evicted for using what it was promised) and a quarter for CPU (calls come in bursts)."""
    mem = memory(limits.memory) if limits.memory else DEFAULT_MEMORY
    cores = cpu(limits.cpus) if limits.cpus else DEFAULT_CPU
    request = f"{max(1, int(cores.removesuffix('m')) // 4)}m"
    return {"limits": {"cpu": cores, "memory": mem}, "requests": {"cpu": request, "memory": mem}}


def http_probe(path: str, port: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def exec_probe(command: list[str], period: int, failures: int) -> dict[str, Any]:
    return {"exec": {"command": command}, "periodSeconds": period, "timeoutSeconds": 10, "failureThreshold": failures}


def pdb(name: str, namespace: str, selector: dict[str, str]) -> dict[str, Any]:
    """At most one pod evicted at a time (a node drained, a cluster upgraded). With one replica that one may
    go (calls fail until it is started elsewhere): a budget of none would block every drain for ever."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "labels": selector},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector}},
    }
