"""Reading the audit log back, newest line first, safely and boundedly: only the daily files the writer makes
(`YYYY-MM-DD.jsonl`, regular files directly in the audit folder, never a symlink and never a name taken
from a request), read backwards in blocks, at most `MAX_BYTES` in all, each line parsed on its own (a line
that is not a JSON object is skipped).

`stats` turns the lines of the last minutes into the dashboard's charts: calls, errors and the latency's
p50 and p95 per namespace and tool, per time step.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

DAILY = re.compile(r"\d{4}-\d{2}-\d{2}\.jsonl")
MAX_BYTES = 32 * 1024 * 1024  # read per request, across files: a busy day's log is not read whole
BLOCK = 256 * 1024
MAX_LINE = 1024 * 1024  # a longer line (huge logged arguments) is skipped, not held
OK = {"ok"}
NOT_ERRORS = {"ok", "cancelled"}


def daily_files(directory: Path) -> list[Path]:
    """The audit folder's daily files, newest first."""
    try:
        names = [entry for entry in os.scandir(directory) if DAILY.fullmatch(entry.name)]
    except OSError:
        return []
    found = [Path(e.path) for e in names if e.is_file(follow_symlinks=False)]
    return sorted(found, key=lambda p: p.name, reverse=True)


def _backwards(path: Path, budget: list[int]) -> Iterator[bytes]:
    """The lines of one file, last first, while `budget[0]` (bytes still allowed) lasts."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        position = f.seek(0, os.SEEK_END)
        rest = b""
        while position > 0 and budget[0] > 0:
            size = min(BLOCK, position, budget[0])
            position -= size
            budget[0] -= size
            f.seek(position)
            chunk = f.read(size) + rest
            lines = chunk.split(b"\n")
            rest = lines[0]
            if len(rest) > MAX_LINE:
                rest = b""
            for line in reversed(lines[1:]):
                if line.strip():
                    yield line
        if position == 0 and rest.strip():
            yield rest


def lines(directory: Path | None, max_bytes: int = MAX_BYTES) -> Iterator[dict[str, Any]]:
    """Every audit line still within reach, newest first."""
    if directory is None:
        return
    budget = [max_bytes]
    for path in daily_files(directory):
        for raw in _backwards(path, budget):
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                yield line
        if budget[0] <= 0:
            return


def matches(line: dict[str, Any], wanted: dict[str, str]) -> bool:
    """`wanted`: field -> value (the tool filter also matches a `target`, e.g. `keys/create`'s key id)."""
    for field, value in wanted.items():
        if field == "tool":
            if value not in (line.get("tool"), line.get("target")):
                return False
        elif str(line.get(field, "")) != value:
            return False
    return True


def seconds(line: dict[str, Any]) -> float | None:
    try:
        return datetime.fromisoformat(str(line.get("time"))).timestamp()
    except ValueError:
        return None


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile of sorted `values`."""
    return values[max(0, math.ceil(share * len(values)) - 1)]


def stats(
    found: Iterator[dict[str, Any]], now: float, minutes: int, step: int, sees: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Calls, errors, p50 and p95 (ms) of the tool calls in the last `minutes`, per namespace and tool, per
    `step` seconds; the series are ordered by calls, most first."""
    start = (now - minutes * 60) // step * step
    cells: dict[tuple[str, str], dict[int, list[Any]]] = {}
    for line in found:
        when = seconds(line)
        if when is None:
            continue
        if when < start:
            break  # newest first: the rest is older
        if line.get("method") != "tools/call" or not sees(line):
            continue
        series = cells.setdefault((str(line.get("namespace")), str(line.get("tool"))), {})
        cell = series.setdefault(int((when - start) // step), [0, 0, []])
        cell[0] += 1
        cell[1] += line.get("status") not in NOT_ERRORS
        latency = line.get("latency_ms")
        if isinstance(latency, (int, float)):
            cell[2].append(float(latency))
    out = []
    for (namespace, tool), series in cells.items():
        points = []
        for index in sorted(series):
            calls, errors, latencies = series[index]
            latencies.sort()
            points.append(
                {
                    "t": start + index * step,
                    "calls": calls,
                    "errors": errors,
                    "p50": percentile(latencies, 0.5) if latencies else None,
                    "p95": percentile(latencies, 0.95) if latencies else None,
                }
            )
        out.append(
            {
                "namespace": namespace,
                "tool": tool,
                "calls": sum(p["calls"] for p in points),
                "errors": sum(p["errors"] for p in points),
                "points": points,
            }
        )
    out.sort(key=lambda s: (-s["calls"], s["namespace"], s["tool"]))
    return {"start": start, "end": now, "step": step, "series": out}
