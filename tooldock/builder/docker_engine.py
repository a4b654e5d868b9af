"""`tooldock build --engine docker`: the same image contract, built by `docker build` from a rendered
Dockerfile (`tooldock/templates/worker.Dockerfile.j2`), for people who prefer the Docker route.

Locking, installing and schema extraction are the shared stages (`Builder.prepare`); only the layers are
written by the Docker engine instead of by ToolDock. The base is the `tooldock base` image (or `--base`)
loaded into the engine, so nothing is pulled.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from tooldock.builder.build import Builder, Prepared
from tooldock.builder.daemon import DaemonError, digest_tag, engine, load
from tooldock.builder.imageconfig import APP_DIR, DEPS_DIR, FRAMEWORK_DIR, USER, entrypoint, environment, labels
from tooldock.builder.tarball import iso_time, source_date_epoch, write_entries


def docker_quote(value: str) -> str:
    """A double-quoted Dockerfile word: the parser unescapes \\\\ and \\", and expands $ unless escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("\n", "\\n") + '"'


def render_dockerfile(p: Prepared, base_tag: str) -> str:
    template = resources.files("tooldock").joinpath("templates/worker.Dockerfile.j2").read_text()
    env = jinja2.Environment(autoescape=False, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["dq"] = docker_quote
    created = iso_time(source_date_epoch())
    base_env = (p.base.config_json.get("config") or {}).get("Env", [])
    return env.from_string(template).render(
        namespace=p.source.name,
        base=base_tag,
        framework_dir=FRAMEWORK_DIR,
        deps_dir=DEPS_DIR,
        app_dir=APP_DIR,
        has_deps=bool(p.deps_text),
        user=USER,
        env=[(k, v) for k, v in environment(p.source, base_env) if f"{k}={v}" not in base_env],
        labels=sorted(labels(p.source, p.tools, p.lock, created, p.surface).items()),
        entrypoint="[" + ", ".join(docker_quote(a) for a in entrypoint(p.info)) + "]",
    )


def _link_tree(src: Path, dest: Path) -> None:
    """The build context: hard links (fast, no copy) of the cached trees, minus bytecode."""

    def ignore(_: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or n.endswith(".pyc")]

    shutil.copytree(src, dest, copy_function=os.link, ignore=ignore, symlinks=True)


def build_with_docker(builder: Builder, folder: Path) -> dict[str, Any]:
    p = builder.prepare(folder)
    client = engine()
    started = time.perf_counter()
    base_tag = f"tooldock/base:{digest_tag(p.base.manifest_digest)}"
    try:
        client.images.get(base_tag)
    except Exception:
        load(builder.store, p.base, "tooldock/base", digest_tag(p.base.manifest_digest))
    p.timings["base_load"] = time.perf_counter() - started
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tooldock-docker-") as tmp:
        context = Path(tmp)
        _link_tree(p.fw_tree, context / "framework")
        write_entries(p.worker_src, FRAMEWORK_DIR, context / "framework")
        if p.deps_text:
            _link_tree(p.deps_tree, context / "deps")
        write_entries(p.app_entries, APP_DIR, context / "app")
        (context / "Dockerfile").write_text(render_dockerfile(p, base_tag))
        tag = f"tooldock/{p.source.name}:{p.ref}"
        try:
            image, _ = client.images.build(path=str(context), tag=tag, rm=True, network_mode="none", pull=False)
        except Exception as exc:  # docker-py: BuildError / APIError
            raise DaemonError(f"docker build of {p.source.name!r} failed: {exc}") from None
    p.timings["docker_build"] = time.perf_counter() - started
    return {
        "namespace": p.source.name,
        "engine": "docker",
        "image_id": image.id,
        "tags": [tag],
        "size": image.attrs.get("Size"),
        "tools": [t["name"] for t in p.tools],
        "timings_ms": {k: round(v * 1000, 1) for k, v in p.timings.items()},
    }
