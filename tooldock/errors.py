"""Every error ToolDock reports to a user, in one place.

    ToolDockError                      500 internal_error
    ├── BadRequest                     400 bad_request
    │   ├── MissingNamespace           400 missing_namespace
    │   └── InvalidJSON                400 invalid_json
    ├── Unauthorized                   401 unauthorized
    │   ├── InvalidApiKey              401 invalid_api_key   (an unknown, revoked or expired API key)
    │   └── InvalidToken               401 invalid_token     (an OAuth access token refused: expired, forged, ...)
    ├── Forbidden                      403 forbidden
    │   └── NotInScope                 403 not_in_scope      (an API key's scope does not cover the namespace or tool)
    │       └── InsufficientScope      403 insufficient_scope (an OAuth token lacks the scope a call needs)
    ├── NamespaceNotFound              404 namespace_not_found
    ├── ToolNotFound                   404 tool_not_found
    ├── ToolInactive                   409 tool_inactive     (an upstream tool not activated in this session)
    ├── PayloadTooLarge                413 payload_too_large
    ├── InvalidArguments               422 invalid_arguments
    ├── NamespaceUnavailable           503 namespace_unavailable
    │   ├── WorkerRetired              503 (the engine retries the call on the namespace's new worker)
    │   └── UpstreamUnavailable        503 upstream_unavailable (an upstream MCP server is down or starting)
    ├── UpstreamError                  502 upstream_error    (an upstream JSON-RPC error: relayed as is on MCP)
    ├── StateUnavailable               503 state_unavailable (the shared state store did not answer: retry)
    ├── IssuerUnavailable              503 issuer_unavailable (the OAuth issuer's metadata or keys unreachable)
    ├── ExecutionTimeout               504 execution_timeout
    ├── ToolFailed                     500 internal_error    (the tool raised, or the worker failed)
    ├── DependencyError                500 dependency_error  (an import inside the tool failed)
    ├── WorkerCrashed                  500 internal_error    (the worker died during the call)
    └── ReloadFailed                   500 reload_failed     (the tools directory could not be scanned)

    BuilderError                       `tooldock build` / `tooldock base` (CLI message, exit 1)
    ├── BuildError, LayoutError        invalid namespace or base layout
    ├── LockError, SchemaError         uv could not lock/install; tools failed to import with the lock
    ├── BaseError                      the Debian base could not be made
    ├── DaemonError, RegistryError     the Docker engine or a registry refused or is unreachable
    └── DeployError                    `tooldock deploy / stop`: no such image, no labels, never became ready

    SecretsError                       the secrets store (CLI message, exit 1; gateway start-up stops)
    ├── NoIdentity                     no key file, or no identity in it opens the store
    ├── StoreCorrupt                   a value or the MAC fails its check, or the file is not sops + age
    ├── InvalidSecretInput             a bad name, value, recipient or namespace
    └── EditFailed                     `tooldock secrets edit`: the editor failed or the result is invalid
    No secret value is ever part of an error message.

    ManagerError                       a manager tool refused (MCP: an `isError` result with the message)
    ├── InvalidInput                   a bad name, a path that leaves its folder, oversized or non-UTF-8 code
    ├── AlreadyExists                  create_namespace on a name that exists
    ├── Missing                        no such namespace or file
    ├── GatewayError                   the gateway is unreachable or refused the reload signal
    └── AnalysisError                  analyze_repo / read_repo_file / a package fetch refused (status 400)
        └── FetchFailed                git, npm or PyPI unreachable or answered something unusable (502)

    RegistryError                      the MCP Registry is unreachable, or answered something unusable

    KeysError                          the API key store (CLI message, exit 1): a bad name, scope, glob,
                                       duration or id, or a keys file that cannot be read. Never a key.

Each gateway error carries its HTTP status and its worker-protocol code. They are converted in exactly
three places: the REST error response (`runtime.http.responses`), the MCP tool result (`runtime.mcp.server`) and the CLI
message (`cli`); manager errors in one more, the manager's MCP tool result (`manager.context`). Nothing else
inspects error text.
"""

