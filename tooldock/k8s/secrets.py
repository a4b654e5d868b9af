"""The Secrets the pods mount: their names and keys, and how they are made without a value in a manifest.

    tooldock-gateway        bearer-token, state-url,    the gateway's token, its Redis URL (with password) and
                            state-key                   the key every replica seals input-required state with
    tooldock-gateway-tls    cert.pem, key.pem, trust.pem the gateway's certificate from the cluster CA
    tooldock-redis          redis.conf                  Redis's configuration (its password)
    worker-<ns>-tls         cert.pem, key.pem, trust.pem each namespace's worker certificate
    worker-<ns>-secrets     one key per declared name   only for namespaces whose tooldock.yaml declares secrets

The manifests reference these by name and never carry them. `script` writes `create-secrets.sh`, which
makes them with `kubectl` from a cluster CA directory and values in its environment; `with_values` (the
opt-in `--with-secrets FILE`) renders them as Secret objects with their values, for a file kept apart.
"""

from __future__ import annotations

import base64
import secrets as random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tooldock.k8s import K8sError
from tooldock.k8s.plan import REDIS_PORT, Plan, Worker
from tooldock.k8s.pods import labels

GATEWAY, GATEWAY_TLS, REDIS = "tooldock-gateway", "tooldock-gateway-tls", "tooldock-redis"
BEARER, STATE_URL, STATE_KEY, REDIS_CONF = "bearer-token", "state-url", "state-key", "redis.conf"
TLS_FILES = ("cert.pem", "key.pem", "trust.pem")


def worker_tls(worker: Worker) -> str:
    return f"{worker.object_name}-tls"


def worker_secrets(worker: Worker) -> str:
    return f"{worker.object_name}-secrets"


def redis_host(plan: Plan) -> str:
    return f"{REDIS}.{plan.namespace}.svc.{plan.cluster_domain}"


def redis_conf(password: str) -> str:
    return f'port {REDIS_PORT}\nrequirepass {password}\nsave ""\nappendonly no\ndir /data\n'


def state_url(plan: Plan, password: str) -> str:
    return f"redis://:{password}@{redis_host(plan)}:{REDIS_PORT}/0"


def _secret(plan: Plan, name: str, data: Mapping[str, str | bytes]) -> dict[str, Any]:
    encoded = {
        key: base64.b64encode(value.encode() if isinstance(value, str) else value).decode()
        for key, value in sorted(data.items())
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": plan.namespace, "labels": labels("secret")},
        "type": "Opaque",
        "data": encoded,
    }


def with_values(
    plan: Plan, ca_dir: Path, bearer_token: str, values: Mapping[str, Mapping[str, str]]
) -> list[dict[str, Any]]:
    """Every Secret with its values: certificates issued now by the CA in `ca_dir` (into ca_dir/certs/NAME,
    as `tooldock cluster cert` does), `values` by namespace (as the secrets store resolves them)."""
    from tooldock.cluster import ClusterError, ca

    password = random.token_hex(24)
    objects = [
        _secret(
            plan,
            GATEWAY,
            {BEARER: bearer_token, STATE_URL: state_url(plan, password), STATE_KEY: random.token_urlsafe(32)},
        ),
        _secret(plan, REDIS, {REDIS_CONF: redis_conf(password)}),
    ]
    peers = [(GATEWAY_TLS, GATEWAY)] + [(worker_tls(w), w.object_name) for w in plan.workers]
    for secret, peer in peers:
        try:
            folder, _ = ca.issue(ca_dir, peer)
        except (ClusterError, OSError) as exc:
            raise K8sError(f"--ca {ca_dir}: cannot issue a certificate for {peer}: {exc}") from None
        objects.append(_secret(plan, secret, {name: (folder / name).read_bytes() for name in TLS_FILES}))
    for worker in plan.workers:
        if worker.source.config.secrets:
            objects.append(_secret(plan, worker_secrets(worker), values.get(worker.name, {})))
    return objects


def script(plan: Plan) -> str:
    """`create-secrets.sh`: makes (or replaces) every Secret with kubectl, from files in a private temporary
    directory (no value on a command line)."""
    names = sorted({n for w in plan.workers for n in w.source.config.secrets})
    lines = [
        "#!/bin/sh",
        "# Makes the Secrets the manifests mount (their values are never in the manifests); run again to replace",
        "# them. Needs kubectl (pointed at the cluster), tooldock, and in the environment:",
        "#   CA                      a cluster CA directory (tooldock cluster ca init DIR): certificates are issued",
        "#   TOOLDOCK_BEARER_TOKEN   the token clients send to the gateway",
        *(
            f"#   {name:<23} declared by {', '.join(w.name for w in plan.workers if name in w.source.config.secrets)}"
            for name in names
        ),
        "# Redis's password and the gateways' state key are generated each run: after running it again, restart",
        "# Redis and the gateways (kubectl -n NS rollout restart deployment).",
        "set -eu",
        f"NS={plan.namespace}",
        ': "${CA:?set CA to the cluster CA directory (tooldock cluster ca init DIR)}"',
        ': "${TOOLDOCK_BEARER_TOKEN:?set TOOLDOCK_BEARER_TOKEN to the bearer token clients will send}"',
        *(f': "${{{name}:?set {name}: a secret a namespace declares}}"' for name in names),
        "umask 077",
        'kubectl apply -f "$(dirname "$0")/10-namespace.yaml"',
        "tmp=$(mktemp -d) && trap 'rm -rf \"$tmp\"' EXIT",
        'apply() { kubectl -n "$NS" create secret generic "$@" --dry-run=client -o yaml | kubectl apply -f -; }',
        "random() { head -c \"$1\" /dev/urandom | od -An -tx1 | tr -d ' \\n'; }",
        "password=$(random 24)",
        f'random 32 > "$tmp/{STATE_KEY}"',
        f'printf \'%s\' "$TOOLDOCK_BEARER_TOKEN" > "$tmp/{BEARER}"',
        f'printf \'redis://:%s@{redis_host(plan)}:{REDIS_PORT}/0\' "$password" > "$tmp/{STATE_URL}"',
        f'printf \'port {REDIS_PORT}\\nrequirepass %s\\nsave ""\\nappendonly no\\ndir /data\\n\' "$password"'
        f' > "$tmp/{REDIS_CONF}"',
        f'apply {GATEWAY} --from-file="$tmp/{BEARER}" --from-file="$tmp/{STATE_URL}" --from-file="$tmp/{STATE_KEY}"',
        f'apply {REDIS} --from-file="$tmp/{REDIS_CONF}"',
    ]
    for secret, peer in [(GATEWAY_TLS, GATEWAY)] + [(worker_tls(w), w.object_name) for w in plan.workers]:
        lines.append(f'peer=$(tooldock cluster cert "$CA" --name {peer}) && apply {secret} --from-file="$peer"')
    for worker in plan.workers:
        if worker.source.config.secrets:
            files = []
            for name in worker.source.config.secrets:
                lines.append(f'printf \'%s\' "${name}" > "$tmp/{name}"')
                files.append(f'--from-file="$tmp/{name}"')
            lines.append(f"apply {worker_secrets(worker)} {' '.join(files)}")
    lines.append('echo "Secrets made in namespace $NS; now: kubectl apply -f <this directory>" >&2')
    return "\n".join(lines) + "\n"
