"""Debian packages of another architecture than the build machine's, fetched without touching its dpkg or apt
configuration (no `dpkg --add-architecture`, no root needed).

apt-get runs with `APT::Architecture` set to the wanted architecture and its own state under the build cache
(`<cache>/apt/<arch>/`: the package lists, apt's caches and an empty dpkg status), reading the machine's
sources (`/etc/apt/sources.list` and `sources.list.d`, as `apt-get update` does). Its lists are fetched once
(`apt-get update` into that directory), and again when a pinned version is not in them; the `.deb` files are
downloaded with `apt-get download` next to the machine's own ones, named by their architecture.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tooldock.errors import BuilderError


class ForeignPackageError(BuilderError):
    pass


def apt_options(cache: Path, arch: str) -> list[str]:
    """The `-o` options giving apt-get `arch` and a private state directory (made here)."""
    root = cache / "apt" / arch
    (root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (root / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    status = root / "status"
    if not status.exists():
        status.write_bytes(b"")
    settings = {
        "APT::Architecture": arch,
        "APT::Architectures": arch,
        "Dir::State::Lists": root / "lists",
        "Dir::Cache": root / "cache",
        "Dir::State::status": status,
    }
    return [arg for key, value in settings.items() for arg in ("-o", f"{key}={value}")]


def _has_lists(cache: Path, arch: str) -> bool:
    return any((cache / "apt" / arch / "lists").glob("*_Packages*"))


def update(cache: Path, arch: str) -> None:
    """`apt-get update` of the private lists for `arch`."""
    proc = subprocess.run(
        ["apt-get", "-q", *apt_options(cache, arch), "update"], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0 or not _has_lists(cache, arch):
        raise ForeignPackageError(
            f"apt-get update for {arch} (lists in {cache / 'apt' / arch}) failed: "
            f"{(proc.stderr or proc.stdout).strip()[-600:]}\nThe machine's apt sources must serve {arch} "
            "(Debian's archive does; Ubuntu's arm64 packages are on ports.ubuntu.com)."
        )


def _get(pins: list[str], debs: Path, cache: Path, arch: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["apt-get", "-q", *apt_options(cache, arch), "download", *pins],
        cwd=debs,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def download(pins: list[str], debs: Path, cache: Path, arch: str) -> None:
    """`apt-get download NAME=VERSION...` of `arch`'s packages into `debs`, in one run; the lists fetched first
    when there are none, and fetched again once if a version is not in them."""
    if not pins:
        return
    if not _has_lists(cache, arch):
        update(cache, arch)
    if _get(pins, debs, cache, arch).returncode == 0:
        return
    update(cache, arch)
    if _get(pins, debs, cache, arch).returncode == 0:
        return
    for pin in pins:  # which one: each alone
        proc = _get([pin], debs, cache, arch)
        if proc.returncode != 0:
            name, _, version = pin.partition("=")
            raise ForeignPackageError(
                f"the base's package {name} {version} is not available for {arch} "
                f"(apt-get download {pin} for {arch}: {proc.stderr.strip()[-400:]}).\n"
                f"The pins in tooldock/templates/base/packages.txt are shared by every architecture: update them "
                f"to versions the archive has for {arch}, or leave linux/{arch} out of --platform."
            )
