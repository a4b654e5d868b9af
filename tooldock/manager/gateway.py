"""The manager's HTTP client for the gateway: the reload signal, health, namespaces, and tool calls.

`POST /reload` carries the bearer token, `X-Manager-Token` (MANAGER_INTERNAL_TOKEN) and comes from this
machine, as seed 000's `/reload` security asks. Every failure becomes a `GatewayError` that says where the
gateway was expected and what to check; tokens never appear in one.
"""

from __future__ import annotations

from typing import Any

import httpx

from tooldock.errors import GatewayError
from tooldock.runtime import requestid
from tooldock.runtime.observe import tracing

RELOAD_TIMEOUT = 900.0  # a reload may install dependencies or start containers


class GatewayClient:
    def __init__(self, url: str, bearer: str, manager_token: str | None) -> None:
        self.url, self._bearer, self._manager_token = url, bearer, manager_token
        self._http = httpx.AsyncClient(base_url=url, timeout=60.0, trust_env=False)

    async def close(self) -> None:
        await self._http.aclose()

    def _headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._bearer}", **extra}

    @staticmethod
    def _context() -> dict[str, str]:
        """The id of the manager request this serves (the gateway logs the same id) and, when tracing is on,
        the trace its spans join."""
        rid = requestid.current.get()
        return {**({"X-Request-Id": rid} if rid is not None else {}), **tracing.outgoing()}

    def auth_headers(self) -> dict[str, str]:
        """The bearer token and the request's context headers: for the manager's own MCP sessions on the
        gateway (manager.upstreamtools)."""
        return self._headers(**self._context())

    async def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        extra = self._context()
        if extra:
            kw["headers"] = {**(kw.get("headers") or {}), **extra}
        try:
            return await self._http.request(method, path, **kw)
        except httpx.TimeoutException:
            raise GatewayError(f"the gateway at {self.url} did not answer {method} {path} in time") from None
        except httpx.HTTPError as exc:
            raise GatewayError(
                f"the gateway at {self.url} is not reachable ({type(exc).__name__}); start it with "
                "`tooldock serve`, or point the manager at it with --gateway-url / TOOLDOCK_GATEWAY_URL"
            ) from None

    @staticmethod
    def _body(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            return {"error": {"message": response.text[:500]}}

    async def reload(self, retry_failed: bool = True) -> dict[str, Any]:
        if self._manager_token is None:
            raise GatewayError(
                "MANAGER_INTERNAL_TOKEN is not set: give the gateway and the manager the same value "
                "(`tooldock serve --manager` does this for you)"
            )
        response = await self._send(
            "POST",
            "/reload",
            params={} if retry_failed else {"retry_failed": "false"},
            headers=self._headers(**{"X-Manager-Token": self._manager_token}),
            timeout=RELOAD_TIMEOUT,
        )
        body = self._body(response)
        if response.status_code == 401:
            raise GatewayError("the gateway refused the bearer token: use the same TOOLDOCK_BEARER_TOKEN for both")
        if response.status_code != 200:
            message = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
            raise GatewayError(f"the gateway refused the reload ({response.status_code}): {message or body}")
        return dict(body)

    async def health(self) -> dict[str, Any] | None:
        try:
            response = await self._send("GET", "/health", timeout=5.0)
        except GatewayError:
            return None
        return dict(self._body(response)) if response.status_code == 200 else None

    async def namespaces(self) -> dict[str, dict[str, Any]]:
        """The gateway's `/namespaces` by name; empty when it is unreachable."""
        try:
            response = await self._send("GET", "/namespaces", headers=self._headers(), timeout=10.0)
        except GatewayError:
            return {}
        if response.status_code != 200:
            return {}
        return {n["name"]: n for n in self._body(response).get("namespaces", [])}

    async def call_tool(self, namespace: str, tool: str, arguments: dict[str, Any]) -> tuple[int, Any]:
        """Status and body of `POST /tools/{tool}`, asking for the tool's traceback when it fails."""
        response = await self._send(
            "POST",
            f"/tools/{tool}",
            json=arguments,
            headers=self._headers(**{"X-Namespace": namespace, "X-ToolDock-Traceback": "1"}),
            timeout=None,
        )
        return response.status_code, self._body(response)
