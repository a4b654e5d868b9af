"""The image's build provenance: an in-toto v1 statement with a SLSA v1 provenance predicate.

The subject is the image manifest's digest. The build definition names what went in (the namespace
folder's digest, its git commit and repository when it is in one, the locks, the base and its package
list) and the parameters; the run details name the builder and its version. No start or finish times:
the same inputs give the same bytes, so a rebuild can be compared with the statement byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import tooldock
from tooldock.builder.imageconfig import APP_DIR
from tooldock.builder.lock import FRAMEWORK_RESOLVED_AS_OF
from tooldock.builder.materials import Materials, git_source, tree_digest
from tooldock.builder.tarball import source_date_epoch

MEDIA_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://tooldock.dev/build/v1"
BUILDER_ID = "https://tooldock.dev/builder/tooldock-build"


def _sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _dependencies(m: Materials) -> list[dict[str, Any]]:
    deps: list[dict[str, Any]] = []
    if m.folder is not None:
        folder: dict[str, Any] = {
            "name": f"namespace:{m.name}",
            "uri": f"file:{m.name}",
            "digest": {"sha256": tree_digest(m.files, APP_DIR)},
            "annotations": {"digestOf": "sha256sum lines of the files the image holds, sorted by path"},
        }
        git = git_source(m.folder)
        if git is not None:
            where = f"git+{git.repository}" if git.repository else "git:"
            folder["annotations"]["path"] = git.path
            deps.append(
                {
                    "name": "source",
                    "uri": f"{where}@{git.commit}" + (f"#{git.path}" if git.path else ""),
                    "digest": {"gitCommit": git.commit},
                    "annotations": {"path": git.path, "dirty": git.dirty},
                }
            )
        deps.append(folder)
    if m.lock_file:
        deps.append({"name": "requirements.lock", "digest": {"sha256": _sha256(m.lock_file)}})
    for layer in m.locks:
        deps.append({"name": f"lock:{layer.layer}", "digest": {"sha256": _sha256(layer.lock)}})
    base: dict[str, Any] = {"name": "base", "digest": {"sha256": m.base.manifest_digest.split(":", 1)[1]}}
    if m.debs is None:  # a --base of the user's own: its reference; the default base is made from the packages below
        base["uri"] = f"oci:{m.base_ref}"
    deps.append(base)
    if m.debs is not None:
        listing = "".join(f"{d.name}={d.version} {d.architecture} {d.sha256}\n" for d in m.debs)
        deps.append(
            {
                "name": "base-packages",
                "digest": {"sha256": _sha256(listing)},
                "annotations": {"packages": [f"{d.name}={d.version}" for d in m.debs]},
            }
        )
    return deps


def make_provenance(m: Materials) -> bytes:
    """The in-toto statement as JSON bytes (sorted keys, two-space indent, newline)."""
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": f"tooldock/{m.name}" if m.kind == "namespace" else f"tooldock/{m.kind}",
                "digest": {"sha256": m.image.manifest_digest.split(":", 1)[1]},
            }
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "kind": m.kind,
                    "name": m.name,
                    "ref": m.ref,
                    "base": m.base_ref,
                    "SOURCE_DATE_EPOCH": source_date_epoch(),
                    **m.parameters,
                },
                "internalParameters": {
                    "python": m.python,
                    "platform": m.platform,
                    "frameworkResolvedAsOf": FRAMEWORK_RESOLVED_AS_OF,
                },
                "resolvedDependencies": _dependencies(m),
            },
            "runDetails": {
                "builder": {"id": BUILDER_ID, "version": {"tooldock": tooldock.__version__}},
                "metadata": {"invocationId": f"{m.name}@{m.image.manifest_digest}"},
            },
        },
    }
    return json.dumps(statement, indent=2, sort_keys=True).encode() + b"\n"
