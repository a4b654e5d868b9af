"""Build benchmark: ToolDock's daemonless OCI builder against the `docker build` route, same run.

    .venv/bin/python bench/build.py
    .venv/bin/python bench/build.py --attachments   # what the SBOM, provenance and signing add (no Docker needed)
    .venv/bin/python bench/build.py --platforms     # one platform against linux/amd64,linux/arm64 (no Docker)

For each route: a cold build of examples/multi-tool (empty build cache; the base image is prepared once
beforehand and given to both with --base), a rebuild with nothing changed, and a rebuild after editing
one tool file; then image sizes as the Docker engine reports them. Wall-clock times of the whole
`tooldock build` command. Needs a Docker engine (DOCKER_HOST, the default socket, or a local `dockerd`
it starts with no bridge network). Everything stays on this machine.

`--attachments`: examples/async-tool (it has requirements) built with `--no-attach`, with the attachments
(the default) and with them signed (`--sign-key`, a key from `tooldock keygen`), each from a build cache
holding only the default base (cold), then again (warm), then after a one-file edit; the table gives
wall-clock seconds and the builder's own `attest` time, and the attachments' sizes.

`--platforms`: examples/async-tool built for this machine's platform alone and for linux/amd64,linux/arm64 (one
image index), each from a build cache holding only this machine's base (cold: the arm64 base, from downloading
its Debian packages on, is part of it; uv's own cache is warmed first), then again (warm), then after a one-file
edit; with the cold build's stages per platform.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
TOOLDOCK = str(Path(sys.executable).parent / "tooldock")


def ensure_docker() -> tuple[str, subprocess.Popen | None]:
    import docker

    try:
        docker.from_env().ping()
        return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"), None
    except Exception:
        pass
    host = "unix:///tmp/tooldock-bench-docker.sock"
    try:  # one started by an earlier run
        docker.DockerClient(base_url=host).ping()
        return host, None
    except Exception:
        pass
    proc = subprocess.Popen(["dockerd", "--host", host, "--bridge=none", "--iptables=false", "--ip6tables=false",
                             "--data-root", "/var/lib/tooldock-bench-docker", "--exec-root", "/tmp/tooldock-bench-exec",
                             "--pidfile", "/tmp/tooldock-bench-dockerd.pid"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(240):
        try:
            docker.DockerClient(base_url=host).ping()
            return host, proc
        except Exception:
            time.sleep(0.5)
    raise SystemExit("no Docker engine: set DOCKER_HOST or install docker.io (dockerd)")


def run(args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([TOOLDOCK, "build", "--json", *args], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"tooldock build {' '.join(args)} failed:\n{proc.stderr}")
    return elapsed, json.loads(proc.stdout.splitlines()[-1])


def attachments() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tooldock-bench-attach-"))
    try:
        seed = tmp / "seed"  # the default base, built once: a cold build below starts from it, as in CI
        subprocess.run([TOOLDOCK, "base", "--output", str(tmp / "base")], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "TOOLDOCK_CACHE_DIR": str(seed)})
        warmup = tmp / "warmup" / "async-tool"  # fills uv's own cache, so both variants download nothing
        shutil.copytree(ROOT / "examples" / "async-tool", warmup, ignore=shutil.ignore_patterns("__pycache__"))
        run([str(warmup), "--output", str(tmp / "warmup" / "out"), "--no-attach"],
            {**os.environ, "TOOLDOCK_CACHE_DIR": str(tmp / "warmup" / "cache")})
        keygen_env = {**os.environ, "TOOLDOCK_SIGNING_PASSWORD": "bench"}
        subprocess.run([TOOLDOCK, "keygen", str(tmp / "bench")], check=True, env=keygen_env, capture_output=True)
        variants = {"--attach": ["--attach"], "--no-attach": ["--no-attach"],
                    "--sign-key": ["--attach", "--sign-key", str(tmp / "bench.key")]}
        flags = tuple(variants)
        setups = {}
        for flag in flags:
            src = tmp / flag / "async-tool"
            shutil.copytree(ROOT / "examples" / "async-tool", src,
                            ignore=shutil.ignore_patterns("__pycache__", "requirements.lock"))
            shutil.copytree(seed, tmp / flag / "cache", symlinks=True)
            env = {**keygen_env, "TOOLDOCK_CACHE_DIR": str(tmp / flag / "cache")}
            setups[flag] = (src, [str(src), "--output", str(tmp / flag / "out"), *variants[flag]], env)
        # Interleaved, one step for both variants at a time: whatever warms up on the machine (the page cache,
        # the schema helper) helps both alike.
        timings: dict[str, list[tuple[float, dict]]] = {flag: [] for flag in flags}
        for n, step in enumerate(("cold", "warm", "edit")):
            for flag in flags[n % 3:] + flags[:n % 3]:  # who goes first rotates
                src, args, env = setups[flag]
                if step == "edit":
                    tool = src / "weather.py"
                    tool.write_text(tool.read_text() + f"\n# {uuid.uuid4()}\n")
                timings[flag].append(run(args, env))
        rows = [(flag, timings[flag]) for flag in flags]
        table = Table(title="tooldock build examples/async-tool: with and without the SBOM and provenance, signed")
        for column in ("", "cold s", "warm s", "edit one file s", "attest ms (cold / warm / edit)"):
            table.add_column(column, justify="left" if not column else "right")
        for flag, steps in rows:
            attest = " / ".join(f"{t[1]['timings_ms'].get('attest', 0):.0f}" for t in steps)
            table.add_row(flag, *(f"{t[0]:.2f}" for t in steps), attest)
        with_, without, signed = rows
        table.add_row("attaching adds", *(f"{a[0] - b[0]:+.2f}" for a, b in zip(with_[1], without[1], strict=True)), "")
        table.add_row("signing adds", *(f"{a[0] - b[0]:+.2f}" for a, b in zip(signed[1], with_[1], strict=True)), "")
        Console(width=140).print(table)
        out = tmp / "--attach" / "out" / "async-tool"
        from tooldock.builder.attach import LayoutReader

        reader = LayoutReader(out)
        sizes = [f"{f.artifact_type} {len(reader.document(f.digest)) / 1000:.1f} kB" for f in reader.referrers()]
        print("attachment documents:", ", ".join(sorted(sizes)))
        for flag in flags:
            stages = timings[flag][0][1]["timings_ms"]
            print(f"cold {flag} stages (ms):", ", ".join(f"{k} {v:.0f}" for k, v in sorted(stages.items())))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def platforms() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tooldock-bench-platforms-"))
    try:
        seed = tmp / "seed"  # this machine's base, built once: a cold build below starts from it, as in CI
        subprocess.run([TOOLDOCK, "base", "--output", str(tmp / "base")], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "TOOLDOCK_CACHE_DIR": str(seed)})
        warmup = tmp / "warmup" / "async-tool"  # fills uv's own cache for both platforms: no wheel is downloaded
        shutil.copytree(ROOT / "examples" / "async-tool", warmup, ignore=shutil.ignore_patterns("__pycache__"))
        run([str(warmup), "--output", str(tmp / "warmup" / "out"), "--platform", "linux/amd64,linux/arm64"],
            {**os.environ, "TOOLDOCK_CACHE_DIR": str(tmp / "warmup" / "cache")})
        variants = {"one platform": [], "linux/amd64,linux/arm64": ["--platform", "linux/amd64,linux/arm64"]}
        setups, timings = {}, {}
        for n, (name, flags) in enumerate(variants.items()):
            src = tmp / str(n) / "async-tool"
            shutil.copytree(ROOT / "examples" / "async-tool", src,
                            ignore=shutil.ignore_patterns("__pycache__", "requirements*.lock"))
            shutil.copytree(seed, tmp / str(n) / "cache", symlinks=True)
            env = {**os.environ, "TOOLDOCK_CACHE_DIR": str(tmp / str(n) / "cache")}
            setups[name] = (src, [str(src), "--output", str(tmp / str(n) / "out"), *flags], env)
            timings[name] = []
        for step in ("cold", "warm", "edit"):
            for name, (src, args, env) in setups.items():
                if step == "edit":
                    tool = src / "weather.py"
                    tool.write_text(tool.read_text() + f"\n# {uuid.uuid4()}\n")
                timings[name].append(run(args, env))
        table = Table(title="tooldock build examples/async-tool: one platform and two (an image index)")
        for column in ("", "cold s", "warm s", "edit one file s"):
            table.add_column(column, justify="left" if not column else "right")
        for name, steps in timings.items():
            table.add_row(name, *(f"{t[0]:.2f}" for t in steps))
        Console(width=140).print(table)
        one, two = timings.values()
        print("cold, one platform (ms):", ", ".join(f"{k} {v:.0f}" for k, v in one[0][1]["timings_ms"].items()))
        print("cold, both (ms):", ", ".join(f"{k} {v:.0f}" for k, v in two[0][1]["timings_ms"].items()))
        for name, result in two[0][1]["platforms"].items():
            print(f"cold, {name} in the index (ms):", ", ".join(f"{k} {v:.0f}" for k, v in result["timings_ms"].items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if "--attachments" in sys.argv[1:]:
        attachments()
        return
    if "--platforms" in sys.argv[1:]:
        platforms()
        return
    import docker

    host, dockerd = ensure_docker()
    client = docker.DockerClient(base_url=host)
    tmp = Path(tempfile.mkdtemp(prefix="tooldock-bench-"))
    base_env = {**os.environ, "DOCKER_HOST": host}
    try:
        # The base image, prepared once and shared: both routes start from the same base.
        shared = {**base_env, "TOOLDOCK_CACHE_DIR": str(tmp / "base-cache")}
        subprocess.run([TOOLDOCK, "base", "--output", str(tmp / "base")], check=True, env=shared,
                       stdout=subprocess.DEVNULL)
        rows, sizes = [], {}
        for route in ("oci", "docker"):
            src = tmp / route / "multi-tool"
            shutil.copytree(ROOT / "examples" / "multi-tool", src, ignore=shutil.ignore_patterns("__pycache__"))
            env = {**base_env, "TOOLDOCK_CACHE_DIR": str(tmp / route / "cache")}
            args = [str(src), "--base", str(tmp / "base"), "--engine", route]
            if route == "oci":
                args += ["--output", str(tmp / route / "out")]
            for image in client.images.list(name="tooldock/multi-tool"):
                client.images.remove(image.id, force=True)
            client.api.prune_builds() if hasattr(client.api, "prune_builds") else None
            cold, _ = run(args, env)
            unchanged, _ = run(args, env)
            tool = src / "math_tools.py"
            tool.write_text(tool.read_text().replace("return a * b", f"return b * a  # {uuid.uuid4()}"))
            edited, result = run(args, env)
            if route == "oci":
                _, loaded = run([*args, "--load"], env)
                size = client.images.get(loaded["loaded"][0]).attrs["Size"]
                compressed = sum(layer["size"] for layer in result["layers"])
            else:
                size = client.images.get(result["image_id"]).attrs["Size"]
                compressed = None
            sizes[route] = size
            rows.append((route, cold, unchanged, edited, size, compressed))
        table = Table(title="tooldock build examples/multi-tool (wall clock of the command)")
        for column in ("route", "cold s", "no change s", "edit one file s", "image size MB", "compressed MB"):
            table.add_column(column, justify="left" if column == "route" else "right")
        names = {"oci": "ToolDock (daemonless OCI)", "docker": "docker build (peer)"}
        for route, cold, unchanged, edited, size, compressed in rows:
            table.add_row(names[route], f"{cold:.2f}", f"{unchanged:.2f}", f"{edited:.2f}", f"{size / 1e6:.1f}",
                          f"{compressed / 1e6:.1f}" if compressed else "-")
        Console(width=140).print(table)
        oci, dock = rows
        print(f"edit-one-file rebuild: {dock[3] / oci[3]:.1f}x faster than docker build; "
              f"no-change rebuild: {dock[2] / oci[2]:.1f}x; cold: {dock[1] / oci[1]:.1f}x; "
              f"image size {sizes['oci'] / sizes['docker']:.3f}x the docker route's")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if dockerd is not None:
            dockerd.terminate()
            dockerd.wait(30)


if __name__ == "__main__":
    main()
