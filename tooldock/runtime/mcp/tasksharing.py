"""MCP tasks that any gateway replica serves (issue 56): with a shared state store (TOOLDOCK_STATE_URL), a task
lives in the store as well as in the memory of the replica that runs it (tasks.py, taskstore.py).

- Written through: a task is in the store before its `CreateTaskResult` is answered, and each change of its
  status (working, input_required with its requests, completed with its result, failed with its error,
  cancelled) is written, then announced on the namespace's task channel (listens on other replicas hear it,
  tasklisten.py). Another replica answers `tasks/get` from the store; the running one from its memory.
- Forwarded: `tasks/cancel` and `tasks/update` reaching a replica that does not run the task go on the channel
  to the one that does, which applies them, writes the task and replies; the first answers its client then.
- Leased: the running replica renews a lease on its unfinished tasks every REFRESH seconds (the lease lasts
  LEASE). A replica that reads an unfinished task whose lease ran out (its replica died, or lost the store
  that long) marks it `failed`, saying so; a replica that could not renew its own lease in time fails its
  tasks itself, with the same words, so every replica agrees.

With the state in the process (no TOOLDOCK_STATE_URL) nothing here runs: tasks are the process's alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from tooldock.errors import StateUnavailable
from tooldock.runtime.mcp.taskstore import TERMINAL, Task, TaskStore, check_answer
from tooldock.state import RESYNC, Store, replica_name

log = logging.getLogger("tooldock.mcp")
LEASE = 12.0  # seconds an unfinished task's replica may go unheard before other replicas fail the task
REFRESH = LEASE / 4  # seconds between renewals of a replica's leases (and looks at the leases listens follow)
FORWARD_WAIT = 3.0  # seconds a forwarded cancel or update waits for the running replica's reply
READY_WAIT = 3.0  # seconds to wait for the task channel's subscription before saying the store is unavailable


def lost(replica: str) -> str:
    return f"the gateway replica running this task ({replica}) stopped or lost the state store: its lease ran out"


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class RemoteTask:
    """A task as the store has it (run by another replica): what `tasks/*` and listens need of a Task."""

    id: str
    owner: str | None
    replica: str
    view: dict[str, Any]  # its `tasks/get` answer when it was written
    lease: float  # when its replica's lease runs out (wall clock)
    created: float

    @property
    def done(self) -> bool:
        return self.view.get("status") in TERMINAL

    def detailed(self) -> dict[str, Any]:
        return dict(self.view)

    def waiting_for(self, key: str) -> str | None:
        found = (self.view.get("inputRequests") or {}).get(key)
        return str(found.get("method")) if isinstance(found, dict) else None

    def dump(self) -> str:
        fields = {"owner": self.owner, "replica": self.replica, "lease": self.lease, "created": self.created}
        return json.dumps({"view": self.view, **fields})

    @classmethod
    def load(cls, task_id: str, raw: str | None) -> RemoteTask | None:
        try:
            data = json.loads(raw) if raw is not None else None
            if not isinstance(data, dict) or not isinstance(data.get("view"), dict):
                return None
            return cls(task_id, data.get("owner"), str(data["replica"]), data["view"], data["lease"], data["created"])
        except (ValueError, KeyError, TypeError):
            return None


class TaskSharing:
    """One namespace's tasks in the shared store (see the module): made by the namespace's TasksExtension."""

    def __init__(self, namespace: str, store: Store, tasks: TaskStore, replica: str) -> None:
        self.namespace, self.store, self.tasks, self.replica = namespace, store, tasks, replica
        self.channel = f"mcp-tasks:{namespace}"
        self._held: dict[str, Task] = {}  # tasks run here whose last state is not in the store yet, or unfinished
        self._leases: dict[str, float] = {}  # task id -> when the lease last written for it runs out
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}  # forwarded requests waiting for a reply
        self.watched: Counter[str] = Counter()  # task ids open listens follow (their leases are looked at)
        self._lock = asyncio.Lock()  # a task's writes and announcements leave in the order they were made
        self._ready = asyncio.Event()  # set once the channel's subscription is seen to work
        self._follower: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        tasks.listeners.add(self._changed)

    @classmethod
    def of(cls, namespace: str, store: Store, tasks: TaskStore) -> TaskSharing | None:
        """The namespace's task sharing through `store`; None when the store is this process's alone."""
        return cls(namespace, store, tasks, replica_name()) if store.shared else None

    def key(self, task_id: str) -> str:
        return f"mcp-task:{self.namespace}:{task_id}"

    def _ttl(self, created: float, done: bool) -> float:
        """What the store keeps a task for: until `ttl` after its creation (as taskstore.py keeps it), and an
        unfinished one at least long enough for a lapsed lease to be seen."""
        left = created + self.tasks.ttl - time.time()
        return max(left, 1.0) if done else max(left, 3 * LEASE)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- the replica that runs a task ------------------------------------------------------------------

    async def created(self, task: Task) -> None:
        """Before its `CreateTaskResult`: the task in the store, and this replica on the channel (forwarded
        requests reach it). StateUnavailable (the task is forgotten) when the store does not answer."""
        self._held[task.id] = task
        try:
            await self._put(task)
            await self.follow()
        except StateUnavailable:
            self.discard(task)  # (out of the store too, should it be there)
            self.tasks.discard(task)
            raise
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.ensure_future(self._tick())

    def discard(self, task: Task) -> None:
        """A task no client was told about (its guard answered first): out of the store again."""
        if self._held.pop(task.id, None) is not None:
            self._spawn(self._delete(task.id))

    async def _delete(self, task_id: str) -> None:
        async with self._lock:
            with contextlib.suppress(StateUnavailable):
                await self.store.delete(self.key(task_id))

    async def _put(self, task: Task, announce: dict[str, Any] | None = None) -> None:
        """Write the task's state as it is now, with a fresh lease; then announce `announce` (a change)."""
        async with self._lock:
            if task.id not in self._held and announce is None:  # its last state is written already
                return
            lease = time.time() + LEASE
            record = RemoteTask(task.id, task.owner, self.replica, task.detailed(), lease, task.created)
            await self.store.put(self.key(task.id), record.dump(), self._ttl(task.created, task.done))
            if task.done or task.id not in self._held:  # (a discarded one is deleted after this, in order)
                self._held.pop(task.id, None)
                self._leases.pop(task.id, None)
            else:
                self._leases[task.id] = lease
            if announce is not None:
                await self._announce(task.owner, announce)

    async def _announce(self, owner: str | None, view: dict[str, Any]) -> None:
        message = {"kind": "change", "from": self.replica, "owner": owner, "view": view}
        await self.store.publish(self.channel, json.dumps(message))

    def _changed(self, task: Any) -> None:
        """A status change of a task (a TaskStore listener): written through, in order."""
        if isinstance(task, Task) and task.id in self._held:
            self._spawn(self._sync(task, task.detailed()))

    async def _sync(self, task: Task, view: dict[str, Any]) -> None:
        try:
            await self._put(task, view)
        except StateUnavailable as err:  # written again at the next renewal, until it is
            log.warning("MCP task %s changed here; the state store was not told yet: %s", task.id[:12], err)

    async def _tick(self) -> None:
        """Renew the leases of the tasks run here, give up the ones whose lease lapsed (the store was not
        reachable for LEASE seconds: other replicas call them failed), and look at the leases listens follow."""
        while True:
            await asyncio.sleep(REFRESH)
            try:
                now = time.time()
                for task in list(self._held.values()):
                    if not task.done and self._leases.get(task.id, now) < now:
                        task.status_message = lost(self.replica)
                        self.tasks.finish(task, "failed", error=_lost_error(self.replica))
                        if task.runner is not None:
                            task.runner.cancel()
                with contextlib.suppress(StateUnavailable):  # a store that does not answer: next round
                    for task in list(self._held.values()):
                        await self._put(task)
                    for task_id in [t for t in self.watched if t not in self._held]:
                        await self._read(task_id)
            except Exception:  # never stop renewing over one bad round
                log.exception("MCP tasks of %s: a lease round failed", self.namespace)

    def watch(self, task_ids: frozenset[str]) -> None:
        self.watched.update(task_ids)
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.ensure_future(self._tick())

    def unwatch(self, task_ids: frozenset[str]) -> None:
        self.watched.subtract(task_ids)
        self.watched = +self.watched

    # --- any replica -----------------------------------------------------------------------------------

    async def find(self, task_id: str, owner: str | None) -> RemoteTask | None:
        """The caller's task as the store has it (None: unknown, expired or someone else's); one whose
        replica's lease ran out is failed first."""
        found = await self._read(task_id)
        return found if found is not None and found.owner == owner else None

    async def _read(self, task_id: str) -> RemoteTask | None:
        found = RemoteTask.load(task_id, await self.store.get(self.key(task_id)))
        if found is None or found.done or found.lease >= time.time():
            return found
        # Its replica stopped renewing: failed, in words every replica that sees it writes alike.
        view = {k: v for k, v in found.view.items() if k not in ("inputRequests", "result", "error")}
        view.update(status="failed", statusMessage=lost(found.replica), lastUpdatedAt=_iso(found.lease))
        failed = replace(found, view={**view, "error": _lost_error(found.replica)})
        await self.store.put(self.key(task_id), failed.dump(), self._ttl(found.created, True))
        log.warning("MCP task %s of %s failed: %s", task_id[:12], self.namespace, lost(found.replica))
        with contextlib.suppress(StateUnavailable):
            await self._announce(failed.owner, failed.view)
        self._tell(failed)  # this replica's own announcements are not heard back
        return failed

    def _tell(self, task: RemoteTask) -> None:
        for listener in list(self.tasks.listeners):
            listener(task)

    async def forward(self, task: RemoteTask, op: str, responses: dict[str, Any] | None = None) -> bool:
        """Have the replica running `task` cancel it (`op` "cancel") or take the client's input ("update"),
        and wait for it to be done; False when that replica no longer knows the task. StateUnavailable when
        the store, or the replica, does not answer in time (retry)."""
        if task.done:  # nothing to cancel or answer any more, as for a finished task held here
            return True
        if task.replica == self.replica:  # said to be here, but not held here: gone
            return False
        await self.follow()
        rid = uuid.uuid4().hex
        reply = self._replies[rid] = asyncio.get_running_loop().create_future()
        message = {"kind": "request", "to": task.replica, "from": self.replica, "rid": rid, "op": op}
        try:
            await self.store.publish(self.channel, json.dumps({**message, "id": task.id, "owner": task.owner,
                                                               "responses": responses}))  # fmt: skip
            return bool((await asyncio.wait_for(reply, FORWARD_WAIT)).get("found"))
        except TimeoutError:
            again = await self._read(task.id)
            if again is not None and again.done:  # its replica stopped meanwhile: failed now
                return True
            raise StateUnavailable(
                f"the gateway replica running task {task.id!r} ({task.replica}) did not answer within "
                f"{FORWARD_WAIT:g}s; retry shortly",
                {"retry_after_seconds": 1},
            ) from None
        finally:
            self._replies.pop(rid, None)

    async def follow(self) -> None:
        """Be on the namespace's task channel (once): returns when the subscription is seen to work (a hello
        sent to it came back), StateUnavailable when it is not within READY_WAIT."""
        if self._ready.is_set():
            return
        if self._follower is None or self._follower.done():
            self._follower = asyncio.ensure_future(self._listen())
            self._follower.add_done_callback(lambda _: self._ready.clear())
        deadline = time.monotonic() + READY_WAIT
        while not self._ready.is_set():
            await self.store.publish(self.channel, json.dumps({"kind": "hello", "from": self.replica}))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), 0.2)
            if not self._ready.is_set() and time.monotonic() > deadline:
                raise StateUnavailable(
                    f"could not follow the MCP task channel of {self.namespace!r} on the state store; retry shortly",
                    {"retry_after_seconds": 1},
                )

    async def _listen(self) -> None:
        async for raw in self.store.subscribe(self.channel):
            if raw == RESYNC:  # changes sent while the store was lost are gone: listens get the tasks' state
                self._spawn(self._resync())
                continue
            try:
                message = json.loads(raw)
                kind, sender = message["kind"], message["from"]
            except (ValueError, KeyError, TypeError):
                continue
            if sender == self.replica:
                if kind == "hello":
                    self._ready.set()
            elif kind == "change" and isinstance(message.get("view"), dict):
                view = message["view"]
                self._tell(RemoteTask(str(view.get("taskId")), message.get("owner"), sender, view, 0.0, 0.0))
            elif kind == "request" and message.get("to") == self.replica:
                self._spawn(self._serve(message))
            elif kind == "reply" and message.get("to") == self.replica:
                waiting = self._replies.get(str(message.get("rid")))
                if waiting is not None and not waiting.done():
                    waiting.set_result(message)

    async def _resync(self) -> None:
        for task_id in [t for t in self.watched if t not in self._held]:
            with contextlib.suppress(StateUnavailable):
                if (found := await self._read(task_id)) is not None:
                    self._tell(found)

    async def _serve(self, message: dict[str, Any]) -> None:
        """Another replica's client cancels a task run here, or answers its input requests."""
        task = self.tasks.get(str(message.get("id")), message.get("owner"))
        if task is not None:
            if message.get("op") == "cancel":
                self.tasks.cancel(task)
            elif isinstance(responses := message.get("responses"), dict):  # checked there, and again here
                self.tasks.answer(task, {k: v for k, v in responses.items() if _fits(task.waiting_for(k), v)})
            with contextlib.suppress(StateUnavailable):  # written before the reply: any tasks/get then sees it
                await self._put(task)
        reply = {"kind": "reply", "to": message.get("from"), "from": self.replica, "rid": message.get("rid")}
        with contextlib.suppress(StateUnavailable):
            await self.store.publish(self.channel, json.dumps({**reply, "found": task is not None}))


def _fits(method: str | None, response: Any) -> bool:
    """Whether `response` answers an input request of `method` (None: nothing waits for it)."""
    if method is None or not isinstance(response, dict):
        return False
    try:
        check_answer(method, response)
    except ValidationError:
        return False
    return True


def _lost_error(replica: str) -> dict[str, Any]:
    return {"code": types.INTERNAL_ERROR, "message": lost(replica), "data": {"replica": replica}}
