"""The tasks a namespace's MCP server holds (the tasks extension, `runtime/mcp/tasks.py`): their state,
the client input they wait for (asked through `TaskRelay`, a task's end of a Context tool), and how long
they are kept. With gateway replicas, tasksharing.py writes each one through to the shared state store.

A task belongs to whoever created it (the API key, or the bearer token): another caller asking for its id
is told the id is unknown. Finished tasks are kept until `ttl` seconds after they were created (the
`ttlMs` clients are promised) and dropped after that; a running task is never dropped, since the
namespace's time limit ends it. At most `max_tasks` are held: the oldest finished ones make room, and
when all of them are still running a new one is refused.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import mcp_types as types
from pydantic import ValidationError

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
POLL_INTERVAL_MS = 500  # what clients are told to wait between `tasks/get` polls
# What a task may ask its client for, and the answer each takes (checked at `tasks/update`).
_ANSWERS: dict[str, Any] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,  # or CreateMessageResultWithTools
    "roots/list": types.ListRootsResult,
}


class TooManyTasks(Exception):
    pass


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Task:
    id: str
    owner: str | None  # the creating API key's id; None for the bearer token
    tool: str
    ttl_ms: int
    status: Status = "working"
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    status_message: str | None = None
    result: dict[str, Any] | None = None  # the tool's CallToolResult, once completed
    error: dict[str, Any] | None = None  # a JSON-RPC error object, once failed
    # Client input the tool waits for: key -> (the embedded request, the future its answer resolves).
    pending: dict[str, tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = field(default_factory=dict)
    runner: asyncio.Task[None] | None = None
    parked: asyncio.Event = field(default_factory=asyncio.Event)  # set when it first waits for input

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    def waiting_for(self, key: str) -> str | None:
        """The method of the input request `key` (None when the task is not waiting for it)."""
        found = self.pending.get(key)
        return str(found[0].get("method")) if found is not None else None

    def _fields(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "taskId": self.id,
            "status": self.status,
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.updated),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.status_message:
            body["statusMessage"] = self.status_message
        return body

    def created_result(self) -> dict[str, Any]:
        """The `tools/call` answer that started it: a flat `CreateTaskResult`."""
        return {"resultType": "task", **self._fields()}

    def detailed(self) -> dict[str, Any]:
        """The `tasks/get` answer: the task, with its result, error or pending input requests."""
        body = {"resultType": "complete", **self._fields()}
        if self.status == "completed" and self.result is not None:
            body["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            body["error"] = self.error
        elif self.status == "input_required":
            body["inputRequests"] = {key: request for key, (request, _) in self.pending.items()}
        return body


class TaskStore:
    def __init__(self, ttl: float, max_tasks: int, clock: Callable[[], float] = time.time) -> None:
        self.ttl, self.max_tasks, self._clock = ttl, max_tasks, clock
        self._tasks: dict[str, Task] = {}
        self._input_ids = itertools.count(1)
        # Told of every status change (tasklisten.py, tasksharing.py): of a Task, or a RemoteTask (tasksharing.py)
        self.listeners: set[Callable[[Any], None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def _expire(self) -> None:
        now = self._clock()
        for task in [t for t in self._tasks.values() if t.done and now >= t.created + self.ttl]:
            del self._tasks[task.id]

    def create(self, owner: str | None, tool: str) -> Task:
        self._expire()
        if len(self._tasks) >= self.max_tasks:
            finished = sorted((t for t in self._tasks.values() if t.done), key=lambda t: t.updated)
            for task in finished[: len(self._tasks) - self.max_tasks + 1]:
                del self._tasks[task.id]
        if len(self._tasks) >= self.max_tasks:
            raise TooManyTasks(f"{self.max_tasks} tasks are running in this namespace (MCP_MAX_TASKS); retry later")
        now = self._clock()
        task = Task(secrets.token_urlsafe(18), owner, tool, int(self.ttl * 1000), created=now, updated=now)
        self._tasks[task.id] = task
        return task

    def get(self, task_id: str, owner: str | None) -> Task | None:
        """The caller's task, or None: unknown, expired, or someone else's (all three look the same)."""
        self._expire()
        task = self._tasks.get(task_id)
        return task if task is not None and task.owner == owner else None

    def _touch(self, task: Task, status: Status) -> None:
        task.status, task.updated = status, self._clock()
        if status == "input_required":
            task.parked.set()
        for listener in list(self.listeners):
            listener(task)

    def discard(self, task: Task) -> None:
        """Forget a task no client was told about (its tool answered before it became one)."""
        self._tasks.pop(task.id, None)

    def finish(self, task: Task, status: Status, result: Any = None, error: Any = None) -> None:
        if task.done:  # cancelled first: what the tool did afterwards is not reported
            return
        task.result, task.error = result, error
        for _, waiting in task.pending.values():
            waiting.cancel()
        task.pending.clear()
        self._touch(task, status)

    def cancel(self, task: Task) -> None:
        """Cancelled at once (a finished task stays as it was); the tool's run is stopped behind it."""
        if task.done:
            return
        self.finish(task, "cancelled")
        if task.runner is not None:
            task.runner.cancel()

    def note(self, task: Task, message: str) -> None:
        if not task.done:
            task.status_message, task.updated = message, self._clock()

    async def ask(self, task: Task, request: dict[str, Any]) -> dict[str, Any]:
        """Park the task until the client answers `request` through `tasks/update`."""
        key = f"input-{next(self._input_ids)}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        task.pending[key] = (request, answer)
        self._touch(task, "input_required")
        try:
            return await answer
        finally:
            task.pending.pop(key, None)
            if not task.pending and not task.done:
                self._touch(task, "working")

    async def ask_all(self, task: Task, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Park the task until the client answered every one of a guard's `requests` (keys are the tool's)."""
        loop = asyncio.get_running_loop()
        waiting = {key: loop.create_future() for key in requests}
        task.pending.update({key: (requests[key], waiting[key]) for key in requests})
        self._touch(task, "input_required")
        try:
            return {key: await answer for key, answer in waiting.items()}
        finally:
            for key in requests:
                task.pending.pop(key, None)
            if not task.pending and not task.done:
                self._touch(task, "working")

    def answer(self, task: Task, responses: dict[str, dict[str, Any]]) -> None:
        """Hand each answer to the input it is for (keys the task is not waiting for are ignored)."""
        for key, response in responses.items():
            found = task.pending.get(key)
            if found is not None and not found[1].done():
                found[1].set_result(response)
                del task.pending[key]
        if not task.pending and task.status == "input_required":
            self._touch(task, "working")

    def cancel_all(self) -> None:
        for task in list(self._tasks.values()):
            self.cancel(task)


class TaskRelay:
    """A task's end of a Context tool (what `McpRelay` is for a plain call): progress messages become the
    task's `statusMessage`, log messages are dropped, and requests to the client wait in `inputRequests`."""

    def __init__(self, store: TaskStore, task: Task, client: dict[str, bool], session_key: Any) -> None:
        self.store, self.task, self.client, self.session_key = store, task, client, session_key
        self.request: dict[str, Any] = {}  # what the tool reads of the request that made the task (callcontext.py)

    def call_fields(self) -> dict[str, Any]:
        # A task is 2026-07-28 only: a question its client did not declare is -32021, raised inside the tool.
        fields = {"client": {**self.client, "inputRequired": True}, "progress": True, "logLevel": None}
        return {**fields, "request": self.request} if self.request else fields

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("op") == "event":
            data = message.get("data") or {}
            if message.get("event") == "progress":
                total = f"/{data['total']:g}" if isinstance(data.get("total"), (int, float)) else ""
                done = data.get("progress") or 0
                note = f"{done:g}{total}" if isinstance(done, (int, float)) else ""
                self.store.note(self.task, f"{note} {data.get('message') or ''}".strip())
            return None
        method, params = str(message.get("method")), message.get("params") or {}
        if method not in _ANSWERS:
            raise LookupError(f"a tool may not ask the client for {method!r}")
        return await self.store.ask(self.task, {"method": method, **({"params": params} if params else {})})


def check_answer(method: str, response: dict[str, Any]) -> None:
    """`response` is a `method` result (ValidationError when not)."""
    if method == "sampling/createMessage":
        try:
            types.CreateMessageResult.model_validate(response, by_name=False)
        except ValidationError:
            types.CreateMessageResultWithTools.model_validate(response, by_name=False)
        return
    _ANSWERS[method].model_validate(response, by_name=False)
