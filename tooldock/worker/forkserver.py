"""`python -m tooldock.worker.forkserver --socket PATH`: start workers by forking a warm interpreter.

A worker's cold start is mostly importing the framework (fastmcp, pydantic, the MCP types): over a second,
and 70+ MB of private memory per worker. The fork server pays that once per environment: it imports the
framework and the worker's own modules, freezes what it imported out of the garbage collector's reach
(`gc.freeze`, so collections in a child do not write to, and so copy, the shared pages), and then forks one
child per worker. A child is the same `python -m tooldock.worker` it would have been: its own session,
working directory, environment (only what the gateway sends: the namespace's variables and secrets), tool
files imported after the fork, stdout and stderr on the pipe the gateway passed along. Crashes, signals and
exit codes behave as for a spawned worker; the gateway signals the child's pid directly.

Protocol (one connection per worker, unix socket, mode 0600 in the gateway's private directory): the gateway
sends one JSON line `{"argv": [...], "env": {...}, "cwd": "..."}` with the write end of its output pipe
attached (SCM_RIGHTS); the server answers `{"pid": N}`, and `{"exit": code}` (negative: killed by that
signal) when the child is gone. The server exits when the gateway (`--parent-pid`) is gone or its socket
is closed. It never starts a thread or an event loop: forking stays safe.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

MAX_REQUEST = 1024 * 1024


WARMUP = '''from fastmcp.tools import tool


@tool
async def warm_up(a: int, b: str = "x") -> dict:
    """Warm up the framework.

    Args:
        a: A number.
        b: A string.
    """
    return {"a": a, "b": b}
'''


def preload() -> None:
    """Import what every worker imports, and load one tool file, so the lazily imported parts (docstring
    parsers, schema generation) are in the shared pages too."""
    import fastmcp.server.sessions
    import fastmcp.tools  # noqa: F401  (the point: imported once, shared by every child)

    with contextlib.suppress(ImportError):
        import uvloop  # noqa: F401  (the children's event loop)

    from tooldock.namespace.extract import load_namespace
    from tooldock.worker import bridge, quickresult, secretenv, server, threadhop  # noqa: F401  (bridge: imported lazily)

    threadhop.install()  # once here, not in each child: the patched modules' pages stay shared (~0.25 MB each)
    quickresult.install()

    with tempfile.TemporaryDirectory(prefix="tooldock-warmup-") as tmp:
        (Path(tmp) / "tooldock_forkserver_warmup.py").write_text(WARMUP)
        with contextlib.suppress(Exception):  # only an optimisation
            load_namespace(Path(tmp), ["tooldock_forkserver_warmup.py"])
        sys.modules.pop("tooldock_forkserver_warmup", None)
    gc.collect()
    gc.freeze()


def _child(request: dict, out_fd: int, closing: list[socket.socket]) -> None:
    """In the forked child: become the worker the request describes. Never returns."""
    code = 70
    try:
        for sock in closing:
            sock.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        os.setsid()
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["python -m tooldock.worker", *request["argv"]]
        from tooldock.worker.__main__ import main

        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # report, then exit like a crashed worker would
        with contextlib.suppress(Exception):
            print(f"worker failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _receive(conn: socket.socket) -> tuple[dict, int]:
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, new_fds, _, _ = socket.recv_fds(conn, 65536, 4)
        fds += new_fds
        if not chunk or len(data) + len(chunk) > MAX_REQUEST:
            break
        data += chunk
    if len(fds) != 1 or not data.endswith(b"\n"):
        for fd in fds:
            os.close(fd)
        raise ValueError("a request is one JSON line with exactly one file descriptor")
    request = json.loads(data)
    if not isinstance(request, dict) or not isinstance(request.get("argv"), list):
        os.close(fds[0])
        raise ValueError("a request needs argv, env and cwd")
    return request, fds[0]


def serve(path: Path, parent_pid: int | None, unused_exit: float | None = None) -> None:
    """`unused_exit`: seconds after which a server that has not forked yet exits (one started speculatively,
    for an environment no namespace turned out to use)."""
    preload()
    listener = socket.socket(socket.AF_UNIX)
    tmp = path.with_name(path.name + f".{os.getpid()}")
    tmp.unlink(missing_ok=True)
    listener.bind(str(tmp))
    os.chmod(tmp, 0o600)
    listener.listen(64)
    os.replace(tmp, path)  # appears only when ready to fork
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the selector through the wakeup fd
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "wake")
    children: dict[int, socket.socket] = {}
    unused_until = time.monotonic() + unused_exit if unused_exit is not None else None
    try:
        while parent_pid is None or _alive(parent_pid):
            if unused_until is not None and time.monotonic() > unused_until:
                break
            for key, _ in selector.select(timeout=1.0):
                if key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        wake_r.recv(4096)
                elif key.data == "accept":
                    conn, _ = listener.accept()
                    unused_until = None
                    _spawn(conn, children, [listener, wake_r, wake_w, *children.values()])
            _reap(children)
    finally:
        path.unlink(missing_ok=True)
        listener.close()


def _spawn(conn: socket.socket, children: dict[int, socket.socket], closing: list[socket.socket]) -> None:
    try:
        conn.settimeout(10)
        request, out_fd = _receive(conn)
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"error": str(exc)}).encode() + b"\n")
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(request, out_fd, [*closing, conn])
    os.close(out_fd)
    children[pid] = conn
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            conn.close()


def _alive(pid: int) -> bool:
    if os.getppid() != pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tooldock.worker.forkserver")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--unused-exit", type=float, default=None, help="exit after this many seconds unused")
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the gateway stops it (SIGTERM) after its workers
    serve(Path(args.socket), args.parent_pid, args.unused_exit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