from __future__ import annotations

from typing import Any


class ToolDockError(Exception):
    """Any gateway error: its HTTP `status` and its `code` travel with it to every front end."""

    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


class BadRequest(ToolDockError):
    """The request is malformed: the message says which part and how to fix it."""

    status, code = 400, "bad_request"


class MissingNamespace(BadRequest):
    """A namespaced endpoint was called without `X-Namespace` (or `/ns/{namespace}/...`), or with an empty one."""

    code = "missing_namespace"


class InvalidJSON(BadRequest):
    """The body is not JSON, or not the JSON object the endpoint takes."""

    code = "invalid_json"


class Unauthorized(ToolDockError):
    """No bearer token, or a wrong one (`WWW-Authenticate: Bearer` is sent)."""

    status, code = 401, "unauthorized"


class InvalidApiKey(Unauthorized):
    """An unknown, revoked or expired API key."""

    code = "invalid_api_key"


class Forbidden(ToolDockError):
    """The caller may not do this: a source address outside `INTERNAL_ALLOWED_CIDRS`, a wrong manager token,
    a refused `Origin`."""

    status, code = 403, "forbidden"


class NotInScope(Forbidden):
    """An API key's scope does not cover the namespace or tool."""

    code = "not_in_scope"


class InvalidToken(Unauthorized):
    """An OAuth access token that was refused: expired, not yet valid, forged, for another resource or from
    another issuer, or one the issuer's introspection says is inactive. The message says which, never the token."""

    code = "invalid_token"


class InsufficientScope(NotInScope):
    """An OAuth access token whose scopes do not allow the call; `details["scope"]` names the scope it needs,
    `challenge` is the `WWW-Authenticate` value the HTTP answer carries."""

    code = "insufficient_scope"

    def __init__(self, message: str, details: dict[str, Any] | None = None, challenge: str | None = None) -> None:
        super().__init__(message, details)
        self.challenge = challenge


class IssuerUnavailable(ToolDockError):
    """The OAuth issuer's discovery document or keys could not be fetched, or are unusable: retry."""

    status, code = 503, "issuer_unavailable"


class OAuthConfigError(ValueError):
    """A TOOLDOCK_OAUTH_* setting that cannot be used (start-up stops with the message)."""


class NamespaceNotFound(ToolDockError):
    """No namespace of that name is served (the message lists the ones there are)."""

    status, code = 404, "namespace_not_found"


class ToolNotFound(ToolDockError):
    """The namespace has no tool of that name (or not in the version asked for)."""

    status, code = 404, "tool_not_found"


class NotFound(ToolDockError):
    """No resource with that URI, or no prompt with that name, in the namespace."""

    status, code = 404, "not_found"


class PayloadTooLarge(ToolDockError):
    """The request body is over `TOOLDOCK_MAX_BODY_BYTES`."""

    status, code = 413, "payload_too_large"


class InvalidArguments(ToolDockError):
    """The arguments do not match the tool's input schema; `details` says which ones and why."""

    status, code = 422, "invalid_arguments"


class NamespaceUnavailable(ToolDockError):
    """The namespace's worker is starting, restarting or failed: retry (a `Retry-After` header says when)."""

    status, code = 503, "namespace_unavailable"


class WorkerRetired(NamespaceUnavailable):
    """The worker is being replaced; a call that reached it late goes to the new one instead."""


class ToolInactive(ToolDockError):
    """An upstream namespace's tool or resource that exists but is not active in the caller's session."""

    status, code = 409, "tool_inactive"


class UpstreamUnavailable(NamespaceUnavailable):
    """An upstream MCP server of the namespace is down or still starting."""

    code = "upstream_unavailable"


class UpstreamError(ToolDockError):
    """An upstream MCP server answered a request with a JSON-RPC error. MCP callers get that error as the
    upstream sent it (`details`: `rpc_code`, `rpc_message`, `rpc_data`); REST callers get a 502."""

    status, code = 502, "upstream_error"


