"""`tooldock base`: a minimal ("distroless-style") Python base image from pinned Debian packages.

No Docker: the pinned `.deb` files are fetched with `apt-get download`, unpacked with `dpkg-deb -x`,
stripped of docs, manuals and caches, and written as one reproducible layer. The pins live in
`tooldock/templates/base/packages.txt`; the same pins give the same digest. The base of another architecture
than the machine's (`--platform`) is made of that architecture's packages (aptarch.py) with the same pins, its
standard library compiled by this machine's base interpreter (the same Debian python3.11 package).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tooldock.atomic import atomic_write
from tooldock.builder import aptarch
from tooldock.builder.blobs import BlobStore, cache_key
from tooldock.builder.bytecode import Compiler, image_compiler, rootfs_compiler
from tooldock.builder.oci import Image, assemble, read_layout, write_layout
from tooldock.builder.tarball import Entry, entries_from_dir, iso_time, source_date_epoch
from tooldock.errors import BuilderError

PYTHON, PYTHON_BIN = "3.11", "/usr/bin/python3.11"
STDLIB_BYTECODE = "stdlib bytecode: unchecked-hash, forced, by the base's own python"
NONROOT = 65532
DROP = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/lintian",
    "usr/share/locale",
    "usr/share/bug",
    "usr/share/bash-completion",
    "var/cache",
    "var/lib/dpkg",
    "var/log",
    "usr/share/gcc",
)
LABEL_PYTHON, LABEL_PYTHON_BIN, LABEL_PLATFORM = (
    "io.tooldock.base.python",
    "io.tooldock.base.python-bin",
    "io.tooldock.base.platform",
)
_ARCH = {"x86_64": ("amd64", "x86_64-manylinux_2_36"), "aarch64": ("arm64", "aarch64-manylinux_2_36")}
_BY_ARCH = {arch: py_platform for arch, py_platform in _ARCH.values()}
PYTHON_PACKAGES = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib")  # what compiles bytecode


class BaseError(BuilderError):
    pass


@dataclass(frozen=True)
class BaseInfo:
    python: str
    python_bin: str
    platform: str  # uv --python-platform


def base_info(image: Image, where: str) -> BaseInfo:
    labels = (image.config_json.get("config") or {}).get("Labels") or {}
    try:
        return BaseInfo(labels[LABEL_PYTHON], labels[LABEL_PYTHON_BIN], labels[LABEL_PLATFORM])
    except KeyError as exc:
        raise BaseError(
            f"base image {where} does not say which Python it has (label {exc.args[0]}); use a base built by "
            "`tooldock base` or Dockerfile.base, or add the io.tooldock.base.* labels"
        ) from None


def pinned_packages() -> list[str]:
    text = resources.files("tooldock").joinpath("templates/base/packages.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


@dataclass(frozen=True)
class DebPackage:
    """One Debian package of the base, as its .deb says: what the SBOM lists."""

    name: str
    version: str
    architecture: str  # from the .deb's file name: amd64, arm64, or all
    sha256: str  # of the .deb file


def _foreign(architecture: str | None) -> str | None:
    """`architecture` when it is not this machine's (None: the machine's)."""
    host = _ARCH.get(platform.machine(), (platform.machine(), ""))[0]
    return None if architecture in (None, host) else architecture


def base_packages(cache: Path, architecture: str | None = None) -> list[DebPackage]:
    """The pinned packages the default base (of `architecture`, default this machine's) is made of, read from
    the .deb files its build downloaded (fetched again only if the cache lost them); kept beside them so a warm
    build reads one small file."""
    packages = pinned_packages()
    foreign = _foreign(architecture)
    index = cache / "debs" / f"packages-{foreign + '-' if foreign else ''}{cache_key('debs', *packages)[:16]}.json"
    if index.is_file():
        return [DebPackage(**d) for d in json.loads(index.read_text())]
    found = []
    for deb in _download(packages, cache / "debs", foreign, cache):
        name, version, arch = deb.stem.split("_")
        found.append(DebPackage(name, version.replace("%3a", ":"), arch, hashlib.sha256(deb.read_bytes()).hexdigest()))
    atomic_write(index, json.dumps([d.__dict__ for d in found], indent=1).encode())
    return found


def _matching(debs: Path, name: str, version: str, arch: str | None) -> list[Path]:
    """The downloaded .deb files of `name` at `version`, of `arch` (or `all`); any architecture when None."""
    found = []
    for path in debs.glob(f"{name}_*.deb"):
        parts = path.stem.split("_")
        if parts[1].replace("%3a", ":") == version and (arch is None or parts[2] in (arch, "all")):
            found.append(path)
    return found


def _split(pin: str) -> tuple[str, str]:
    name, _, version = pin.partition("=")
    return name, version


def _download(packages: list[str], debs: Path, foreign: str | None = None, cache: Path | None = None) -> list[Path]:
    """The pinned .deb files, downloaded into `debs` when missing: this machine's architecture's with its own
    apt (`apt-get update` is the user's), or `foreign`'s through a private apt state in `cache` (aptarch.py)."""
    debs.mkdir(parents=True, exist_ok=True)
    # builds sharing a cache: one downloads, the others wait and find the files whole (not half written)
    with open(debs / ".download.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _download_locked(packages, debs, foreign, cache)


def _download_locked(packages: list[str], debs: Path, foreign: str | None, cache: Path | None) -> list[Path]:
    arch = foreign or _ARCH.get(platform.machine(), (None,))[0]
    if foreign is not None:  # another architecture's, all missing ones in one apt-get run
        missing = [pin for pin in packages if not _matching(debs, *_split(pin), arch)]
        aptarch.download(missing, debs, cache or debs.parent, foreign)
    wanted = []
    for pin in packages:
        name, _, version = pin.partition("=")
        matches = _matching(debs, name, version, arch)
        if matches:
            wanted.append(matches[0])
            continue
        proc = subprocess.run(["apt-get", "download", "-q", pin], cwd=debs, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BaseError(
                f"apt-get download {pin} failed: {proc.stderr.strip()[-500:]}\n"
                "Run 'apt-get update' first; if the pinned version is gone from the archive, update "
                "tooldock/templates/base/packages.txt."
            )
        matches = _matching(debs, name, version, arch)
        if not matches:
            raise BaseError(f"apt-get download {pin} did not produce the expected .deb ({arch})")
        wanted.append(matches[0])
    return wanted


def _rootfs_entries(rootfs: Path) -> list[Entry]:
    for rel in DROP:
        shutil.rmtree(rootfs / rel, ignore_errors=True)
    certs = sorted((rootfs / "usr/share/ca-certificates").rglob("*.crt"))
    bundle = b"".join(p.read_bytes() for p in certs)
    entries = [e for e in entries_from_dir(rootfs, "", bytecode=True) if not e.path.startswith("/tmp")]
    entries += [
        Entry(
            "/etc/passwd",
            f"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n".encode(),
        ),
        Entry("/etc/group", f"root:x:0:\nnonroot:x:{NONROOT}:\n".encode()),
        Entry("/etc/ssl/certs/ca-certificates.crt", bundle),
        Entry("/tmp", is_dir=True, mode=0o1777),
        Entry("/home/nonroot", is_dir=True, mode=0o755, owner=NONROOT),
        Entry("/run/tooldock", is_dir=True, mode=0o755),
        Entry("/usr/bin/python3", target="python3.11"),
        Entry("/etc/localtime", target="/usr/share/zoneinfo/UTC"),
    ]
    return entries


def build_base(store: BlobStore, cache: Path, architecture: str | None = None) -> Image:
    """The base of `architecture` (amd64, arm64; default this machine's), built once and cached."""
    machine = platform.machine()
    if machine not in _ARCH:
        raise BaseError(f"no base image recipe for {machine}; pass --base with an image of your own")
    foreign = _foreign(architecture)
    if foreign is not None and foreign not in _BY_ARCH:
        raise BaseError(f"no base image recipe for {foreign}; ToolDock builds {', '.join(_BY_ARCH)}")
    arch, py_platform = (foreign, _BY_ARCH[foreign]) if foreign else _ARCH[machine]
    packages = pinned_packages()
    # this machine's key is the one every build before --platform used: its cached base stays valid
    key = cache_key("base", *packages, str(source_date_epoch()), STDLIB_BYTECODE, *([foreign] if foreign else []))
    layout = cache / "base" / key[:16]
    if (layout / "index.json").is_file():
        return read_layout(layout, store)
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise BaseError("building the default base needs apt-get and dpkg-deb (Debian/Ubuntu); pass --base instead")
    debs = _download(packages, cache / "debs", foreign, cache)
    with tempfile.TemporaryDirectory(prefix="tooldock-rootfs-") as tmp:
        rootfs = Path(tmp)
        for deb in debs:
            proc = subprocess.run(["dpkg-deb", "-x", str(deb), str(rootfs)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise BaseError(f"dpkg-deb -x {deb.name} failed: {proc.stderr.strip()}")
        # The standard library's bytecode, compiled by this very interpreter (bytecode.py): a read-only
        # container cannot write it, so without it every start would compile what it imports. Another
        # architecture's: by this machine's base interpreter, the same Debian package (pycs do not depend on
        # the CPU), not under an emulator: the digest does not depend on whether the machine has one.
        compiler = foreign_compiler(store, cache, foreign) if foreign else None
        compiler = compiler or (None if foreign else rootfs_compiler(rootfs, PYTHON_BIN, PYTHON, "base rootfs"))
        if compiler is not None:
            compiler.compile(rootfs / f"usr/lib/python{PYTHON}", f"/usr/lib/python{PYTHON}")
        else:  # the image works, starts slower, and its digest differs from a machine where this ran
            print(
                f"tooldock base: cannot run the base's python{PYTHON} here: no standard library bytecode",
                file=sys.stderr,
            )
        layer, _ = store.layer(key, lambda: _rootfs_entries(rootfs))
    created = iso_time(source_date_epoch())
    config = {
        "architecture": arch,
        "os": "linux",
        "created": created,
        "config": {
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
                "LANG=C.UTF-8",
            ],
            "User": f"{NONROOT}:{NONROOT}",
            "WorkingDir": "/",
            "Cmd": [PYTHON_BIN],
            "Labels": {
                LABEL_PYTHON: PYTHON,
                LABEL_PYTHON_BIN: PYTHON_BIN,
                LABEL_PLATFORM: py_platform,
                "org.opencontainers.image.title": "tooldock-base",
                "org.opencontainers.image.description": (
                    f"Minimal Python {PYTHON} from {len(packages)} pinned Debian packages"
                ),
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id]},
        "history": [{"created": created, "created_by": "tooldock base (pinned Debian packages)"}],
    }
    image = assemble(store, config, [layer], {"org.opencontainers.image.created": created})
    write_layout(layout, store, image, "base")
    return image


def foreign_compiler(store: BlobStore, cache: Path, architecture: str) -> Compiler | None:
    """The compiler of `architecture`'s bytecode: this machine's base interpreter, when its Debian Python
    packages are the very versions `architecture`'s base has (else a BaseError says so)."""
    mine, theirs = (
        {d.name: d.version for d in base_packages(cache, arch) if d.name in PYTHON_PACKAGES}
        for arch in (None, architecture)
    )
    if mine != theirs:
        raise BaseError(
            f"the {architecture} base's Python packages {theirs} differ from this machine's base's {mine}: its "
            f"bytecode cannot be compiled here; build linux/{architecture} on a linux/{architecture} machine"
        )
    host = build_base(store, cache)
    return image_compiler(store, host, PYTHON_BIN, PYTHON, cache)
