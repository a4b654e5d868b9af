"""OpenTelemetry spans, when the OpenTelemetry SDK is installed (`pip install 'tooldock[otel]'`) and the
standard `OTEL_*` variables ask for traces: `OTEL_TRACES_EXPORTER` (`otlp`, `console`; `none` turns tracing
off) or an `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. The SDK itself reads the
rest (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, the exporter's endpoint,
headers and timeouts); `OTEL_SDK_DISABLED=true` turns it all off.

What is traced: every call the engine serves, one span per call (`tools/call add`, `resources/read ...`)
under the caller's context — the `traceparent` header on REST and legacy SSE (taken by the HTTP edge), the
`_meta.traceparent` of an MCP request (the MCP SDK's own server span, which ToolDock's span joins) — and a
client span for the hop to the worker, whose `traceparent` the worker is sent (it names the trace in its
log lines). The provider is installed globally, so the MCP SDK's spans go to the same exporter.

When tracing is off, `enabled()` is false and the call path pays one attribute lookup.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from tooldock.runtime import requestid

log = logging.getLogger("tooldock.tracing")
_tracer: Any = None  # an opentelemetry Tracer once `setup()` found tracing configured
_provider: Any = None


def enabled() -> bool:
    return _tracer is not None


def _wanted(env: dict[str, str]) -> list[str]:
    """The exporters the environment asks for ([] = tracing off)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if named:
        return [] if "none" in named else named
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return ["otlp"] if endpoint else []


def setup(env: dict[str, str] | None = None, service: str = "tooldock") -> bool:
    """Install the tracer provider the `OTEL_*` variables describe; False when they ask for no traces.
    `service`: the service name when OTEL_SERVICE_NAME does not give one (the manager is `tooldock-manager`)."""
    global _tracer, _provider
    exporters = _wanted(dict(os.environ if env is None else env))
    if not exporters or _tracer is not None:
        return _tracer is not None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.warning("OTEL_* asks for traces but the OpenTelemetry SDK is not installed: pip install 'tooldock[otel]'")
        return False
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or service})
    provider = TracerProvider(resource=resource)
    for name in exporters:
        if name == "console":  # stderr: stdout is for results
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
        elif name == "otlp":
            protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
                "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
            )
            kind = "grpc" if protocol == "grpc" else "http"  # http/protobuf is the default (and the [otel] extra)
            try:
                module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{kind}.trace_exporter")
            except ImportError:
                log.warning("OTLP traces over %s need opentelemetry-exporter-otlp-proto-%s installed", protocol, kind)
                continue
            provider.add_span_processor(BatchSpanProcessor(module.OTLPSpanExporter()))
        else:
            log.warning("OTEL_TRACES_EXPORTER=%s is not one ToolDock knows (otlp, console, none): ignored", name)
    trace.set_tracer_provider(provider)
    _provider, _tracer = provider, trace.get_tracer("tooldock")
    log.info("OpenTelemetry traces on (%s)", ", ".join(exporters))
    return True


def shutdown() -> None:
    """Flush the spans still queued (at gateway exit)."""
    if _provider is not None:
        with contextlib.suppress(Exception):
            _provider.shutdown()


# What incoming() and the spans are while tracing is off: one shared no-op context (a generator-based
# context manager per request, three of them on a call's way, was measurable on the lean MCP path).
_OFF: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def incoming(headers: list[tuple[bytes, bytes]]) -> contextlib.AbstractContextManager[None]:
    """The HTTP request's `traceparent` / `tracestate` as the current context for the block (the HTTP edge)."""
    return _OFF if _tracer is None else _incoming(headers)


@contextlib.contextmanager
def _incoming(headers: list[tuple[bytes, bytes]]) -> Iterator[None]:
    from opentelemetry import context, propagate

    carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k in (b"traceparent", b"tracestate")}
    token = context.attach(propagate.extract(carrier)) if carrier else None
    try:
        yield
    finally:
        if token is not None:
            context.detach(token)


def outgoing() -> dict[str, str]:
    """The current context as `traceparent` / `tracestate` headers for a request this process sends (the
    manager's calls to the gateway), so the receiver's spans join the trace; empty when tracing is off."""
    carrier: dict[str, str] = {}
    if _tracer is not None:
        from opentelemetry import propagate

        propagate.inject(carrier)
    return carrier


def call_span(method: str, name: str, namespace: str, front_end: str) -> contextlib.AbstractContextManager[Any]:
    """The span of one call the engine serves; gives it (None when tracing is off) for its status."""
    return _OFF if _tracer is None else _call_span(method, name, namespace, front_end)


@contextlib.contextmanager
def _call_span(method: str, name: str, namespace: str, front_end: str) -> Iterator[Any]:
    assert _tracer is not None
    from opentelemetry.trace import SpanKind, get_current_span

    # under the MCP SDK's server span (MCP) it is internal; otherwise it is the gateway's server span
    kind = SpanKind.INTERNAL if get_current_span().is_recording() else SpanKind.SERVER
    attributes = {"tooldock.namespace": namespace, "tooldock.front_end": front_end, "mcp.method.name": method}
    if method == "tools/call":
        attributes |= {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    rid = requestid.current.get()
    if rid is not None:
        attributes["tooldock.request_id"] = rid
    label = f"{method} {name}" if name else method
    with _tracer.start_as_current_span(label, kind=kind, attributes=attributes, record_exception=False) as span:
        yield span


def finish(span: Any, status: str) -> None:
    """Mark a call's span with its outcome (`ok`, `tool_error` or an error code)."""
    if span is None:
        return
    from opentelemetry.trace import StatusCode

    span.set_attribute("tooldock.status", status)
    if status != "ok":
        span.set_attribute("error.type", status)
        span.set_status(StatusCode.ERROR)


def worker_span(op: str, namespace: str, generation: int) -> contextlib.AbstractContextManager[None]:
    """The hop to the worker: a client span whose `traceparent` goes along with the request."""
    return _OFF if _tracer is None else _worker_span(op, namespace, generation)


@contextlib.contextmanager
def _worker_span(op: str, namespace: str, generation: int) -> Iterator[None]:
    assert _tracer is not None
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    attributes = {"tooldock.namespace": namespace, "tooldock.generation": generation}
    with _tracer.start_as_current_span(f"worker {op}", kind=SpanKind.CLIENT, attributes=attributes):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        token = requestid.traceparent.set(carrier.get("traceparent"))
        try:
            yield
        finally:
            requestid.traceparent.reset(token)