class RateLimited(ToolDockError):
    """A namespace's or an API key's rate limit: retry after `details.retry_after_seconds`."""

    status, code = 429, "rate_limited"


class StateUnavailable(ToolDockError):
    """The shared state store (`TOOLDOCK_STATE_URL`) did not answer in time: retry after
    `details.retry_after_seconds`; what needs no shared state goes on working."""

    status, code = 503, "state_unavailable"


class ExecutionTimeout(ToolDockError):
    """The call ran past its time limit (`TOOL_CALL_TIMEOUT_SECONDS` or the namespace's `limits.timeout`)."""

    status, code = 504, "execution_timeout"


class ToolFailed(ToolDockError):
    """The tool raised an exception, or the worker failed; the message is the tool's error."""

    status, code = 500, "internal_error"


class DependencyError(ToolDockError):
    """An import inside the tool failed (a package its namespace's requirements do not install)."""

    status, code = 500, "dependency_error"


class WorkerCrashed(ToolDockError):
    """The worker died during the call; the gateway restarts it."""

    status, code = 500, "internal_error"


class ReloadFailed(ToolDockError):
    """`POST /reload` could not scan the tools directory; the namespaces served before stay served."""

    status, code = 500, "reload_failed"


class BuilderError(Exception):
    """A build step failed; the message says what and what to do. The CLI prints it and exits 1."""


class DeployError(BuilderError):
    """Deploying or stopping a worker container failed."""


# Worker-protocol error codes (seed 000, "Worker Runtime Contract") -> the error a caller sees.
_BY_WORKER_CODE: dict[str, type[ToolDockError]] = {
    "tool_not_found": ToolNotFound,
    "invalid_arguments": InvalidArguments,
    "dependency_error": DependencyError,
    "execution_timeout": ExecutionTimeout,
    "internal_error": ToolFailed,
    "not_found": NotFound,
}


def from_worker(error: dict[str, Any]) -> ToolDockError:
    """Turn a worker's `{"code", "message", "details"}` error object into a typed error."""
    cls = _BY_WORKER_CODE.get(str(error.get("code")), ToolDockError)
    details = error.get("details") if isinstance(error.get("details"), dict) else None
    return cls(str(error.get("message") or "worker error"), details)


class SecretsError(Exception):
    """The secrets store refused or cannot be read. Messages name files, paths and keys, never values."""


class NoIdentity(SecretsError):
    """No age key file, or no identity in it opens the store (the message names the key file and the store's
    recipients)."""


class StoreCorrupt(SecretsError):
    """A value or the store's MAC fails its check, or the file is not sops + age."""


class InvalidSecretInput(SecretsError):
    """A bad secret name, value, recipient or namespace."""


class EditFailed(SecretsError):
    """`tooldock secrets edit`: the editor failed or the edited file is invalid (the store is left as it was)."""


class ManagerError(Exception):
    """A manager tool refused: the message says what was wrong and what to do next."""

    code = "manager_error"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidInput(ManagerError):
    """A bad name, a path that leaves its folder, oversized or non-UTF-8 code."""

    code = "invalid_input"


class AlreadyExists(ManagerError):
    """`create_namespace` on a name that exists."""

    code = "already_exists"


class Missing(ManagerError):
    """No such namespace or file."""

    code = "not_found"


class GatewayError(ManagerError):
    """The gateway is unreachable or refused the reload signal."""

    code = "gateway_error"


class AnalysisError(ManagerError):
    """Repository analysis refused: a bad URL or path, a limit exceeded, a file that is not text."""

    status, code = 400, "analysis_error"


class FetchFailed(AnalysisError):
    """A clone, `git ls-remote` or package download failed on the remote side (or timed out)."""

    status, code = 502, "fetch_failed"


class RegistryError(Exception):
    """The MCP Registry (MCP_REGISTRY_URL) is unreachable or answered something unusable; the message says
    which URL and what to check."""


class KeysError(Exception):
    """The API key store refused or cannot be read. Messages name the file, the key id or the input that
    was wrong, never a key."""
