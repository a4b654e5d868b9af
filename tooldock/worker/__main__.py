"""`python -m tooldock.worker`: serve one namespace on a unix socket (and, with `--listen`, on TCP over mutual
TLS: `tcp.py`), or print its tool schemas."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tooldock.worker import secretenv

if TYPE_CHECKING:
    from tooldock.worker.tls import TLSFiles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tooldock.worker", description=__doc__)
    parser.add_argument("--namespace", default=os.environ.get("TOOLDOCK_NAMESPACE"), help="namespace name")
    parser.add_argument("--dir", default=os.environ.get("TOOLDOCK_APP_DIR", "."), help="namespace folder")
    parser.add_argument(
        "--socket", help="unix socket path (default /run/tooldock/<namespace>.sock; none with --listen alone)"
    )
    parser.add_argument(
        "--listen",
        default=os.environ.get("TOOLDOCK_WORKER_LISTEN") or None,
        metavar="HOST:PORT",
        help="also serve on TCP, over mutual TLS (needs --tls-dir; port 0: a free one, in the ready line)",
    )
    parser.add_argument(
        "--tls-dir",
        default=os.environ.get("TOOLDOCK_TLS_DIR") or None,
        help="--listen: the directory with this worker's cert.pem, key.pem and trust.pem (tooldock cluster cert)",
    )
    parser.add_argument("--file", action="append", default=None, help="tool file to load (repeatable)")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    parser.add_argument("--describe", action="store_true", help="print the tool schemas as JSON and exit")
    args = parser.parse_args(argv)

    folder = Path(args.dir)
    namespace = args.namespace or folder.resolve().name
    listen, tls_files = network(parser, args) if args.listen and not args.describe else (None, None)
    socket_path = Path(args.socket or f"/run/tooldock/{namespace}.sock") if args.socket or not listen else None
    names = secretenv.declared_secrets()
    token = None
    if names and secretenv.via_socket() and not args.describe:
        if socket_path is None:
            parser.error("TOOLDOCK_SECRETS_VIA=socket needs the unix socket (--socket): secrets never travel over TCP")
        values, token = asyncio.run(secretenv.receive(namespace, socket_path, names))
        os.environ.update(values)
    os.environ.update(secretenv.from_files())
    masker = secretenv.Masker([os.environ[n] for n in names if os.environ.get(n)])
    secretenv.mask_output(masker)

    from tooldock.namespace.extract import load_namespace  # imports fastmcp: after argument errors are reported

    files = args.file if args.file is not None else sorted(p.name for p in folder.glob("[!_.]*.py"))
    loaded = load_namespace(folder, files)
    if args.describe:
        json.dump(
            {
                "namespace": namespace,
                "tools": loaded.descriptors,
                **loaded.surface(),
                "failed_files": [p.to_dict() for p in loaded.failed],
            },
            sys.stdout,
            indent=2,
            sort_keys=True,
        )
        print()
        return 1 if loaded.failed else 0
    for problem in loaded.failed:
        print(f"[{namespace}] {problem.file}:{problem.line or '-'}: {problem.message}", file=sys.stderr, flush=True)

    from tooldock.worker import quickresult, threadhop
    from tooldock.worker.server import serve

    threadhop.install()  # sync tools reach their thread in one hand-off, not anyio's
    quickresult.install()  # plain return values become results without fastmcp's three conversions
    quiet_telemetry()

    loop = new_loop()
    main_task = loop.create_task(
        serve(namespace, loaded, socket_path, args.parent_pid, token, masker, listen, tls_files)
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main_task.cancel)
    try:
        loop.run_until_complete(main_task)
    except asyncio.CancelledError:
        pass
    finally:
        if socket_path is not None:
            socket_path.unlink(missing_ok=True)
        # Let connection handlers and calls still running end inside the loop, not after it closed.
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:  # gather() of nothing makes its future on another loop, which run_until_complete refuses
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
    if args.parent_pid and os.getppid() != args.parent_pid:
        end_own_group()
    return 0


def network(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[tuple[str, int], TLSFiles]:
    """`--listen` and `--tls-dir`, checked before the tools are imported (a wrong file is said at once)."""
    from tooldock.worker import tls

    if not args.tls_dir:
        parser.error("--listen needs --tls-dir (or TOOLDOCK_TLS_DIR): the worker serves TCP over mutual TLS only")
    try:
        return tls.parse_host_port(args.listen), tls.TLSFiles(Path(args.tls_dir))
    except tls.TLSError as exc:
        parser.error(str(exc))


def end_own_group() -> None:
    """The gateway that started this worker is gone (killed: it would have ended the worker's process group
    itself), so no one else will end what the tools started: end the group, this worker last of all (SIGKILL
    reaches every member at once). Only when the worker leads the group, as the gateway starts it; a worker
    run by hand from a shell must not end the shell's job."""
    if os.getpgrp() == os.getpid():
        from tooldock.worker.family import Family

        Family.of(os.getpid()).signal(signal.SIGKILL)  # the tools' children that left the group (`setsid`)
        sys.stdout.flush()
        sys.stderr.flush()
        os.killpg(os.getpgrp(), signal.SIGKILL)


def quiet_telemetry() -> None:
    """fastmcp's own OpenTelemetry spans off (`FASTMCP_TELEMETRY_MODE=off`) unless the namespace's
    environment sets that variable. The worker's fastmcp server is internal, so its spans (two a Context
    tool call, a tenth of that call's CPU even with no exporter) describe nothing a user asked for; the
    gateway traces each call and its hop to the worker, and passes the trace on for the worker's log lines."""
    if "FASTMCP_TELEMETRY_MODE" not in os.environ:
        import fastmcp

        fastmcp.settings.telemetry_mode = "off"


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when the environment has it (the framework requirements install it), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


if __name__ == "__main__":
    sys.exit(main())
