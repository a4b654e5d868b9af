"""What each upstream server listed, kept on disk so a restarted gateway lists an upstream namespace's tools
before its servers are up again (seed 003, "schema caching"). Keyed by the server's whole `[[servers]]`
entry: a changed command, URL or prefix never serves another server's schemas."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

from tooldock.atomic import atomic_write
from tooldock.namespace.toolsfile import UpstreamServer
from tooldock.upstream.connection import Listing


def server_key(spec: UpstreamServer) -> str:
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:16]


class SchemaCache:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._data: dict[str, Any] = {}
        if path is not None:
            with contextlib.suppress(OSError, ValueError, RecursionError):
                loaded = json.loads(path.read_text(encoding="utf-8"))
                self._data = loaded if isinstance(loaded, dict) else {}

    def get(self, spec: UpstreamServer) -> Listing | None:
        found = self._data.get(server_key(spec))
        return Listing.from_dict(found) if isinstance(found, dict) else None

    def put(self, specs: list[UpstreamServer], spec: UpstreamServer, listing: Listing) -> None:
        """Remember one server's listing (and forget servers no longer in tools.toml). Atomic; best effort."""
        if self.path is None:
            return
        keep = {server_key(s) for s in specs}
        self._data = {k: v for k, v in self._data.items() if k in keep}
        self._data[server_key(spec)] = listing.to_dict()
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(self._data).encode(), mode=0o600)
