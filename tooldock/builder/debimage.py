"""Images of a Debian program on ToolDock's base, for the cluster stack (`tooldock swarm`): Redis (the
gateways' shared state) and HAProxy (the edge in front of the gateway replicas where the routing mesh cannot
run). Nothing is pulled: the pinned `.deb` files are fetched with `apt-get download` (as the base's are),
unpacked with `dpkg-deb -x`, stripped like the base, and written as one reproducible layer over the base.
The pins live in `tooldock/templates/swarm/<program>.txt`; the same pins give the same digest.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import tooldock
from tooldock.builder.base import DROP, NONROOT, BaseError, _download
from tooldock.builder.blobs import cache_key
from tooldock.builder.build import Builder
from tooldock.builder.imageconfig import image_config
from tooldock.builder.oci import Image, assemble
from tooldock.builder.tarball import Entry, entries_from_dir, iso_time, source_date_epoch


@dataclass(frozen=True)
class Program:
    """One program's image: its name, the pinned packages' file, and what a container runs."""

    name: str  # tooldock-redis: the repository's last part
    pins: str  # templates/swarm/<pins>
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    port: int
    writable: tuple[str, ...] = ()  # directories owned by the image's user (a volume mounted there takes it)
    links: tuple[tuple[str, str], ...] = ()  # (path, target): what the packages' maintainer scripts would make


REDIS = Program(
    "tooldock-redis",
    "redis.txt",
    ("/usr/bin/redis-server",),
    ("--port", "6379", "--protected-mode", "no", "--dir", "/data", "--save", "", "--appendonly", "no"),
    6379,
    ("/data",),
    (("/usr/bin/redis-server", "redis-check-rdb"),),  # one binary: it runs as what it is called
)
HAPROXY = Program("tooldock-haproxy", "haproxy.txt", ("/usr/sbin/haproxy", "-W", "-db"), ("-f", "/haproxy.cfg"), 8080)
PROGRAMS = {"redis": REDIS, "haproxy": HAPROXY}


def pins(program: Program) -> list[str]:
    text = resources.files("tooldock").joinpath(f"templates/swarm/{program.pins}").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _entries(rootfs: Path, program: Program) -> list[Entry]:
    for rel in (*DROP, "etc/init.d", "etc/logrotate.d", "lib/systemd", "usr/lib/systemd", "etc/redis"):
        shutil.rmtree(rootfs / rel, ignore_errors=True)
    found = [e for e in entries_from_dir(rootfs, "") if not e.path.startswith(("/tmp", "/var/run", "/run"))]
    return [
        *found,
        *(Entry(d, is_dir=True, mode=0o755, owner=NONROOT) for d in program.writable),
        *(Entry(path, target=target) for path, target in program.links),
    ]


def program_layer(builder: Builder, program: Program) -> tuple[Any, bool]:
    """The layer of the program's packages, built once per set of pins (cached by them)."""
    wanted = pins(program)
    key = cache_key("debimage", repr(program), *wanted, str(source_date_epoch()))

    def build() -> list[Entry]:
        if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
            raise BaseError(f"building {program.name} needs apt-get and dpkg-deb (Debian/Ubuntu)")
        debs = _download(wanted, builder.options.cache / "debs")
        with tempfile.TemporaryDirectory(prefix="tooldock-debimage-") as tmp:
            rootfs = Path(tmp)
            for deb in debs:
                proc = subprocess.run(["dpkg-deb", "-x", str(deb), str(rootfs)], capture_output=True, text=True)
                if proc.returncode != 0:
                    raise BaseError(f"dpkg-deb -x {deb.name} failed: {proc.stderr.strip()}")
            # read now: the files go away with the temporary directory
            return [
                Entry(e.path, e.content(), mode=e.mode, owner=e.owner) if e.source is not None else e
                for e in _entries(rootfs, program)
            ]

    return builder.store.layer(key, build)


def build_program(builder: Builder, program: Program) -> Image:
    """The program's image: the base's layers and one of the program's packages, run as uid 65532."""
    base, _ = builder.base()
    layer, _ = program_layer(builder, program)
    created = iso_time(source_date_epoch())
    inner = base.config_json.get("config") or {}
    runtime = {
        "User": f"{NONROOT}:{NONROOT}",
        "WorkingDir": "/",
        "Env": list(inner.get("Env", [])),
        "Entrypoint": list(program.entrypoint),
        "Cmd": list(program.cmd),
        "ExposedPorts": {f"{program.port}/tcp": {}},
        "Labels": {
            **(inner.get("Labels") or {}),
            "io.tooldock.program": program.name.removeprefix("tooldock-"),
            "org.opencontainers.image.title": program.name,
            "org.opencontainers.image.version": tooldock.__version__,
            "org.opencontainers.image.created": created,
        },
    }
    config = image_config(base.config_json, created, runtime, [(f"tooldock: {' '.join(pins(program))}", layer.diff_id)])
    return assemble(
        builder.store,
        config,
        [*base.layers, layer],
        {"org.opencontainers.image.created": created, "org.opencontainers.image.title": program.name},
    )
