"""The stack file `tooldock swarm up` deploys (`docker stack deploy -c`) and `tooldock swarm render` writes.

A pure function of a `StackPlan`: the same plan gives the same text (tests compare it with a stored file).
Services:

- `redis`: the gateways' shared state (sessions, rate limits, keys), its password in a Docker secret (its
  config file); on the internal `state` network only.
- `gateway`: N replicas of `tooldock serve --backend network`; `TOOLDOCK_WORKERS` names each namespace as
  `NS=tls://tasks.<its service>:7700` (every task of the service: DNS discovery); the bearer token, the state
  URL, the state key and its TLS certificate as Docker secrets. Published on P by the routing mesh
  (`publish: mesh`), or, where that cannot run (no IPVS in the kernel), behind
- `edge` (`publish: edge`): HAProxy, one task, published in host mode, spreading connections over every
  gateway task it finds by DNS (`tasks.gateway`, re-resolved every second).
- `ns-<namespace>`: the namespace's worker image by digest, `replicas:` from its tooldock.yaml, listening on
  TLS :7700 (`TOOLDOCK_WORKER_LISTEN`), hardened as the docker backend runs workers (uid 65532, read-only
  root, no capabilities, no-new-privileges, memory and CPU limits), on the internal `workers` network (and on
  `egress`, a network with a way out, only with `network: egress`), updated start-first, its declared secrets
  as Docker secrets mounted into its tasks only.

Internal services use DNS round robin (`endpoint_mode: dnsrr`): no virtual IP, so no IPVS needed, and a
gateway sees every task of a namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

WORKER_PORT, GATEWAY_PORT, REDIS_PORT, EDGE_PORT = 7700, 8000, 6379, 8080
TLS_DIR = "/run/secrets/tls"
SECRETS_DIR = "/run/secrets/ns"
UID = "65532"
DEFAULT_MEMORY, DEFAULT_CPUS = "256m", 1.0
Publish = Literal["mesh", "edge"]
HEALTH_GATEWAY = "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health', timeout=4)"
HEALTH_WORKER = (
    "import socket, ssl; d = '/run/secrets/tls/'; c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); "
    "c.check_hostname = False; c.load_cert_chain(d + 'cert.pem', d + 'key.pem'); c.load_verify_locations(d + "
    "'trust.pem'); s = c.wrap_socket(socket.create_connection(('127.0.0.1', 7700), 3)); s.close()"
)
HAPROXY_CFG = """\
global
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    option redispatch
    retries 3
    retry-on conn-failure
    timeout check 5s
resolvers docker
    nameserver dns 127.0.0.11:53
    hold valid 1s
    hold obsolete 1s
    hold nx 1s
frontend public
    bind :8080
    default_backend gateways
backend gateways
    balance leastconn
    option httpchk GET /health
    server-template gateway 16 tasks.gateway:8000 resolvers docker init-addr none check inter 1s fall 2 rise 1
"""


@dataclass(frozen=True)
class NamespacePlan:
    name: str
    image: str  # REGISTRY/PREFIX/NAME@sha256:...
    replicas: int = 1
    network: str = "none"
    memory: str | None = None
    cpus: float | None = None
    secrets: tuple[tuple[str, str], ...] = ()  # (variable name, Docker secret name)
    tls: tuple[str, str, str] = ("", "", "")  # Docker secret names of cert.pem, key.pem, trust.pem


@dataclass(frozen=True)
class StackPlan:
    gateway_image: str
    redis_image: str
    port: int
    replicas: int
    secrets: dict[str, str]  # role (bearer, state_url, state_key, redis_conf): Docker secret name
    gateway_tls: tuple[str, str, str]
    namespaces: tuple[NamespacePlan, ...] = ()
    publish: Publish = "mesh"
    edge_image: str = ""
    edge_config: str = ""  # Docker config name of haproxy.cfg (publish: edge)
    labels: dict[str, str] = field(default_factory=dict)


def service_name(namespace: str) -> str:
    """A namespace's service in the stack (Docker names: letters, digits, '-', '_', '.')."""
    return f"ns-{namespace}"


def workers_env(plan: StackPlan) -> str:
    return ",".join(f"{n.name}=tls://tasks.{service_name(n.name)}:{WORKER_PORT}" for n in plan.namespaces)


