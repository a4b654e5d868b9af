"""What the machine under a benchmark does when a CPU goes idle, and a way to change it for one run.

At 1 concurrent a call is a chain of hand-overs between processes that were asleep (the load generator,
the gateway, its worker and the worker's thread), so what an idle CPU costs to wake sets a large part of a
call's time. On a virtual machine whose kernel uses the `haltpoll` cpuidle driver, `guest_halt_poll_ns`
says how long an idle virtual CPU polls for new work before it halts; a halted one costs an exit to the
host and a wake-up there (tens of µs) for each process woken on it. Linux's default is 200,000 ns; a
kernel command line can set 0 (halt at once), as this project's development VM does.

    describe()                 # "2 CPUs; cpuidle haltpoll, guest_halt_poll_ns=0"
    with halt_polling(200000): # set for the run (root only), put back afterwards
        ...
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

CPUIDLE = Path("/sys/devices/system/cpu/cpuidle")
HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def describe() -> str:
    """The CPU count and the idle settings, for a table's title."""
    parts = [f"{os.cpu_count()} CPUs"]
    driver = _read(CPUIDLE / "current_driver")
    if driver:
        parts.append(f"cpuidle {driver}")
    poll = _read(HALT_POLL)
    if poll is not None:
        parts.append(f"guest_halt_poll_ns={poll}")
    return "; ".join(parts)


@contextlib.contextmanager
def halt_polling(ns: int | None) -> Iterator[None]:
    """Set `guest_halt_poll_ns` to `ns` for the block and put the old value back after it (None: leave it
    alone). Raises SystemExit with what to do when the machine has no such setting or it cannot be written."""
    if ns is None:
        yield
        return
    if ns < 0:
        raise SystemExit(f"--guest-halt-poll-ns must be 0 or more, got {ns}")
    before = _read(HALT_POLL)
    if before is None:
        raise SystemExit(
            f"--guest-halt-poll-ns: this machine has no {HALT_POLL} (it is not a VM guest using the haltpoll "
            "cpuidle driver); run without the option"
        )
    try:
        HALT_POLL.write_text(str(ns))
    except OSError as exc:
        raise SystemExit(f"--guest-halt-poll-ns: cannot write {HALT_POLL} ({exc.strerror}); run as root") from exc
    try:
        yield
    finally:
        HALT_POLL.write_text(before)
