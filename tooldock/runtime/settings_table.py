"""The gateway's settings as its users read them: every environment variable `tooldock serve` reads, with its
default and meaning (docs/reference/settings.md is generated from this table; settings.py parses them)."""

from __future__ import annotations

from tooldock.envvars import EnvVar

# Every environment variable the gateway reads, with its default and meaning: the settings reference
# (docs/reference/settings.md) is generated from these. MCP_REGISTRY_URL is read by tooldock.upstream.registry.
SETTINGS_TITLE = "Gateway (`tooldock serve`)"
SETTINGS_INTRO = (
    "Environment variables read by `tooldock serve`; an invalid value stops start-up with a message naming it. "
    "Workers get a minimal environment: `PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ`, `TMPDIR`, `SSL_CERT_FILE`, "
    "`SSL_CERT_DIR`, plus the namespace's `env:` — never the gateway's tokens."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_BEARER_TOKEN",
        "generated per run",
        "token clients send as `Authorization: Bearer ...` (at least 8 characters; `BEARER_TOKEN` is accepted as an "
        "alias). If unset, a random token is generated and printed once on stderr.",
    ),
    EnvVar(
        "BEARER_TOKEN",
        "—",
        "seed 000's name for `TOOLDOCK_BEARER_TOKEN`, used when that (and `TOOLDOCK_BEARER_TOKEN_FILE`) is unset; "
        "the same rules apply (at least 8 characters). There is no `BEARER_TOKEN_FILE`",
    ),
    EnvVar(
        "TOOL_CALL_TIMEOUT_SECONDS",
        "`30`",
        "per-call timeout, enforced by the gateway (a namespace's `limits.timeout` overrides it)",
    ),
    EnvVar(
        "NAMESPACE_MAX_CONCURRENCY",
        "`16`",
        "calls in flight per namespace; more wait their turn within the timeout (`limits.concurrency` overrides it)",
    ),
    EnvVar(
        "TOOLDOCK_STATE_DIR",
        "`~/.cache/tooldock`",
        "where worker virtualenvs are cached (`envs/<hash>`); `serve` and `check --import` make it and stop with "
        "one line naming it when this user cannot write there",
    ),
    EnvVar(
        "MANAGER_INTERNAL_TOKEN",
        "unset",
        "enables `POST /reload`; callers must send it as `X-Manager-Token`",
    ),
    EnvVar(
        "INTERNAL_ALLOWED_CIDRS",
        "`127.0.0.1/32,::1/128`",
        "source networks allowed to call `POST /reload`",
    ),
    EnvVar(
        "TOOLDOCK_MAX_BODY_BYTES",
        "`4194304`",
        "largest request body accepted (413 above it)",
    ),
    EnvVar(
        "TOOLDOCK_WORKER_START_TIMEOUT",
        "`120`",
        "seconds a worker may take to install and import before it counts as failed",
    ),
    EnvVar(
        "TOOLDOCK_DRAIN_TIMEOUT",
        "`30`",
        "seconds a replaced worker may spend finishing in-flight calls before it is stopped; also how long a "
        "gateway told to stop waits for its own calls in flight (see `TOOLDOCK_SHUTDOWN_GRACE`)",
    ),
    EnvVar(
        "TOOLDOCK_SHUTDOWN_GRACE",
        "`0`; `2` with `TOOLDOCK_STATE_URL`",
        "seconds a gateway sent SIGTERM serves on while `/health` answers 503 `draining` (and every answer "
        "closes its connection), so a load balancer takes it out before it stops accepting; then it finishes "
        "its calls in flight and tells its event streams' clients to reconnect "
        "([scaling out](../howto/scaling-out.md#stopping-a-replica)). Ctrl-C (SIGINT) skips it",
    ),
    EnvVar(
        "TOOLDOCK_RESTART_BACKOFF",
        "`0.5`",
        "first restart delay after a worker dies; doubles per consecutive failure, capped at 30 s",
    ),
    EnvVar(
        "TOOLDOCK_STUCK_AFTER",
        "`5`",
        "seconds a call may run on in its worker after its caller gave up (a sync tool's thread, an async tool "
        "blocking its event loop) before the worker is replaced (see "
        "[Stuck workers](../explanation/architecture.md#stuck-workers))",
    ),
    EnvVar(
        "TOOLDOCK_LIVENESS_INTERVAL",
        "`30`",
        "seconds between liveness pings of an idle worker (no call in flight): one that does not answer within 3 s "
        "has its event loop blocked with nothing to show for it (a tool's background task calling blocking code, a "
        "deadlock) and is replaced as a stuck one is, before a caller waits out its time limit on it; `off`: no pings",
    ),
    EnvVar(
        "TOOLDOCK_LEAN_MCP",
        "`true`",
        "MCP's lean path: on an established 2025-era session, `tools/call` of a tool that takes no `Context`, "
        "`tools/list` and `ping` are answered as one JSON response without the SDK's per-message machinery, and "
        "`tools/call` of a Context tool as one SSE stream written the SDK's way, its questions to the client "
        "included (same results, notifications, questions and errors; see "
        "[Architecture](../explanation/architecture.md)); `false` sends everything through the SDK",
    ),
    EnvVar(
        "TOOLDOCK_LEAN_REST",
        "`true`",
        "`POST /tools/{name}` (and `/ns/{namespace}/tools/{name}`) answered by a plain ASGI handler before "
        "FastAPI's routing, dependency and exception layers, with the same answers (`tests/test_hot_rest.py`); "
        "`false` routes it through FastAPI",
    ),
    EnvVar(
        "TOOLDOCK_INLINE_SCHEMA_REFS",
        "`false`",
        "MCP `tools/list` sends tool schemas with their `$defs` / `$ref`s inlined, as FastMCP's default "
        "(`dereference_schemas`) does, for clients that do not follow `$ref` (VS Code's Copilot); `false` sends "
        "them as declared, as the spec asks (see [MCP](mcp.md))",
    ),
    EnvVar(
        "TOOLDOCK_FORK_WORKERS",
        "`true`",
        "process backend: fork each worker from a warm interpreter per environment (about 10 MB private memory and "
        "40 ms to start, against 70 MB and 2 s spawned); `false` spawns every worker as a new process",
    ),
    EnvVar(
        "TOOLDOCK_DNS_REBINDING_PROTECTION",
        "`true`",
        "when listening on loopback, `/mcp` checks `Host` is loopback and `Origin` is loopback (or in "
        "`MCP_ALLOWED_ORIGINS` when set): the SDK's DNS-rebinding protection",
    ),
    EnvVar(
        "TOOLDOCK_SOCKET_DIR",
        "`$TOOLDOCK_STATE_DIR/sockets`",
        "docker backend and `deploy`: host directory holding one sub-directory per worker container, mounted at "
        "`/run/tooldock` in it (keep the path short: unix socket paths are limited to ~100 bytes)",
    ),
    EnvVar(
        "ENABLE_LEGACY_MCP",
        "`true`",
        "serve the legacy HTTP+SSE transport at `/sse` + `/messages`",
    ),
    EnvVar(
        "MCP_SESSION_TTL_HOURS",
        "`24`",
        "hours an MCP session may go idle (no request in flight and no open `GET` stream) before it is closed "
        "(within a hundredth of that, at most a second, after it; the countdown is not moved on every request); its "
        "`Mcp-Session-Id` then answers 404 and the client must initialize again. Fractions allowed, must be > 0",
    ),
    EnvVar(
        "MCP_MAX_SESSIONS",
        "`10000`",
        "open MCP sessions per namespace; while that many are open, another `initialize` answers 503 (open sessions "
        "are unaffected)",
    ),
    EnvVar(
        "MCP_EVENT_BUFFER",
        "`100`",
        "SSE events kept per stream for `Last-Event-ID` replay (per namespace at most "
        "100 × this many events and about 64 MiB; the oldest go first)",  # noqa: RUF001
    ),
    EnvVar(
        "MCP_SSE_RETRY_MS",
        "`1000`",
        "the `retry:` (milliseconds) sent in SSE priming events: how long a client waits before reconnecting",
    ),
    EnvVar(
        "MCP_ALLOWED_ORIGINS",
        "unset",
        "comma-separated browser origins allowed on `/mcp`, `/sse` and `/messages`, e.g. "
        "`https://app.example.com,http://localhost:*` (`:*` = any port); a request whose `Origin` is not listed "
        "gets 403, one without `Origin` (non-browser clients) passes. Checked on every bind; on loopback binds it "
        "replaces the default loopback origins",
    ),
    EnvVar(
        "MCP_TASK_TTL_SECONDS",
        "`3600`",
        "how long an MCP [task](mcp.md#tasks) stays readable, counted from its creation (its `ttlMs`); a finished "
        "task is dropped after that, a running one only when it ends",
    ),
    EnvVar(
        "MCP_MAX_TASKS",
        "`1000`",
        "MCP tasks held per namespace: the oldest finished ones make room; when that many are still running, a new "
        "task is refused (-32603)",
    ),
    EnvVar(
        "CORS_ORIGINS",
        "unset",
        "comma-separated browser origins whose pages may call the gateway and read its answers (CORS), e.g. "
        "`https://app.example.com,http://localhost:*`, or `*` for any; unset: no CORS headers at all. Preflights "
        "(`OPTIONS`) are answered without a token; answers expose `X-Request-Id`, `Mcp-Session-Id`, "
        "`WWW-Authenticate` and `Retry-After`. Covers every route; on `/mcp`, `/sse` and `/messages` the `Origin` "
        "must also pass `MCP_ALLOWED_ORIGINS` (or the loopback default)",
    ),
    EnvVar(
        "TOOLDOCK_LOG_FORMAT",
        "`text`",
        "`json`: every line on stderr is one JSON object (`time`, `level`, `logger`, `message`, and `request_id` / "
        "`exc` when there is one), the lines of workers, the manager (`--manager`) and access lines included (see "
        "[Logs](../howto/observability.md#logs-and-request-ids))",
    ),
    EnvVar(
        "TOOLDOCK_ACCESS_LOG",
        "`false`",
        '`true`: uvicorn\'s line per request (`"POST /tools/add HTTP/1.1" 200`), off by default',
    ),
    EnvVar(
        "TOOLDOCK_LOG_DIR",
        "`$TOOLDOCK_STATE_DIR/logs`",
        "the audit log's directory: one `YYYY-MM-DD.jsonl` per day (see "
        "[Audit log](../howto/observability.md#audit-log)); `off` turns it off",
    ),
    EnvVar(
        "LOG_RETENTION_DAYS",
        "`30`",
        "daily audit files older than this are removed",
    ),
    EnvVar(
        "METRICS_TOKEN",
        "unset",
        "a second token that opens `GET /metrics` only (at least 8 characters); the bearer token opens it too",
    ),
    EnvVar(
        "TOOLDOCK_STATE_KEY",
        "generated per run",
        "the secret that seals the `requestState` of MCP 2026-07-28 "
        "[input-required results](mcp.md#input-required-results-2026-07-28) (AES-256-GCM, see there): at least 32 "
        'bytes, e.g. `python -c "import secrets; print(secrets.token_urlsafe(32))"`. Give every replica behind '
        "one load balancer the same value, so a client's retry may reach any of them. Several keys separated by "
        "commas rotate it: the first seals, every one opens (`new,old`, then `new` once "
        "`TOOLDOCK_STATE_TTL_SECONDS` has passed). Unset: a key of this run only, so a retry after a restart (or at "
        "another replica) is refused. Required when `TOOLDOCK_STATE_URL` is set (replicas also tag the ids of "
        "2025-era MCP sessions with it: a replica adopts only sessions whose id a gateway with one of its keys "
        "minted); `serve --replicas N` generates one for its replicas when it is unset",
    ),
    EnvVar(
        "TOOLDOCK_STATE_TTL_SECONDS",
        "`600`",
        "how long a client has to retry an input-required request: an older `requestState` is refused (-32602 "
        '"Invalid or expired requestState")',
    ),
    EnvVar(
        "TOOLDOCK_BEARER_TOKEN_FILE",
        "unset",
        "read `TOOLDOCK_BEARER_TOKEN` from a file instead (its text, surrounding whitespace and the final newline "
        "taken off): compose and Docker secrets are mounted as files (`/run/secrets/...`), and a value in a file is "
        "not in the environment that `docker inspect` and `/proc/<pid>/environ` show. Setting both a variable and "
        "its `_FILE` is an error; an unreadable, empty, non-UTF-8 or over-64-KB file stops the start with the "
        "variable and the path named (never the value). `serve --manager` passes the files on to the manager",
    ),
    EnvVar(
        "MANAGER_INTERNAL_TOKEN_FILE",
        "unset",
        "read `MANAGER_INTERNAL_TOKEN` from a file instead (its text, surrounding whitespace and the final newline "
        "taken off): compose and Docker secrets are mounted as files (`/run/secrets/...`), and a value in a file is "
        "not in the environment that `docker inspect` and `/proc/<pid>/environ` show. Setting both a variable and "
        "its `_FILE` is an error; an unreadable, empty, non-UTF-8 or over-64-KB file stops the start with the "
        "variable and the path named (never the value). `serve --manager` passes the files on to the manager",
    ),
    EnvVar(
        "METRICS_TOKEN_FILE",
        "unset",
        "read `METRICS_TOKEN` from a file instead (its text, surrounding whitespace and the final newline taken "
        "off): compose and Docker secrets are mounted as files (`/run/secrets/...`), and a value in a file is not "
        "in the environment that `docker inspect` and `/proc/<pid>/environ` show. Setting both a variable and its "
        "`_FILE` is an error; an unreadable, empty, non-UTF-8 or over-64-KB file stops the start with the variable "
        "and the path named (never the value). `serve --manager` passes the files on to the manager",
    ),
    EnvVar(
        "TOOLDOCK_STATE_KEY_FILE",
        "unset",
        "read `TOOLDOCK_STATE_KEY` from a file instead (its text, surrounding whitespace and the final newline "
        "taken off): compose and Docker secrets are mounted as files (`/run/secrets/...`), and a value in a file is "
        "not in the environment that `docker inspect` and `/proc/<pid>/environ` show. Setting both a variable and "
        "its `_FILE` is an error; an unreadable, empty, non-UTF-8 or over-64-KB file stops the start with the "
        "variable and the path named (never the value). `serve --manager` passes the files on to the manager",
    ),
    EnvVar(
        "TOOLDOCK_SWAGGER_UI_DIR",
        "unset",
        "a folder holding Swagger UI's `swagger-ui-bundle.js` and `swagger-ui.css` (the npm package "
        "`swagger-ui-dist`: `npm pack swagger-ui-dist@5.35.0 && tar xzf swagger-ui-dist-5.35.0.tgz` gives "
        "`package/`): the gateway serves them itself at `/docs/swagger-ui-bundle.js` and `/docs/swagger-ui.css` (no "
        "token, an ETag for revalidation) and the `/docs` pages load them from there, for browsers that cannot "
        "reach jsDelivr. Read once at start; a folder without them stops the start with what is missing",
    ),
    EnvVar(
        "ENABLE_FS_WATCHER",
        "`false`",
        "reload after edits under the tools directory, made by the manager or anyone else: `serve --watch`'s "
        "default (with `--manager`, and for `tooldock manager`, the manager watches)",
    ),
    EnvVar(
        "FS_WATCHER_DEBOUNCE_MS",
        "`1500`",
        "quiet time (ms) that ends a burst of edits: one reload per burst",
    ),
    EnvVar(
        "TOOLDOCK_STATE_URL",
        "unset",
        "where the gateway keeps the state its replicas share ([scaling out](../howto/scaling-out.md)): unset, in "
        "this process (the embedded default); `redis://[:password@]host[:port][/db]`, `rediss://...` (TLS) or "
        "`unix:///path/redis.sock[?db=N]`, on that Redis server, shared by every gateway given the same URL "
        "(2025-era MCP sessions, the rate limits' buckets and the reload signal). A Redis that cannot be "
        "reached stops the start with the URL (never its password) and the error; one lost while serving makes "
        "what needs it answer 503 `state_unavailable` with `Retry-After` within about a second, until it is back "
        "(no restart needed)",
    ),
    EnvVar(
        "TOOLDOCK_STATE_URL_FILE",
        "unset",
        "read `TOOLDOCK_STATE_URL` (which may hold Redis's password) from a file instead, as the other `_FILE` "
        "settings: not in the environment `docker inspect` shows",
    ),
    EnvVar(
        "MCP_REGISTRY_URL",
        "`https://registry.modelcontextprotocol.io`",
        'the MCP Registry that `registry = "..."` upstream servers (and the manager\'s registry tools) are looked '
        "up in; `http(s)://host[/prefix]`, its `/v0.1` API is used",
    ),
)