def _secret(name: str, target: str, mode: int = 0o400) -> dict[str, Any]:
    return {"source": name, "target": target, "uid": UID, "gid": UID, "mode": mode}


def _tls(names: tuple[str, str, str]) -> list[dict[str, Any]]:
    return [_secret(s, f"tls/{f}") for s, f in zip(names, ("cert.pem", "key.pem", "trust.pem"), strict=True)]


def _hardened() -> dict[str, Any]:
    return {
        "user": f"{UID}:{UID}",
        "read_only": True,
        "cap_drop": ["ALL"],
        # no `security_opt: [no-new-privileges]`: `docker stack deploy` ignores it (Swarm services have no such
        # setting before Engine API 1.46); with every capability dropped a set-uid file gains nothing, and the
        # images carry none (the tests look)
    }


def _scratch(megabytes: int = 64) -> list[dict[str, Any]]:
    """The one writable place on a read-only root: /tmp, a memory file system (tmpfs) gone with the task. (A
    tmpfs on a directory of the image takes that directory's owner and mode; /tmp's are 1777.)"""
    return [{"type": "tmpfs", "target": "/tmp", "tmpfs": {"size": megabytes * 1024 * 1024}}]


def _health(code: str, start: str = "120s") -> dict[str, Any]:
    return {
        "test": ["CMD", "/usr/bin/python3", "-c", code],
        "interval": "3s",
        "timeout": "10s",
        "retries": 5,
        "start_period": start,
    }


def _deploy(replicas: int, memory: str, cpus: float, labels: dict[str, str], vip: bool = False) -> dict[str, Any]:
    return {
        "mode": "replicated",
        "replicas": replicas,
        "endpoint_mode": "vip" if vip else "dnsrr",
        "labels": dict(labels),
        "update_config": {"order": "start-first", "parallelism": 1, "failure_action": "rollback", "monitor": "10s"},
        "rollback_config": {"order": "start-first", "parallelism": 1},
        "restart_policy": {"condition": "any", "delay": "1s"},
        "resources": {"limits": {"memory": memory, "cpus": f"{cpus:g}"}},
    }


def _redis(plan: StackPlan) -> dict[str, Any]:
    return {
        "image": plan.redis_image,
        "command": ["/run/secrets/redis.conf"],
        **_hardened(),
        "secrets": [_secret(plan.secrets["redis_conf"], "redis.conf")],
        "volumes": [*_scratch(), {"type": "volume", "source": "redis-data", "target": "/data"}],
        "networks": ["state"],
        "healthcheck": {
            "test": ["CMD", "/usr/bin/redis-cli", "PING"],  # answers (NOAUTH) without the password: alive
            "interval": "2s",
            "timeout": "4s",
            "retries": 3,
            "start_period": "10s",
        },
        # stop-first: two Redis tasks must never share the append-only file
        "deploy": {**_deploy(1, "256m", 1.0, plan.labels), "update_config": {"order": "stop-first"}},
    }


def _gateway(plan: StackPlan) -> dict[str, Any]:
    service: dict[str, Any] = {
        "image": plan.gateway_image,
        "command": ["serve", "/tools", "--backend", "network", "--host", "0.0.0.0", "--port", str(GATEWAY_PORT)],
        **_hardened(),
        "environment": {
            "TOOLDOCK_WORKERS": workers_env(plan),
            "TOOLDOCK_TLS_DIR": TLS_DIR,
            "TOOLDOCK_STATE_DIR": "/tmp/tooldock",
            # on SIGTERM: /health answers 503 this long, serving on, so the edge (2 failed checks, 1 s apart) or
            # the routing mesh takes the task out before it stops accepting connections
            "TOOLDOCK_SHUTDOWN_GRACE": "5",
            "TOOLDOCK_BEARER_TOKEN_FILE": "/run/secrets/bearer_token",
            "TOOLDOCK_STATE_URL_FILE": "/run/secrets/state_url",
            "TOOLDOCK_STATE_KEY_FILE": "/run/secrets/state_key",
        },
        "secrets": [
            _secret(plan.secrets["bearer"], "bearer_token"),
            _secret(plan.secrets["state_url"], "state_url"),
            _secret(plan.secrets["state_key"], "state_key"),
            *_tls(plan.gateway_tls),
        ],
        "volumes": _scratch(256),
        "stop_grace_period": "45s",  # the grace above, then the calls in flight (TOOLDOCK_DRAIN_TIMEOUT, 30 s)
        "networks": ["front", "state", "workers"],
        "healthcheck": _health(HEALTH_GATEWAY),
        "deploy": _deploy(plan.replicas, "1g", 2.0, plan.labels, vip=plan.publish == "mesh"),
    }
    if plan.publish == "mesh":
        service["ports"] = [{"target": GATEWAY_PORT, "published": plan.port, "protocol": "tcp", "mode": "ingress"}]
    return service


