"""The objects as files: one YAML file per kind (`10-namespace.yaml`, `20-networkpolicy.yaml`, ...), in an
order `kubectl apply -f DIR` can follow (the Namespace first), each a stream of documents sorted by name,
keys sorted: the same inputs give the same bytes. Every file is replaced atomically; files of kinds no
longer rendered are removed, and nothing else in the directory is touched."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tooldock.atomic import atomic_write

ORDER = (
    "Namespace",
    "NetworkPolicy",
    "Service",
    "Deployment",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
)
HEADER = "# Written by `tooldock k8s render`; apply with `kubectl apply -f DIR` after create-secrets.sh.\n"
SCRIPT = "create-secrets.sh"


class _Dumper(yaml.SafeDumper):
    """No anchors and aliases (`&id001`): objects share their label mappings, and readers of manifests
    (and some tools that apply them) expect each written out."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def file_name(kind: str) -> str:
    return f"{(ORDER.index(kind) + 1) * 10:02d}-{kind.lower()}.yaml"


def dump(objects: Sequence[dict[str, Any]]) -> str:
    ordered = sorted(objects, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    return "".join(
        "---\n" + yaml.dump(o, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=1000) for o in ordered
    )


def by_kind(objects: Sequence[dict[str, Any]]) -> dict[str, str]:
    """{file name: its text}: every kind's objects in one file."""
    kinds = sorted({o["kind"] for o in objects}, key=ORDER.index)
    return {file_name(kind): HEADER + dump([o for o in objects if o["kind"] == kind]) for kind in kinds}


def write(folder: Path, files: dict[str, str], script: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in sorted({**files, SCRIPT: script}.items()):
        path = folder / name
        atomic_write(path, text.encode(), 0o755 if name == SCRIPT else 0o644)
        written.append(path)
    for stale in folder.glob("[0-9][0-9]-*.yaml"):  # a kind rendered last time, not now
        if stale.name not in files:
            stale.unlink()
    return written


def write_private(path: Path, objects: Sequence[dict[str, Any]]) -> None:
    """The Secrets with their values: a file only its owner can read, made so before a byte is written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    note = "# Secret values: keep this file private, out of version control; kubectl apply -f it.\n"
    atomic_write(path, (note + dump(objects)).encode(), 0o600)  # 0600 from the start (a temporary file's)
