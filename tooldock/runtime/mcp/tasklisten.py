"""Task status notifications (the tasks extension, SEP-2663): `notifications/tasks` on 2026-07-28
`subscriptions/listen` streams.

A client that declared the extension adds `taskIds` to its listen filter (`{"notifications": {"taskIds":
[...], "toolsListChanged": true, ...}}`); the acknowledgement echoes them, and every status change of those
tasks (its own tasks: another caller's ids never fire) arrives as `notifications/tasks` carrying the task as
`tasks/get` shows it at that moment (result, error or inputRequests included). A task that already has a
state is sent once right after the acknowledgement, so a client that subscribes late misses nothing.

The SDK's `ListenHandler` knows only the core kinds (list changes, resource updates), so a listen without
`taskIds` is handed to it unchanged; one with `taskIds` is served here, core kinds included.

With gateway replicas (tasksharing.py) a listen on any replica follows tasks run on any other: their state
comes from the store, their changes from the namespace's task channel, and a task whose replica stopped is
failed (and told) once its lease runs out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, event_matches, event_to_notification
from pydantic import BaseModel

from tooldock.errors import StateUnavailable
from tooldock.runtime.mcp.results import state_error
from tooldock.runtime.mcp.tasksharing import RemoteTask, TaskSharing
from tooldock.runtime.mcp.taskstore import Task, TaskStore

log = logging.getLogger(__name__)
MAX_TASK_IDS = 100  # task ids one listen stream may follow
MAX_STREAMS = 1024  # task listen streams open at once per namespace
BACKLOG = 1024  # notifications buffered per stream; a client that stops reading has its stream ended


class TaskNotification(BaseModel):
    """`notifications/tasks` (the SDK's notification unions do not have it: it is the extension's)."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


def _honored(requested: types.SubscriptionFilter, task_ids: list[str]) -> types.SubscriptionFilter:
    return types.SubscriptionFilter.model_validate(
        {
            "toolsListChanged": True if requested.tools_list_changed else None,
            "promptsListChanged": True if requested.prompts_list_changed else None,
            "resourcesListChanged": True if requested.resources_list_changed else None,
            "resourceSubscriptions": list(requested.resource_subscriptions or ()) or None,
            "taskIds": task_ids,
        }
    )


class TaskListen:
    def __init__(
        self,
        plain: Callable[..., Any],
        bus: InMemorySubscriptionBus,
        store: TaskStore,
        declared: Callable[[Any], bool],
        owner: Callable[[Any], str | None],
        sharing: TaskSharing | None = None,
    ) -> None:
        self.plain, self.bus, self.store, self.declared, self.owner = plain, bus, store, declared, owner
        self.sharing = sharing
        self._open = 0

    async def __call__(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        wanted = (params.notifications.model_extra or {}).get("taskIds")
        if wanted is None or not self.declared(ctx):
            return await self.plain(ctx, params)  # the core kinds only: the SDK's own handler
        if (
            not isinstance(wanted, list)
            or len(wanted) > MAX_TASK_IDS
            or not all(isinstance(t, str) and 0 < len(t) <= 200 for t in wanted)
        ):
            raise MCPError(
                types.INVALID_PARAMS, f"notifications.taskIds must be a list of at most {MAX_TASK_IDS} task ids"
            )
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        if self._open >= MAX_STREAMS:
            raise MCPError(types.INTERNAL_ERROR, "Subscription limit reached")
        owner, ids = self.owner(ctx), frozenset(wanted)
        honored = _honored(params.notifications, list(dict.fromkeys(wanted)))
        uris = frozenset(honored.resource_subscriptions or ())
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        send, recv = anyio.create_memory_object_stream[Any](BACKLOG)

        def put(item: Any) -> None:
            try:
                send.send_nowait(item)
            except anyio.WouldBlock:
                log.warning("listen stream %r backlog full; ending the stream", ctx.request_id)
                send.close()
            except anyio.ClosedResourceError:
                pass

        def on_event(event: Any) -> None:
            if event_matches(honored, uris, event):
                put(event)

        def on_task(task: Task | RemoteTask) -> None:
            if task.id in ids and task.owner == owner:
                put(task.detailed())

        if self.sharing is not None:  # on the task channel before the first state is read: no change missed
            try:
                await self.sharing.follow()
            except StateUnavailable as err:
                raise state_error(err) from err
            self.sharing.watch(ids)
        unsubscribe = self.bus.subscribe(on_event)
        self.store.listeners.add(on_task)
        self._open += 1
        try:
            listed = honored.model_extra["taskIds"] if honored.model_extra else ()
            remote: dict[str, RemoteTask | None] = {}  # tasks run by other replicas: read before the ack
            try:
                for task_id in listed:
                    if self.sharing is not None and self.store.get(task_id, owner) is None:
                        remote[task_id] = await self.sharing.find(task_id, owner)
            except StateUnavailable as err:
                raise state_error(err) from err
            ack = types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(params=ack), related_request_id=ctx.request_id
            )
            for task_id in listed:
                found: Task | RemoteTask | None = self.store.get(task_id, owner) or remote.get(task_id)
                if found is not None:
                    put(found.detailed())
            async for item in recv:
                if isinstance(item, dict):
                    task = {k: v for k, v in item.items() if k != "resultType"}
                    notification: Any = TaskNotification(params={**task, "_meta": meta})
                else:
                    notification = event_to_notification(item, meta)
                await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
        finally:
            self._open -= 1
            if self.sharing is not None:
                self.sharing.unwatch(ids)
            unsubscribe()
            self.store.listeners.discard(on_task)
            send.close()
            recv.close()
        return types.SubscriptionsListenResult(_meta=meta)
