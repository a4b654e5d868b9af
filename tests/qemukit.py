"""Running arm64 binaries on this (amd64) machine: Debian's qemu-user-static, registered with the kernel's
binfmt_misc for aarch64 ELF files with the F (fix-binary) flag, so the emulator is opened once at
registration and works inside containers too (`docker run --platform linux/arm64`).

The session fixture `arm64_emulation` (import it into a test module) registers the handler when it is missing
(mounting binfmt_misc first if needed), and skips the test with the reason when it cannot (not root, no
qemu-user-static, no binfmt_misc); under CI=true it fails instead. scripts/test installs qemu-user-static.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BINFMT = Path("/proc/sys/fs/binfmt_misc")
HANDLER = BINFMT / "qemu-aarch64"
CONF = Path("/usr/lib/binfmt.d/qemu-aarch64.conf")  # Debian 12's qemu-user-static (the -static.conf elsewhere)
CONFS = (CONF, Path("/usr/lib/binfmt.d/qemu-aarch64-static.conf"))


def _unavailable(reason: str) -> None:
    message = f"arm64 emulation unavailable: {reason} (scripts/test installs qemu-user-static as root)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must provide this: {message}")
    pytest.skip(message)


def _flags() -> str:
    for line in HANDLER.read_text().splitlines():
        if line.startswith("flags:"):
            return line.split(":", 1)[1].strip()
    return ""


@pytest.fixture(scope="session")
def arm64_emulation() -> None:
    """aarch64 binaries run here through qemu (binfmt_misc, fix-binary), or the test skips saying why."""
    register_aarch64()


def register_aarch64() -> None:
    """Register qemu-aarch64 with binfmt_misc (flag F) unless it is; skip (CI=true: fail) when that cannot be."""
    if HANDLER.is_file() and (HANDLER.read_text().startswith("enabled") and "F" in _flags()):
        return
    conf = next((c for c in CONFS if c.is_file()), None)
    if conf is None:
        _unavailable("no /usr/lib/binfmt.d/qemu-aarch64*.conf: install qemu-user-static")
        return
    if os.geteuid() != 0:
        _unavailable("registering the aarch64 binfmt handler needs root")
        return
    if not (BINFMT / "register").exists():
        mounted = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], capture_output=True,
                                 text=True)
        if mounted.returncode != 0:
            _unavailable(f"cannot mount binfmt_misc: {mounted.stderr.strip()}")
            return
    line = next(x for x in conf.read_text().splitlines() if x.startswith(":"))
    fields = line.split(":")
    name = fields[1]
    if "F" not in fields[-1]:  # the handler must be usable inside containers: fix the binary at registration
        line = ":".join([*fields[:-1], fields[-1] + "F"])
    if HANDLER.exists():  # registered without F (or disabled): replace it
        HANDLER.write_text("-1")
    try:
        (BINFMT / "register").write_text(line)
    except OSError as exc:
        _unavailable(f"cannot register {name} with binfmt_misc: {exc}")
        return
    if not (HANDLER.is_file() and "F" in _flags()):
        _unavailable(f"{HANDLER} not registered with the F flag after writing {conf}'s line")
