"""From the built images, the state directory and the secrets store to a `StackPlan` and the Docker secrets
and configs it names (their values in memory only, made in the swarm by `engine.ensure_secrets`).

The bearer token: `TOOLDOCK_BEARER_TOKEN` when set; else the one this stack has (its secret is still in the
swarm); else a new one, which `Planned.new_token` carries so the command prints it, once. The Redis password
and the state key are made the same way (never shown). A namespace's declared secrets come from the secrets
store (`tooldock secrets set NAME --namespace NS`), as on one host; a declared secret with no value stops
the run before anything is deployed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from tooldock.secrets.store import SecretStore
from tooldock.swarm.images import Built
from tooldock.swarm.stack import HAPROXY_CFG, NamespacePlan, Publish, StackPlan
from tooldock.swarm.state import GATEWAY_PEER, SwarmState, new_password, worker_peer


class PlanError(Exception):
    pass


@dataclass
class Planned:
    plan: StackPlan
    secrets: dict[str, bytes] = field(repr=False)  # Docker secret name: value (made when missing)
    configs: dict[str, bytes]
    generated: dict[str, str]  # role: secret name, for state.json
    new_token: str | None = field(default=None, repr=False)


def _tls(state: SwarmState, peer: str, secrets: dict[str, bytes]) -> tuple[str, str, str]:
    files = state.peer(peer)
    names = []
    for file, data in files.items():
        name = state.secret_name(f"tls-{peer}-{file.removesuffix('.pem')}", data)
        secrets[name] = data
        names.append(name)
    return names[0], names[1], names[2]


def _generated(
    state: SwarmState, existing: set[str], make: Callable[[], dict[str, bytes]]
) -> tuple[dict[str, str], dict[str, bytes]]:
    """Roles made together (the Redis password is in two secrets): the recorded names while all of them are
    still in the swarm, else new values."""
    recorded = state.recorded()
    values = make()
    names = {r: recorded[r] for r in values if r in recorded and recorded[r] in existing}
    if len(names) == len(values):
        return names, {}
    names = {r: state.secret_name(r, v) for r, v in values.items()}
    return names, {names[r]: v for r, v in values.items()}


def namespace_secrets(store: SecretStore, built: Built) -> dict[str, str]:
    assert built.config is not None
    declared = list(built.config.secrets)
    if not declared:
        return {}
    resolved = store.resolve(built.name, declared, dict(built.config.env))
    if resolved.missing or resolved.placeholders:
        names = ", ".join([*resolved.missing, *resolved.placeholders])
        raise PlanError(
            f"namespace {built.name!r} declares secrets with no value: {names}; set each with "
            f"`tooldock secrets set NAME --namespace {built.name}` (TOOLDOCK_SECRETS_DIR, TOOLDOCK_AGE_KEY_FILE "
            "name the store), then run this again"
        )
    return dict(resolved.values)


def make_plan(
    state: SwarmState,
    images: dict[str, Built],
    namespaces: list[Built],
    existing: set[str],
    store: SecretStore,
    replicas: int,
    port: int,
    publish: Publish,
) -> Planned:
    secrets: dict[str, bytes] = {}
    generated: dict[str, str] = {}
    new_token = None
    given = os.environ.get("TOOLDOCK_BEARER_TOKEN", "").strip()
    if given:
        bearer = state.secret_name("bearer", given.encode())
        secrets[bearer] = given.encode()
    else:
        token = new_password()
        names, made = _generated(state, existing, lambda: {"bearer": token.encode()})
        bearer = names["bearer"]
        generated["bearer"] = bearer
        secrets |= made
        new_token = token if made else None
    password = new_password()
    redis_conf = (
        f'port 6379\nprotected-mode no\ndir /data\nappendonly yes\nappendfsync everysec\nsave ""\n'
        f"requirepass {password}\n"
    ).encode()
    names, made = _generated(
        state,
        existing,
        lambda: {
            "redis_conf": redis_conf,
            "state_url": f"redis://:{password}@redis:6379/0".encode(),
            "state_key": new_password().encode(),
        },
    )
    generated |= names
    secrets |= made
    plans = []
    for built in namespaces:
        assert built.config is not None
        values = namespace_secrets(store, built)
        pairs = []
        for name, value in sorted(values.items()):
            secret = state.secret_name(f"ns-{built.name}-{name}", value.encode())
            secrets[secret] = value.encode()
            pairs.append((name, secret))
        limits = built.config.limits
        plans.append(
            NamespacePlan(
                built.name,
                built.reference,
                built.config.replicas,
                built.config.network,
                limits.memory,
                limits.cpus,
                tuple(pairs),
                _tls(state, worker_peer(built.name), secrets),
            )
        )
    configs: dict[str, bytes] = {}
    edge_config = ""
    if publish == "edge":
        edge_config = state.secret_name("haproxy-cfg", HAPROXY_CFG.encode())
        configs[edge_config] = HAPROXY_CFG.encode()
    plan = StackPlan(
        gateway_image=images["gateway"].reference,
        redis_image=images["redis"].reference,
        port=port,
        replicas=replicas,
        secrets={"bearer": bearer, **{r: names[r] for r in ("redis_conf", "state_url", "state_key")}},
        gateway_tls=_tls(state, GATEWAY_PEER, secrets),
        namespaces=tuple(plans),
        publish=publish,
        edge_image=images["haproxy"].reference if publish == "edge" else "",
        edge_config=edge_config,
        labels={"io.tooldock.stack": state.stack},
    )
    return Planned(plan, secrets, configs, generated, new_token)
