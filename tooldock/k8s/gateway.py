"""The shared objects: the Namespace (Pod Security "restricted", enforced), a default-deny NetworkPolicy, the
gateway (Deployment, Service, HorizontalPodAutoscaler, PodDisruptionBudget, NetworkPolicy) and Redis, the
state its replicas share (Deployment, Service, NetworkPolicy)."""

from __future__ import annotations

from typing import Any

from tooldock.k8s import pods, secrets
from tooldock.k8s.plan import GATEWAY_PORT, REDIS_PORT, WORKER_PORT, Plan
from tooldock.k8s.workers import GATEWAY_SELECTOR

REDIS_SELECTOR = pods.labels("redis")
GATEWAY_SECRETS = "/etc/tooldock/gateway"
DNS = {  # the cluster's DNS pods, which the gateway asks for the workers' addresses
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}


def _meta(plan: Plan, name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": plan.namespace, "labels": selector}


def namespace(plan: Plan) -> dict[str, Any]:
    enforced = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": plan.namespace, "labels": {**enforced, "app.kubernetes.io/part-of": pods.PART_OF}},
    }


def default_deny(plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(plan, "default-deny", pods.labels("policy")),
        "spec": {"podSelector": {}, "policyTypes": ["Egress", "Ingress"]},
    }


def gateway_deployment(plan: Plan) -> dict[str, Any]:
    volumes = [
        pods.secret_volume("tls", secrets.GATEWAY_TLS, pods.TLS_MOUNT),
        pods.secret_volume("gateway", secrets.GATEWAY, GATEWAY_SECRETS),
        pods.scratch("state", "/var/lib/tooldock", "1Gi"),
        pods.scratch("tools", "/tools", "1Mi"),  # an empty tools directory: the namespaces are the workers
        pods.scratch("tmp", "/tmp"),
    ]
    env = [
        {"name": "TOOLDOCK_WORKERS", "value": " ".join(plan.worker_address(w) for w in plan.workers)},
        {"name": "TOOLDOCK_TLS_DIR", "value": pods.TLS_MOUNT},
        {"name": "TOOLDOCK_BEARER_TOKEN_FILE", "value": f"{GATEWAY_SECRETS}/{secrets.BEARER}"},
        {"name": "TOOLDOCK_STATE_URL_FILE", "value": f"{GATEWAY_SECRETS}/{secrets.STATE_URL}"},
        {"name": "TOOLDOCK_STATE_KEY_FILE", "value": f"{GATEWAY_SECRETS}/{secrets.STATE_KEY}"},
        {"name": "TOOLDOCK_STATE_DIR", "value": "/var/lib/tooldock"},
    ]
    args = ["serve", "/tools", "--backend", "network", "--host", "0.0.0.0", "--port", str(GATEWAY_PORT)]
    container = {
        "name": "gateway",
        "image": plan.gateway.reference,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "env": env,
        "ports": [{"name": "http", "containerPort": GATEWAY_PORT, "protocol": "TCP"}],
        "startupProbe": pods.http_probe("/health", "http", 2, 60),
        "readinessProbe": pods.http_probe("/health", "http", 5, 2),
        "livenessProbe": pods.http_probe("/health", "http", 10, 3),
        "resources": {"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}},
        "securityContext": pods.container_security(),
        "volumeMounts": [mount for _, mount in volumes],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(plan, secrets.GATEWAY, GATEWAY_SELECTOR),
        "spec": {
            "replicas": plan.replicas,
            "selector": {"matchLabels": GATEWAY_SELECTOR},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": GATEWAY_SELECTOR},
                "spec": pods.pod_spec([container], [volume for volume, _ in volumes]),
            },
        },
    }


def gateway_service(plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(plan, secrets.GATEWAY, GATEWAY_SELECTOR),
        "spec": {
            "type": "ClusterIP",
            "selector": GATEWAY_SELECTOR,
            "ports": [{"name": "http", "port": GATEWAY_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def autoscaler(plan: Plan) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(plan, secrets.GATEWAY, GATEWAY_SELECTOR),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": secrets.GATEWAY},
            "minReplicas": plan.replicas,
            "maxReplicas": plan.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
                }
            ],
        },
    }


def gateway_policy(plan: Plan) -> dict[str, Any]:
    """In: HTTP from anywhere the Service is reached from. Out: the workers, Redis and DNS only."""
    workers = pods.labels("worker")
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(plan, secrets.GATEWAY, GATEWAY_SELECTOR),
        "spec": {
            "podSelector": {"matchLabels": GATEWAY_SELECTOR},
            "policyTypes": ["Egress", "Ingress"],
            "ingress": [{"ports": [{"port": GATEWAY_PORT, "protocol": "TCP"}]}],
            "egress": [
                {
                    "to": [{"podSelector": {"matchLabels": workers}}],
                    "ports": [{"port": WORKER_PORT, "protocol": "TCP"}],
                },
                {
                    "to": [{"podSelector": {"matchLabels": REDIS_SELECTOR}}],
                    "ports": [{"port": REDIS_PORT, "protocol": "TCP"}],
                },
                {"to": [DNS], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
            ],
        },
    }


def redis_objects(plan: Plan) -> list[dict[str, Any]]:
    """One Redis, its data in memory only (an emptyDir): losing it loses the sessions, not the tools."""
    conf_volume, conf_mount = pods.secret_volume("config", secrets.REDIS, "/etc/redis")
    data_volume, data_mount = pods.scratch("data", "/data", "1Gi")
    tcp = {"tcpSocket": {"port": "redis"}, "timeoutSeconds": 5}
    container = {
        "name": "redis",
        "image": plan.redis.reference,
        "imagePullPolicy": "IfNotPresent",
        # the image's own entrypoint runs redis-server with this file (ToolDock's Redis image, and the official
        # one's docker-entrypoint.sh, which puts redis-server before a first argument ending in .conf)
        "args": [f"/etc/redis/{secrets.REDIS_CONF}"],
        "ports": [{"name": "redis", "containerPort": REDIS_PORT, "protocol": "TCP"}],
        "readinessProbe": {**tcp, "periodSeconds": 5, "failureThreshold": 2},
        "livenessProbe": {**tcp, "periodSeconds": 10, "failureThreshold": 3},
        "resources": {"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}},
        "securityContext": pods.container_security(),
        "volumeMounts": [conf_mount, data_mount],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(plan, secrets.REDIS, REDIS_SELECTOR),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": REDIS_SELECTOR},
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": REDIS_SELECTOR},
                "spec": pods.pod_spec([container], [conf_volume, data_volume]),
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(plan, secrets.REDIS, REDIS_SELECTOR),
        "spec": {
            "type": "ClusterIP",
            "selector": REDIS_SELECTOR,
            "ports": [{"name": "redis", "port": REDIS_PORT, "targetPort": "redis", "protocol": "TCP"}],
        },
    }
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(plan, secrets.REDIS, REDIS_SELECTOR),
        "spec": {
            "podSelector": {"matchLabels": REDIS_SELECTOR},
            "policyTypes": ["Egress", "Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": GATEWAY_SELECTOR}}],
                    "ports": [{"port": REDIS_PORT, "protocol": "TCP"}],
                }
            ],
            "egress": [],
        },
    }
    return [deployment, service, policy]


def objects(plan: Plan) -> list[dict[str, Any]]:
    return [
        namespace(plan),
        default_deny(plan),
        gateway_deployment(plan),
        gateway_service(plan),
        autoscaler(plan),
        pods.pdb(secrets.GATEWAY, plan.namespace, GATEWAY_SELECTOR),
        gateway_policy(plan),
        *redis_objects(plan),
    ]
