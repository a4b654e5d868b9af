"""`tooldock k8s render`: a copy of the examples plus a namespace with secrets, egress, limits and replicas,
built and pushed to a real docker-registry on loopback, rendered, and every object checked against the
Kubernetes schemas (kubernetes-validate, pinned) and against the stored expected files.

No Kubernetes API server runs here (none can on the test machines): what the manifests rely on at run time,
the workers' mutual TLS and the gateway's DNS discovery, is run by tests/test_worker_tls.py and the Swarm tests.

The expected files (tests/expected/k8s/) hold the output with the registry's address and every digest
replaced (the gateway's image changes with ToolDock's own source). After a deliberate change, write them again:

    TOOLDOCK_REGENERATE_EXPECTED=1 .venv/bin/python -m pytest tests/test_k8s_render.py -q
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner, Result
from conftest import EXAMPLES, require, tooldock_cli

from tooldock.cli import main
from tooldock.cluster import ca
from tooldock.secrets.store import SecretStore

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install -e '.[test]' (kubernetes-validate)")

K8S_VERSION = "1.35.0"  # the Kubernetes release whose schemas every object must satisfy (strict: no unknown field)
EXPECTED = Path(__file__).parent / "expected" / "k8s"
REDIS = "127.0.0.1:5999/library/redis@sha256:" + "ab" * 32
SECRET_VALUE = "k8s-test-secret-value-0f9e8d7c"  # must never reach a manifest
BEARER = "k8s-test-bearer-token-4b3a2c1d0e9f"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")

SECRETIVE_TOOL = '''from fastmcp.tools import tool


@tool
def has_token() -> bool:
    """Whether the API token reached this worker."""
    import os

    return bool(os.environ.get("API_TOKEN"))
'''
SECRETIVE_CONFIG = """description: "A namespace with a secret, egress, limits and replicas"
version: "2.0.0"
secrets: [API_TOKEN]
network: egress
limits: {memory: 256m, cpus: 0.5, timeout: 20}
replicas: 3
"""


def documents(folder: Path, pattern: str = "*.yaml") -> list[dict[str, Any]]:
    return [d for path in sorted(folder.glob(pattern)) for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, registry):
    """The examples and `secretive` built, pushed and rendered; the Secrets written with their values."""
    require("apt-get", "dpkg-deb")
    tmp = tmp_path_factory.mktemp("k8s")
    src = tmp / "tools"
    shutil.copytree(EXAMPLES, src, ignore=shutil.ignore_patterns("__pycache__", "requirements.lock", "README.md"))
    (src / "secretive").mkdir()
    (src / "secretive" / "api_token.py").write_text(SECRETIVE_TOOL)
    (src / "secretive" / "tooldock.yaml").write_text(SECRETIVE_CONFIG)
    env = {
        "TOOLDOCK_SECRETS_DIR": str(tmp / "store"),
        "TOOLDOCK_AGE_KEY_FILE": str(tmp / "age.key"),
        "TOOLDOCK_BEARER_TOKEN": BEARER,
    }
    store = SecretStore(tmp / "store", tmp / "age.key")
    store.init()
    for namespace, name in (("secretive", "API_TOKEN"), ("async-tool", "WEATHER_API_KEY")):
        store.set(name, SECRET_VALUE, namespace)
    ca.init(tmp / "ca")
    out = tmp / "out"
    proc = tooldock_cli(
        "k8s", "render", str(src), "--registry", registry, "--replicas", "3",
        "--max-replicas", "6", "--output", str(out), "--build-dir", str(tmp / "oci"),
        "--with-secrets", str(tmp / "private" / "secrets.yaml"), "--ca", str(tmp / "ca"), env=env,
    )
    objects = documents(out)
    redis = of_kind(objects, "Deployment")["tooldock-redis"]["spec"]["template"]["spec"]["containers"][0]["image"]
    return {"tmp": tmp, "src": src, "out": out, "registry": registry, "proc": proc, "env": env, "redis": redis,
            "objects": objects, "secrets": documents(tmp / "private", "secrets.yaml")}


def render_here(*args: str, env: dict[str, str] | None = None) -> Result:
    """`tooldock k8s render` in this process (click's runner): for the checks that build nothing."""
    return CliRunner().invoke(main, ["k8s", "render", *args], catch_exceptions=False, env=env)


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (matchLabels only: all the manifests use) against a pod's labels; {} selects all."""
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def test_every_object_is_valid_for_kubernetes(rendered):
    kinds = sorted({o["kind"] for o in rendered["objects"]})
    assert kinds == ["Deployment", "HorizontalPodAutoscaler", "Namespace", "NetworkPolicy", "PodDisruptionBudget",
                     "Service"]
    for obj in rendered["objects"] + rendered["secrets"]:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)  # raises, naming the field, when invalid
    # and the check can fail: an unknown field is refused
    broken = json.loads(json.dumps(of_kind(rendered["objects"], "Deployment")["worker-basic-tool"]))
    broken["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def normalized(text: str, registry: str) -> str:
    return DIGEST.sub("@sha256:<digest>", text.replace(registry, "REGISTRY"))


def test_output_is_the_expected_files(rendered):
    out, registry = rendered["out"], rendered["registry"]
    names = sorted(p.name for p in out.iterdir())
    assert names == ["10-namespace.yaml", "20-networkpolicy.yaml", "30-service.yaml", "40-deployment.yaml",
                     "50-poddisruptionbudget.yaml", "60-horizontalpodautoscaler.yaml", "create-secrets.sh"]
    if os.environ.get("TOOLDOCK_REGENERATE_EXPECTED"):
        shutil.rmtree(EXPECTED, ignore_errors=True)
        EXPECTED.mkdir(parents=True)
        for name in names:
            (EXPECTED / name).write_text(normalized((out / name).read_text(), registry))
    assert sorted(p.name for p in EXPECTED.iterdir()) == names
    for name in names:
        assert normalized((out / name).read_text(), registry) == (EXPECTED / name).read_text(), (
            f"{name} differs from tests/expected/k8s/{name}: regenerate it if the change is meant (see the docstring)"
        )
    assert stat.S_IMODE((out / "create-secrets.sh").stat().st_mode) == 0o755
    import subprocess

    check = subprocess.run(["sh", "-n", str(out / "create-secrets.sh")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr  # the script parses (it is run against a cluster only)


def test_the_same_sources_render_the_same_bytes_from_layouts(rendered, tmp_path):
    """--layouts: no build, no push; the digests of the layouts the first render built are the ones it pushed."""
    again = tmp_path / "again"
    result = render_here(str(rendered["src"]), "--registry", rendered["registry"], "--redis-image", rendered["redis"],
                         "--replicas", "3", "--max-replicas", "6", "--output", str(again),
                         "--layouts", str(rendered["tmp"] / "oci"))
    assert result.exit_code == 0, result.output
    for path in sorted(rendered["out"].iterdir()):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name


def test_every_image_is_pinned_by_the_digest_the_registry_holds(rendered):
    registry = rendered["registry"]
    images = [c["image"] for d in of_kind(rendered["objects"], "Deployment").values()
              for c in d["spec"]["template"]["spec"]["containers"]]
    assert len(images) == 6  # gateway, redis, four namespaces
    for image in images:
        assert DIGEST.search(image) and ":latest" not in image, image
        repository, digest = image.removeprefix(f"{registry}/").split("@")
        answer = httpx.head(f"http://{registry}/v2/{repository}/manifests/{digest}",
                            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        assert answer.status_code == 200, image
        if repository != "tooldock/tooldock-redis":  # built into the store and pushed, no layout written
            layout = json.loads((rendered["tmp"] / "oci" / repository.rsplit("/", 1)[1] / "index.json").read_text())
            assert layout["manifests"][0]["digest"] == digest


def test_no_secret_value_reaches_the_manifests_or_the_output(rendered):
    private = rendered["tmp"] / "private" / "secrets.yaml"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    values = {SECRET_VALUE, BEARER}
    for secret in rendered["secrets"]:
        for key, encoded in secret["data"].items():
            decoded = base64.b64decode(encoded).decode()
            if key in ("key.pem", "state-key", "redis.conf"):
                values.add(decoded.strip().splitlines()[1] if key == "key.pem" else decoded.strip())
    by_name = of_kind(rendered["secrets"], "Secret")
    assert base64.b64decode(by_name["worker-secretive-secrets"]["data"]["API_TOKEN"]).decode() == SECRET_VALUE
    assert base64.b64decode(by_name["tooldock-gateway"]["data"]["bearer-token"]).decode() == BEARER
    password = base64.b64decode(by_name["tooldock-gateway"]["data"]["state-url"]).decode().split(":")[2].split("@")[0]
    values.add(password)
    assert f"requirepass {password}" in base64.b64decode(by_name["tooldock-redis"]["data"]["redis.conf"]).decode()
    seen = "".join(p.read_text() for p in rendered["out"].iterdir())
    seen += rendered["proc"].stdout + rendered["proc"].stderr
    for value in values:
        assert len(value) >= 16 and value not in seen
    assert not [o for o in rendered["objects"] if o["kind"] == "Secret"]


def test_secrets_reach_only_the_pods_of_the_namespaces_that_declare_them(rendered):
    deployments = of_kind(rendered["objects"], "Deployment")
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        from_secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container.get("env", []) if "valueFrom" in e}
        mounted = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        if name == "worker-secretive":
            assert from_secrets == {"API_TOKEN": {"name": "worker-secretive-secrets", "key": "API_TOKEN",
                                                  "optional": False}}
        elif name == "worker-async-tool":
            assert set(from_secrets) == {"WEATHER_API_KEY"}
        else:
            assert from_secrets == {}, name
        expected_mounts = {"tooldock-gateway": {"tooldock-gateway", "tooldock-gateway-tls"},
                           "tooldock-redis": {"tooldock-redis"}}.get(name, {f"{name}-tls"})
        assert mounted == expected_mounts, name


def test_every_pod_meets_the_restricted_profile(rendered):
    namespace = of_kind(rendered["objects"], "Namespace")["tooldock"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for name, deployment in of_kind(rendered["objects"], "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
        assert all("hostPath" not in v for v in pod["volumes"])
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False and security["privileged"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert security["readOnlyRootFilesystem"] is True and security["runAsNonRoot"] is True
            assert "ports" in container and all("hostPort" not in p for p in container["ports"])
            assert container["readinessProbe"] and container["livenessProbe"], name
            assert container["resources"]["limits"]["memory"] and container["resources"]["limits"]["cpu"]


def test_network_policies_let_only_the_gateway_reach_workers_and_workers_reach_nothing(rendered):
    objects = rendered["objects"]
    policies = list(of_kind(objects, "NetworkPolicy").values())
    pods = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in of_kind(objects, "Deployment").items()}
    gateway, redis = pods["tooldock-gateway"], pods["tooldock-redis"]
    for name, labels in pods.items():
        chosen = [p for p in policies if selects(p["spec"]["podSelector"], labels)]
        assert any(p["metadata"]["name"] == "default-deny" for p in chosen), name
        ingress = [rule for p in chosen for rule in p["spec"].get("ingress", [])]
        egress = [rule for p in chosen for rule in p["spec"].get("egress", [])]
        if name.startswith("worker-"):
            assert ingress and all(
                [peer["podSelector"] for peer in rule["from"]] == [{"matchLabels": gateway}]
                and rule["ports"] == [{"port": 7700, "protocol": "TCP"}]
                for rule in ingress
            ), name
            for other, other_labels in pods.items():  # the gateway's labels match the rule; nobody else's do
                allowed = any(selects(peer["podSelector"], other_labels) for rule in ingress for peer in rule["from"])
                assert allowed == (other == "tooldock-gateway"), (name, other)
            assert egress == ([{}] if name == "worker-secretive" else []), name  # secretive says network: egress
        if name == "tooldock-redis":
            assert egress == [] and all(
                [peer["podSelector"]["matchLabels"] for peer in rule["from"]] == [gateway] for rule in ingress
            )
        if name == "tooldock-gateway":
            reached = [peer["podSelector"]["matchLabels"] for rule in egress for peer in rule["to"]]
            assert redis in reached and all(
                any(selects({"matchLabels": r}, pods[w]) for r in reached) for w in pods if w.startswith("worker-")
            )


def test_replicas_resources_and_discovery(rendered):
    objects = rendered["objects"]
    deployments = of_kind(objects, "Deployment")
    secretive = deployments["worker-secretive"]
    assert secretive["spec"]["replicas"] == 3 and deployments["worker-basic-tool"]["spec"]["replicas"] == 1
    assert secretive["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "cpu": "500m", "memory": "256Mi"}
    assert deployments["tooldock-gateway"]["spec"]["replicas"] == 3
    hpa = of_kind(objects, "HorizontalPodAutoscaler")["tooldock-gateway"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 6)
    services = of_kind(objects, "Service")
    env = {e["name"]: e.get("value") for e in deployments["tooldock-gateway"]["spec"]["template"]["spec"][
        "containers"][0]["env"]}
    for entry in env["TOOLDOCK_WORKERS"].split():
        namespace, address = entry.split("=")
        service = services[f"worker-{namespace}"]
        assert service["spec"]["clusterIP"] == "None"  # headless: the name resolves to every ready pod
        assert address == f"tls://worker-{namespace}.tooldock.svc.cluster.local:7700"
        assert selects({"matchLabels": service["spec"]["selector"]},
                       deployments[f"worker-{namespace}"]["spec"]["template"]["metadata"]["labels"])
    assert sorted(e.split("=")[0] for e in env["TOOLDOCK_WORKERS"].split()) == [
        "async-tool", "basic-tool", "multi-tool", "secretive"]
    pdbs = of_kind(objects, "PodDisruptionBudget")
    assert set(pdbs) == set(deployments) - {"tooldock-redis"}  # one Redis: a budget would block every drain


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["/nonexistent/tools"], "does not exist"),
        (["{src}", "--registry", "http://127.0.0.1:5000"], "expected HOST[:PORT][/PREFIX]"),
        (["{src}", "--registry", "bad host name"], "expected HOST[:PORT][/PREFIX]"),
        (["{src}", "--replicas", "0"], "0 is not in the range"),
        (["{src}", "--replicas", "5", "--max-replicas", "2"], "--max-replicas 2 is below --replicas 5"),
        (["{src}", "--redis-image", "redis:7"], "pinned by digest"),
        (["{src}", "--namespace", "Tool_Dock"], "a Kubernetes namespace is"),
        (["{src}", "--cluster-domain", "cluster local"], "--cluster-domain 'cluster local': a DNS domain"),
        (["{src}", "--layouts", "{tmp}/nothing-here"], "is not a directory"),
        (["{src}", "--layouts", "{tmp}"], "no OCI layout for"),
        (["{src}", "--with-secrets", "{tmp}/s.yaml"], "--with-secrets needs --ca"),
        (["{src}", "--redis-image", ""], "--layouts builds nothing"),
    ],
)
def test_bad_input_is_told_clearly(args, said, tmp_path):
    src = tmp_path / "tools"
    shutil.copytree(EXAMPLES / "basic-tool", src / "basic-tool")
    filled = [a.format(src=src, tmp=tmp_path) for a in args]
    defaults = {"--registry": "127.0.0.1:5000", "--redis-image": REDIS, "--layouts": str(tmp_path)}
    if filled[-2:] == ["--redis-image", ""]:  # left out (with --layouts)
        filled, defaults = filled[:-2], {"--registry": "127.0.0.1:5000", "--layouts": str(tmp_path)}
    for option, value in defaults.items():
        if option not in filled:
            filled += [option, value]
    result = render_here(*filled, "--output", str(tmp_path / "out"))
    assert result.exit_code in (1, 2) and said in result.output, result.output
    assert "Traceback" not in result.output


def test_a_namespace_that_does_not_load_stops_the_render(tmp_path):
    src = tmp_path / "tools"
    (src / "broken").mkdir(parents=True)
    (src / "broken" / "tooldock.yaml").write_text("replicas: 0\n")
    (src / "broken" / "t.py").write_text("from fastmcp.tools import tool\n\n@tool\ndef f() -> int:\n    return 1\n")
    result = render_here(str(src), "--registry", "127.0.0.1:5000", "--redis-image", REDIS,
                         "--layouts", str(tmp_path), "--output", str(tmp_path / "out"))
    assert result.exit_code == 1 and "broken/tooldock.yaml" in result.output and "replicas" in result.output
    assert not (tmp_path / "out").exists()


def test_the_gateway_pods_settings_and_arguments_are_what_tooldock_reads(rendered, tmp_path):
    """The gateway container's environment through the gateway's own settings (its Secret's files put where
    it would mount them), its arguments through `tooldock serve`'s parser, its worker list through the
    network backend's."""
    from tooldock.cli.serve import serve
    from tooldock.runtime.settings import Settings
    from tooldock.worker.tls import parse_workers

    pod = of_kind(rendered["objects"], "Deployment")["tooldock-gateway"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    secret = {k: base64.b64decode(v).decode()
              for k, v in of_kind(rendered["secrets"], "Secret")["tooldock-gateway"]["data"].items()}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for key, value in secret.items():
        (tmp_path / key).write_text(value)
    env = {e["name"]: e["value"].replace(mounts["gateway"], str(tmp_path)) for e in container["env"]}
    settings = Settings.from_env(env)
    assert settings.bearer_token == BEARER and not settings.token_generated
    assert settings.state_url is not None
    assert settings.state_url.shown == "redis://:***@tooldock-redis.tooldock.svc.cluster.local:6379/0"
    assert settings.state_url.url == secret["state-url"]
    assert sorted(parse_workers(env["TOOLDOCK_WORKERS"])) == ["async-tool", "basic-tool", "multi-tool", "secretive"]
    assert container["args"][0] == "serve"
    with serve.make_context("serve", container["args"][1:]) as context:
        assert (context.params["backend"], context.params["port"]) == ("network", 8000)
    assert mounts["tls"] == env["TOOLDOCK_TLS_DIR"]


def test_the_workers_probe_passes_on_a_serving_worker_and_fails_otherwise(rendered, tmp_path):
    """The exec probe, as rendered, run against a real worker on loopback (mutual TLS with a certificate of
    the CA), against one of another CA, and against nothing; a passing probe is not logged as a refusal."""
    import subprocess
    import sys

    from netkit import NetWorker

    container = of_kind(rendered["objects"], "Deployment")["worker-basic-tool"]["spec"]["template"]["spec"][
        "containers"][0]
    command = container["livenessProbe"]["exec"]["command"]
    assert command[:3] == ["/usr/bin/python3.11", "-s", "-c"] and container["startupProbe"]["exec"]["command"] == command
    ours = rendered["tmp"] / "ca"
    worker_dir = ca.issue(ours, "worker-basic-tool")[0]
    ca.init(tmp_path / "other-ca")
    stranger = ca.issue(tmp_path / "other-ca", "stranger")[0]
    worker = NetWorker(worker_dir, tmp_path / "worker.log")

    def probe(tls_dir: Path, port: str) -> int:
        code = command[3].replace("/etc/tooldock/tls", str(tls_dir)).replace("7700", port)
        return subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, timeout=60).returncode

    try:
        assert probe(worker_dir, worker.port) == 0
        assert worker.refusals() == []
        assert probe(stranger, worker.port) != 0  # the worker refuses it: another CA
        worker.wait_for_refusal(1)
    finally:
        worker.proc.terminate()
        worker.proc.wait(10)
    assert probe(worker_dir, worker.port) != 0  # nothing listening


def test_a_secret_missing_from_the_store_stops_the_render_before_any_file(rendered, tmp_path):
    store = SecretStore(tmp_path / "store", tmp_path / "age.key")
    store.init()
    store.set("API_TOKEN", SECRET_VALUE, "secretive")  # WEATHER_API_KEY (async-tool) is not set
    out = tmp_path / "out"
    result = render_here(str(rendered["src"]), "--registry", rendered["registry"], "--redis-image", rendered["redis"],
                         "--layouts", str(rendered["tmp"] / "oci"), "--output", str(out),
                         "--with-secrets", str(tmp_path / "private" / "s.yaml"), "--ca", str(rendered["tmp"] / "ca"),
                         env={"TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"),
                              "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key")})
    assert result.exit_code == 1 and "async-tool: WEATHER_API_KEY" in result.output, result.output
    assert "tooldock secrets set" in result.output and SECRET_VALUE not in result.output
    assert not out.exists() and not (tmp_path / "private").exists()


def _files(folder: Path, secret: dict[str, Any], gid: int) -> Path:
    """A Secret's keys as files, as its volume gives them to the pod (0440, the pod's fsGroup)."""
    folder.mkdir()
    for name, encoded in secret["data"].items():
        (folder / name).write_bytes(base64.b64decode(encoded))
        os.chmod(folder / name, 0o440 if os.geteuid() == 0 else 0o444)
        if os.geteuid() == 0:
            os.chown(folder / name, 0, gid)
    return folder


def _run_as_pod(client: Any, spec: dict[str, Any], pod: dict[str, Any], network: str, env: dict[str, str],
                secrets: dict[str, Path], scratch: Path, **extra: Any) -> Any:
    """A container as the pod spec says: its user, read-only root, capabilities, emptyDirs as tmpfs, its
    Secret volumes bound read-only where they are mounted, its arguments."""
    client.images.pull(spec["image"])
    volumes = {v["name"]: v for v in pod["volumes"]}
    binds = {}
    for mount in spec["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:  # as the kubelet makes one: a new host directory, mode 0777
            empty = Path(tempfile.mkdtemp(prefix=f"emptydir-{mount['name']}-", dir=scratch))
            os.chmod(empty, 0o777)
            binds[str(empty)] = {"bind": mount["mountPath"], "mode": "rw"}
        else:
            binds[str(secrets[volume["secret"]["secretName"]])] = {"bind": mount["mountPath"], "mode": "ro"}
    security = pod["securityContext"]
    return client.containers.run(
        spec["image"], spec.get("args"), detach=True, user=f"{security['runAsUser']}:{security['runAsGroup']}",
        read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges:true"], network_mode=network,
        environment=env, volumes=binds, **extra,
    )


def test_redis_a_worker_and_the_gateway_run_as_their_pods_would_and_serve_a_call(rendered, docker_host, tmp_path):
    """The rendered Redis, secretive worker and gateway, each in a container as its pod spec says (its image
    pulled from the loopback registry by the rendered digest, uid 65532, read-only root, capabilities dropped,
    no new privileges, emptyDirs as fresh 0777 directories, its Secrets' files from --with-secrets mounted
    read-only, its arguments and environment), sharing one network namespace (loopback only) whose /etc/hosts
    maps the Services' DNS names to 127.0.0.1: the gateway (its worker list narrowed to the one worker
    running) reaches Redis with the password and the worker over mutual TLS by its headless Service's name,
    and answers a REST call with the bearer token; the worker's rendered probe passes inside it."""
    import docker

    client = docker.DockerClient(base_url=docker_host)
    deployments = of_kind(rendered["objects"], "Deployment")
    secrets = of_kind(rendered["secrets"], "Secret")
    gid = 65532
    files = {name: _files(tmp_path / name, secret, gid) for name, secret in secrets.items()}
    hosts = {"tooldock-redis.tooldock.svc.cluster.local": "127.0.0.1",
             "worker-secretive.tooldock.svc.cluster.local": "127.0.0.1"}

    def part(name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
        pod = deployments[name]["spec"]["template"]["spec"]
        spec = pod["containers"][0]
        return spec, pod, {e["name"]: e["value"] for e in spec.get("env", []) if "value" in e}

    started = []
    try:
        spec, pod, env = part("tooldock-redis")
        redis = _run_as_pod(client, spec, pod, "none", env, files, tmp_path, extra_hosts=hosts)
        started.append(redis)
        shared = f"container:{redis.id}"
        spec, pod, env = part("worker-secretive")
        worker = _run_as_pod(client, spec, pod, shared, {**env, "API_TOKEN": SECRET_VALUE}, files, tmp_path)
        started.append(worker)
        probe = spec["readinessProbe"]["exec"]["command"]
        spec, pod, env = part("tooldock-gateway")
        env["TOOLDOCK_WORKERS"] = next(e for e in env["TOOLDOCK_WORKERS"].split() if e.startswith("secretive="))
        gateway = _run_as_pod(client, spec, pod, shared, env, files, tmp_path)
        started.append(gateway)
        call = (
            "import json,urllib.request as u;r=u.Request('http://127.0.0.1:8000/tools/has_token',data=b'{}',"
            f"headers={{'Authorization':'Bearer {BEARER}','X-Namespace':'secretive','Content-Type':'application/json'}});"
            "print(json.load(u.urlopen(r,timeout=10)))"
        )
        python = spec["command"][0] if spec.get("command") else "/usr/bin/python3.11"
        deadline = time.monotonic() + 120
        while True:
            gateway.reload()
            assert gateway.status == "running", gateway.logs().decode(errors="replace")
            try:
                if (ran := gateway.exec_run([python, "-s", "-c", call])).exit_code == 0:
                    break
            except docker.errors.APIError:  # it stopped in between: said at the next turn, with its log
                continue
            assert time.monotonic() < deadline, ran.output.decode(errors="replace") + gateway.logs().decode()
            time.sleep(1)
        assert ran.output.decode().strip() == "{'result': True}"  # the worker got its secret
        assert worker.exec_run(probe).exit_code == 0  # its rendered probe, run inside it as the kubelet would
        assert worker.exec_run([probe[0], "-s", "-c", "import os; print(os.getuid())"]).output.decode().strip() == "65532"
        logs = gateway.logs().decode(errors="replace")
        assert "shared state in Redis at redis://:***@tooldock-redis.tooldock.svc.cluster.local:6379/0" in logs
        for value in (SECRET_VALUE, BEARER):
            assert all(value not in c.logs().decode(errors="replace") for c in started)
    finally:
        for container in started:
            container.remove(force=True)
