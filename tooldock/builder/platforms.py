"""The platforms `tooldock build --platform` builds for: linux/amd64 and linux/arm64.

A platform names the Debian architecture its base is made of, the wheels' platform (uv's `--python-platform`)
and the file its namespace lock is kept in. The build machine's own platform is the "host" one: built exactly
as without `--platform`. Any other is "foreign": its base comes from that architecture's Debian packages
(aptarch.py), its bytecode is compiled by the host's base interpreter (the same Debian python3.11: pyc bytes do
not depend on the CPU), its requirements are locked and installed from wheels only, and its tool schemas are
the host build's (they are extracted by importing the tools, which needs an interpreter that runs here).
"""

from __future__ import annotations

import platform as _platform
import re
from dataclasses import dataclass

from tooldock.errors import BuilderError

# OCI architecture -> (the kernel's machine name, uv's --python-platform): what base.py's recipe supports
ARCHITECTURES = {"amd64": ("x86_64", "x86_64-manylinux_2_36"), "arm64": ("aarch64", "aarch64-manylinux_2_36")}
_MACHINES = {machine: arch for arch, (machine, _) in ARCHITECTURES.items()}
LOCK_FILE = "requirements.lock"  # linux/amd64's; every other platform's is requirements.linux-<arch>.lock
_PLATFORM_LOCK = re.compile(r"^requirements\.linux-[a-z0-9]+\.lock$")


class PlatformError(BuilderError):
    pass


@dataclass(frozen=True, order=True)
class Platform:
    os: str
    architecture: str  # the OCI and Debian name: amd64, arm64

    @property
    def name(self) -> str:
        return f"{self.os}/{self.architecture}"

    @property
    def machine(self) -> str:
        return ARCHITECTURES[self.architecture][0]

    @property
    def python_platform(self) -> str:
        return ARCHITECTURES[self.architecture][1]

    def descriptor(self) -> dict[str, str]:
        """The `platform` of this platform's manifest in an image index."""
        return {"architecture": self.architecture, "os": self.os}

    def __str__(self) -> str:
        return self.name


def host() -> Platform:
    """The build machine's platform (the one `--load` loads and a build without --platform makes)."""
    machine = _platform.machine()
    return Platform("linux", _MACHINES.get(machine, machine))


def parse(text: str) -> list[Platform]:
    """`linux/amd64,linux/arm64` (`linux/arm64/v8` accepted) -> the platforms, deduplicated, in a fixed order
    (so the image index does not depend on the order they were given in)."""
    found = set()
    for raw in (part.strip() for part in text.split(",")):
        parts = raw.split("/")
        if parts[-1:] == ["v8"] and parts[:2] == ["linux", "arm64"]:
            parts = parts[:2]
        if len(parts) != 2 or parts[0] != "linux" or parts[1] not in ARCHITECTURES:
            supported = ", ".join(f"linux/{a}" for a in ARCHITECTURES)
            raise PlatformError(f"--platform {raw!r}: not a platform ToolDock builds; give one or more of {supported}")
        found.add(Platform(parts[0], parts[1]))
    if not found:
        raise PlatformError("--platform: give at least one platform, e.g. linux/amd64,linux/arm64")
    return sorted(found)


def of_python_platform(python_platform: str) -> Platform | None:
    """The platform whose wheels are `python_platform` (a provenance's `platform`); None when unknown."""
    arch = _MACHINES.get(python_platform.split("-", 1)[0])
    return Platform("linux", arch) if arch else None


def lock_file(python_platform: str) -> str:
    """The namespace lock's file name for a wheel platform: `requirements.lock` for x86_64 (every build before
    --platform existed, and a build on an amd64 machine), `requirements.linux-<arch>.lock` for the others."""
    machine = python_platform.split("-", 1)[0]
    if machine == "x86_64":
        return LOCK_FILE
    return f"requirements.linux-{_MACHINES.get(machine, machine)}.lock"


def is_platform_lock(name: str) -> bool:
    """A lock of a platform other than linux/amd64 (`requirements.linux-arm64.lock`), in a namespace folder."""
    return bool(_PLATFORM_LOCK.match(name))


_NO_WHEEL = re.compile(
    r"(?:Because|and) (?:only )?([A-Za-z0-9][A-Za-z0-9._-]*?)(?:[=<>!~]=?[^\s,]+)?(?: is available and \S+)? "
    r"has no (?:wheels with a matching platform tag|usable wheels)"
)


def wheel_problem(uv_output: str, python_platform: str, what: str) -> str | None:
    """A clear refusal when uv's resolution failed because a package has no wheel for the platform; None when
    it failed for another reason."""
    flat = " ".join(uv_output.split())  # uv wraps its message to the terminal's width (COLUMNS, or a pipe's)
    names = list(dict.fromkeys(m.group(1) for m in _NO_WHEEL.finditer(flat)))
    if not names:
        return None
    arch = _MACHINES.get(python_platform.split("-", 1)[0], python_platform)
    packages = ", ".join(repr(n) for n in names)
    return (
        f"{what}: {packages} {'has' if len(names) == 1 else 'have'} no wheel for linux/{arch} ({python_platform}); "
        f"images for another platform than the build machine's are installed from wheels only. Pin a version "
        f"that publishes a wheel for {python_platform.split('-', 1)[0]}, build linux/{arch} on a linux/{arch} machine, "
        f"or leave linux/{arch} out of --platform."
    )