def _edge(plan: StackPlan) -> dict[str, Any]:
    return {
        "image": plan.edge_image,
        **_hardened(),
        "configs": [{"source": plan.edge_config, "target": "/haproxy.cfg", "uid": UID, "gid": UID, "mode": 0o444}],
        "volumes": _scratch(),
        "ports": [{"target": EDGE_PORT, "published": plan.port, "protocol": "tcp", "mode": "host"}],
        "networks": ["front"],
        "deploy": {**_deploy(1, "256m", 1.0, plan.labels), "update_config": {"order": "stop-first"}},
    }


def _worker(plan: StackPlan, ns: NamespacePlan) -> dict[str, Any]:
    environment = {"TOOLDOCK_WORKER_LISTEN": f"0.0.0.0:{WORKER_PORT}", "TOOLDOCK_TLS_DIR": TLS_DIR}
    if ns.secrets:
        environment |= {
            "TOOLDOCK_SECRETS_VIA": f"files:{SECRETS_DIR}",
            "TOOLDOCK_SECRET_NAMES": ",".join(name for name, _ in ns.secrets),
        }
    return {
        "image": ns.image,
        **_hardened(),
        "environment": environment,
        "secrets": [*_tls(ns.tls), *(_secret(source, f"ns/{name}") for name, source in ns.secrets)],
        # /run/tooldock: the image's socket directory (a declared volume, unused here): a tmpfs, so no task
        # leaves an anonymous volume behind
        "volumes": [*_scratch(), {"type": "tmpfs", "target": "/run/tooldock", "tmpfs": {"size": 1024 * 1024}}],
        "networks": ["workers", *(["egress"] if ns.network == "egress" else [])],
        "healthcheck": _health(HEALTH_WORKER),
        "deploy": _deploy(ns.replicas, ns.memory or DEFAULT_MEMORY, ns.cpus or DEFAULT_CPUS, plan.labels),
    }


def render(plan: StackPlan, stack: str) -> str:
    """The stack file (Compose file format 3.8, as `docker stack deploy` reads it)."""
    services: dict[str, Any] = {"redis": _redis(plan), "gateway": _gateway(plan)}
    if plan.publish == "edge":
        services["edge"] = _edge(plan)
    for ns in plan.namespaces:
        services[service_name(ns.name)] = _worker(plan, ns)
    networks: dict[str, Any] = {
        "front": {"driver": "overlay"},
        "state": {"driver": "overlay", "internal": True},
        "workers": {"driver": "overlay", "internal": True},
    }
    if any(ns.network == "egress" for ns in plan.namespaces):
        networks["egress"] = {"driver": "overlay"}
    used = sorted(
        {
            *plan.secrets.values(),
            *plan.gateway_tls,
            *(s for n in plan.namespaces for s in n.tls),
            *(s for n in plan.namespaces for _, s in n.secrets),
        }
    )
    document: dict[str, Any] = {
        "version": "3.8",
        "services": services,
        "networks": networks,
        "volumes": {"redis-data": {}},
        "secrets": {name: {"external": True} for name in used},
    }
    if plan.publish == "edge":
        document["configs"] = {plan.edge_config: {"external": True}}
    head = (
        f"# ToolDock on Docker Swarm: stack {stack!r}, written by `tooldock swarm render` (see docs/howto/swarm.md).\n"
        "# Every image by digest; every secret external (made by `tooldock swarm up`, never in this file).\n"
        f"# Deploy: docker stack deploy --prune --resolve-image never -c THIS_FILE {stack}\n"
    )
    return head + yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=120)
