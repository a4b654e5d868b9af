"""What the manager's tools share: its settings, the tools directory, the secrets store, the gateway client,
the reloader, and how this backend installs a namespace's dependencies."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from tooldock.errors import BuilderError, ManagerError, RegistryError, SecretsError, ToolDockError
from tooldock.manager.gateway import GatewayClient
from tooldock.manager.rebuild import DockerRebuild
from tooldock.manager.reload import Reloader
from tooldock.manager.settings import ManagerSettings
from tooldock.manager.workspace import Workspace
from tooldock.runtime.backends.environments import Environments
from tooldock.runtime.observe import AuditLog
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
    # The process backend's worker environments (None on docker): write_tool compares imports with them.
    envs: Environments | None = None
    started: float = field(default_factory=time.monotonic)
    # File writes are quick; one lock makes concurrent write_tool calls on one file land one after the other.
    writes: asyncio.Lock = field(default_factory=asyncio.Lock)


AUDIT = AuditLog(None)  # replaced by the app: the gateway's audit log directory, `front_end: "manager"` lines


def edge(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """The one place manager errors become MCP tool errors (`isError` with the message), and where each
    manager tool call leaves its audit line (the tool and how it ended, never its arguments)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        started, status = time.perf_counter(), "error"
        try:
            result = await fn(*args, **kwargs)
            status = "ok"
            return result
        except (ManagerError, ToolDockError) as err:
            status = err.code
            raise ToolError(f"{err.code}: {err.message}") from None
        except (BuilderError, SecretsError, RegistryError) as exc:  # the builder, secrets store or registry refused
            raise ToolError(str(exc)) from None
        except OSError as exc:  # a disk problem: say which operation and why, never a traceback
            raise ToolError(f"filesystem error: {exc.strerror or exc} ({getattr(exc, 'filename', '') or ''})") from None
        finally:
            audit(fn.__name__, status, round((time.perf_counter() - started) * 1000, 2))

    return wrapper


def audit(tool: str, status: str, latency_ms: float) -> None:
    """A manager tool call's audit line: the tool and how it ended, never its arguments."""
    AUDIT.record(
        {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "front_end": "manager",
            "namespace": "_system",
            "method": "tools/call",
            "tool": tool,
            "status": status,
            "latency_ms": latency_ms,
        }
    )


def uptime(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h {minutes % 60}m" if minutes >= 60 else f"{minutes}m {int(seconds % 60)}s"


JsonObject = dict[str, Any]
