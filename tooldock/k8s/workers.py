"""One namespace's objects: its workers' Deployment, the headless Service the gateway resolves them by,
a PodDisruptionBudget and the NetworkPolicy that lets only gateways in (and nothing out unless
`network: egress`)."""

from __future__ import annotations

from typing import Any

from tooldock.k8s import pods
from tooldock.k8s.plan import WORKER_PORT, Plan, Worker
from tooldock.k8s.secrets import worker_secrets, worker_tls

GATEWAY_SELECTOR = pods.labels("gateway")

# The exec probe: a TLS handshake with the pod's own certificate (the cluster CA's: a gateway's credentials)
# and the worker's first line, its ready handshake. A plain TCP probe would be refused and logged as an
# unauthenticated peer at every period; this one is logged as a gateway connecting.
PROBE = (
    "import json,pathlib,socket;from tooldock.worker import tls;"
    f"c=tls.build_context(pathlib.Path('{pods.TLS_MOUNT}'),False);"
    f"s=c.wrap_socket(socket.create_connection(('127.0.0.1',{WORKER_PORT}),5));s.settimeout(5);"
    "assert json.loads(s.makefile('rb').readline()).get('op')=='ready'"
)


def selector(worker: Worker) -> dict[str, str]:
    return pods.labels("worker", **{pods.NAMESPACE_LABEL: worker.name})


def _env(worker: Worker) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "TOOLDOCK_WORKER_LISTEN", "value": f"0.0.0.0:{WORKER_PORT}"},
        {"name": "TOOLDOCK_TLS_DIR", "value": pods.TLS_MOUNT},
    ]
    declared = worker.source.config.secrets
    if declared:
        defaults = dict(worker.source.config.env)  # a name with an `env:` default may be left out of the Secret
        env.append({"name": "TOOLDOCK_SECRET_NAMES", "value": ",".join(declared)})
        env += [
            {
                "name": name,
                "valueFrom": {
                    "secretKeyRef": {"name": worker_secrets(worker), "key": name, "optional": name in defaults}
                },
            }
            for name in declared
        ]
    return env


def deployment(plan: Plan, worker: Worker) -> dict[str, Any]:
    tls_volume, tls_mount = pods.secret_volume("tls", worker_tls(worker), pods.TLS_MOUNT)
    tmp_volume, tmp_mount = pods.scratch("tmp", "/tmp", "256Mi")
    run_volume, run_mount = pods.scratch("run", "/run/tooldock", "1Mi")  # the image's socket directory (unused)
    probe = [worker.image.python or "python3", "-s", "-c", PROBE]
    container = {
        "name": "worker",
        "image": worker.image.reference,
        "imagePullPolicy": "IfNotPresent",
        "env": _env(worker),
        "ports": [{"name": "worker", "containerPort": WORKER_PORT, "protocol": "TCP"}],
        "startupProbe": pods.exec_probe(probe, 2, 60),
        "readinessProbe": pods.exec_probe(probe, 10, 2),
        "livenessProbe": pods.exec_probe(probe, 30, 3),
        "resources": pods.resources(worker.source.config.limits),
        "securityContext": pods.container_security(),
        "volumeMounts": [tls_mount, tmp_mount, run_mount],
    }
    chosen = selector(worker)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": worker.object_name, "namespace": plan.namespace, "labels": chosen},
        "spec": {
            "replicas": worker.replicas,
            "selector": {"matchLabels": chosen},
            # a new pod is ready before an old one goes: the gateway always has one to call
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": chosen},
                "spec": pods.pod_spec([container], [tls_volume, tmp_volume, run_volume]),
            },
        },
    }


def service(plan: Plan, worker: Worker) -> dict[str, Any]:
    """Headless: its DNS name resolves to every ready pod's address, which the gateway spreads calls over."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": worker.object_name, "namespace": plan.namespace, "labels": selector(worker)},
        "spec": {
            "clusterIP": "None",
            "selector": selector(worker),
            "ports": [{"name": "worker", "port": WORKER_PORT, "targetPort": "worker", "protocol": "TCP"}],
        },
    }


def network_policy(plan: Plan, worker: Worker) -> dict[str, Any]:
    egress = worker.source.config.network == "egress"
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": worker.object_name, "namespace": plan.namespace, "labels": selector(worker)},
        "spec": {
            "podSelector": {"matchLabels": selector(worker)},
            "policyTypes": ["Egress", "Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": GATEWAY_SELECTOR}}],
                    "ports": [{"port": WORKER_PORT, "protocol": "TCP"}],
                }
            ],
            # `network: egress`: anywhere; otherwise nowhere (not even DNS)
            "egress": [{}] if egress else [],
        },
    }


def objects(plan: Plan, worker: Worker) -> list[dict[str, Any]]:
    return [
        deployment(plan, worker),
        service(plan, worker),
        pods.pdb(worker.object_name, plan.namespace, selector(worker)),
        network_policy(plan, worker),
    ]
