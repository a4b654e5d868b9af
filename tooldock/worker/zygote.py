"""A build-time helper that keeps fastmcp imported: `python -m tooldock.worker.zygote --socket PATH`.

Importing fastmcp costs most of a second; a schema extraction needs it each time a tool file changes.
The zygote imports it once, then serves each request by forking: the child imports the namespace's tool
files (a fresh interpreter state every time, as `--describe` would have), writes the descriptors and
exits. It exits by itself after `--idle` seconds without a request. Used only by `tooldock build`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path


def _describe(request: dict) -> dict:
    from tooldock.namespace.extract import load_namespace

    folder = Path(request["dir"])
    os.chdir(folder)
    loaded = load_namespace(folder, request["files"])
    return {
        "namespace": request.get("namespace") or folder.name,
        "tools": loaded.descriptors,
        **loaded.surface(),
        "failed_files": [p.to_dict() for p in loaded.failed],
    }


def serve(path: Path, idle: float) -> None:
    import fastmcp.tools  # noqa: F401  (the point: paid once, inherited by every fork)

    from tooldock.namespace import extract  # noqa: F401

    server = socket.socket(socket.AF_UNIX)
    tmp = path.with_name(path.name + f".{os.getpid()}")
    tmp.unlink(missing_ok=True)
    server.bind(str(tmp))
    os.chmod(tmp, 0o600)
    server.listen(16)
    os.replace(tmp, path)  # appears only when ready to accept
    server.settimeout(idle)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                break
            conn.settimeout(None)
            pid = os.fork()
            if pid == 0:  # child: one extraction, then gone
                server.close()
                with conn, conn.makefile("rwb") as stream:
                    try:
                        reply = _describe(json.loads(stream.readline()))
                    except Exception as exc:  # report, never hang the builder
                        reply = {"error": f"{type(exc).__name__}: {exc}"}
                    stream.write(json.dumps(reply).encode() + b"\n")
                    stream.flush()
                os._exit(0)
            conn.close()
            os.waitpid(pid, 0)
    finally:
        path.unlink(missing_ok=True)  # first, so no builder connects to a zygote that is leaving
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tooldock.worker.zygote")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--idle", type=float, default=300.0)
    args = parser.parse_args()
    serve(Path(args.socket), args.idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
