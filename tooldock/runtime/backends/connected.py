"""Workers this gateway connects to but does not run: the worker owner's, for a replica of `tooldock serve
--replicas N` (attached.py), and another host's, over the network (network.py).

Each is one connection to a worker, made again by the subclass's `_supervise` when it ends (the worker's
owner or orchestrator restarts the worker); what the worker serves comes from its handshake (`_serve`).
Stopping one lets this gateway's calls on it finish (bounded), then lets go of it: it is never asked to
exit, since others may use the same worker.
"""

from __future__ import annotations

import asyncio
import contextlib

from tooldock.runtime.backends.supervisor import SupervisedWorker
from tooldock.runtime.workerclient import WorkerConnection
from tooldock.worker import protocol


class ConnectedWorker(SupervisedWorker):
    async def _serve(self, conn: WorkerConnection) -> None:
        """Ready on `conn`, serving what its handshake says, until the connection ends."""
        handshake = conn.handshake
        self.tools, self.inlined_tools, self.tool_versions = protocol.tools_of(handshake)
        self.surface = {key: list(handshake.get(key) or []) for key in protocol.SURFACE_KINDS}
        self.failed_files = list(handshake.get("failed_files") or [])
        self.plain_tools, self.asking_tools = protocol.tool_kinds(handshake)
        self.pid = handshake.get("pid")
        self._conn, self.state = conn, "ready"
        self._ready.set()
        self._settled.set()
        try:
            await conn.closed.wait()
        finally:
            self._ready.clear()
            self._conn = None
            await conn.close()

    async def stop(self, drain_timeout: float) -> None:
        """Let this gateway's calls on it finish (bounded), then let go: the worker runs on."""
        self._stopping = self._retiring = True
        self._stuck.cancel()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_timeout):
                await self._idle.wait()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._disconnect()
        self.state = "stopped"
