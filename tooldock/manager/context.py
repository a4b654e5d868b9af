"""What the manager's tools share: its settings, the tools directory, the secrets store, the gateway client,
the reloader, and how this backend installs a namespace's dependencies."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from tooldock.errors import BuilderError, ManagerError, SecretsError
from tooldock.manager.gateway import GatewayClient
from tooldock.manager.rebuild import DockerRebuild
from tooldock.manager.reload import Reloader
from tooldock.manager.settings import ManagerSettings
from tooldock.manager.workspace import Workspace
from tooldock.secrets import SecretStore

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Manager:
    settings: ManagerSettings
    workspace: Workspace
    store: SecretStore
    gateway: GatewayClient
    reloader: Reloader
    installer: Callable[[Path], Awaitable[None]]
    docker: DockerRebuild | None = None
    port: int = 8001
    started: float = field(default_factory=time.monotonic)
    # File writes are quick; one lock makes concurrent write_tool calls on one file land one after the other.
    writes: asyncio.Lock = field(default_factory=asyncio.Lock)


def edge(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """The one place manager errors become MCP tool errors (`isError` with the message)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ManagerError as err:
            raise ToolError(f"{err.code}: {err.message}") from None
        except (BuilderError, SecretsError) as exc:  # the builder or the secrets store refused
            raise ToolError(str(exc)) from None
        except OSError as exc:  # a disk problem: say which operation and why, never a traceback
            raise ToolError(f"filesystem error: {exc.strerror or exc} ({getattr(exc, 'filename', '') or ''})") from None

    return wrapper


def uptime(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h {minutes % 60}m" if minutes >= 60 else f"{minutes}m {int(seconds % 60)}s"


JsonObject = dict[str, Any]
