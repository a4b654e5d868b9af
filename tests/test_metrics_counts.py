"""The call metrics the gateway counts by hand (observe/metrics.py's CallCounts) read exactly as
prometheus_client's own Counter, Histogram and Gauge would for the same calls."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tooldock.runtime.observe.metrics import BUCKETS, Metrics

CALLS = [  # namespace, tool, front end, status, seconds (on and around bucket bounds)
    ("a", "add", "rest", "ok", 0.001),
    ("a", "add", "rest", "ok", 0.0010001),
    ("a", "add", "mcp", "tool_error", 0.25),
    ("b", "-", "mcp", "tool_not_found", 0.0),
    ("a", "add", "rest", "ok", 61.0),
    ("b", "echo", "relay", "ok", 2.5),
]


def _reference() -> bytes:
    registry = CollectorRegistry(auto_describe=True)
    calls = Counter("tooldock_calls", "Calls answered, by namespace, tool (or method), front end and status",
                    ["namespace", "tool", "front_end", "status"], registry=registry)
    latency = Histogram("tooldock_call_duration_seconds", "Call latency in the gateway, by namespace and front end",
                        ["namespace", "front_end"], buckets=BUCKETS, registry=registry)
    flying = Gauge("tooldock_calls_in_flight", "Calls in flight, by namespace", ["namespace"], registry=registry)
    for namespace, tool, front_end, status, seconds in CALLS:
        flying.labels(namespace).inc()
        flying.labels(namespace).dec()
        calls.labels(namespace, tool, front_end, status).inc()
        latency.labels(namespace, front_end).observe(seconds)
    flying.labels("c").inc()  # one call still running
    return generate_latest(registry)


def _ours() -> bytes:
    metrics = Metrics()
    for namespace, tool, front_end, status, seconds in CALLS:
        metrics.started(namespace)
        metrics.finished(namespace, tool, front_end, status, seconds)
    metrics.started("c")
    return metrics.render()


def _call_lines(text: bytes) -> list[str]:
    """The call metrics' lines, `_created` values blanked (they are clock readings)."""
    lines = [line for line in text.decode().splitlines() if "tooldock_call" in line]
    return [re.sub(r"^(tooldock_\w+_created\{.*\}) .*$", r"\1 T", line) for line in lines]


def test_call_metrics_read_as_prometheus_clients_own() -> None:
    ours, reference = _call_lines(_ours()), _call_lines(_reference())
    assert ours == reference
    assert 'tooldock_call_duration_seconds_bucket{front_end="rest",le="0.001",namespace="a"} 1.0' in ours
    assert 'tooldock_calls_in_flight{namespace="c"} 1.0' in ours
