"""Prometheus metrics (prometheus_client), on a registry of the gateway's own (several gateways in one
process, as in tests, never share counters).

Counted as they happen: calls by namespace, tool, front end and status; their latency; calls in flight;
reload durations. Read when scraped (so never stale, and nothing to keep in step): each namespace's
state, worker restarts and wake-ups, open MCP sessions and relay connections, audit lines dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A metric read at scrape time: name, help, label names, its reader, and its kind.
_Read = tuple[
    str, str, list[str], Callable[[], Iterable[tuple[list[str], float]]], type[GaugeMetricFamily | CounterMetricFamily]
]
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.calls = Counter(
            "tooldock_calls",
            "Calls answered, by namespace, tool (or method), front end and status",
            ["namespace", "tool", "front_end", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "tooldock_call_duration_seconds",
            "Call latency in the gateway, by namespace and front end",
            ["namespace", "front_end"],
            buckets=BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("tooldock_calls_in_flight", "Calls in flight, by namespace", ["namespace"], registry=r)
        self.reloads = Histogram(
            "tooldock_reload_duration_seconds",
            "Duration of reloads (rescan, start, swap)",
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.rate_limited = Counter(
            "tooldock_rate_limited", "Calls refused by a rate limit, by namespace", ["namespace"], registry=r
        )
        self._scraped: list[_Read] = []
        r.register(_Scraped(self._scraped))
        # The labelled children, by their label values: `labels()` takes a lock and checks its arguments
        # on every call, three times per call here; the children it returns never change (nothing removes one).
        self._children: dict[tuple[Any, ...], Any] = {}
        self._finished: dict[tuple[str, str, str, str], tuple[Any, Any, Any]] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def started(self, namespace: str) -> None:
        """A call began: in flight until `finished`."""
        self._child(self.in_flight, namespace).inc()

    def finished(self, namespace: str, tool: str, front_end: str, status: str, seconds: float) -> None:
        key = (namespace, tool, front_end, status)
        children = self._finished.get(key)
        if children is None:  # the three children a call of this kind touches, looked up once
            children = self._finished[key] = (
                self._child(self.in_flight, namespace),
                self._child(self.calls, namespace, tool, front_end, status),
                self._child(self.latency, namespace, front_end),
            )
        children[0].dec()
        children[1].inc()
        children[2].observe(seconds)

    def gauge(
        self, name: str, doc: str, labels: list[str], read: Callable[[], Iterable[tuple[list[str], float]]]
    ) -> None:
        """A value read at scrape time: `read()` yields (label values, value)."""
        self._scraped.append((name, doc, labels, read, GaugeMetricFamily))

    def counter(
        self, name: str, doc: str, labels: list[str], read: Callable[[], Iterable[tuple[list[str], float]]]
    ) -> None:
        """A count kept elsewhere (a plain integer on a hot path), read at scrape time as `<name>_total`."""
        self._scraped.append((name, doc, labels, read, CounterMetricFamily))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Scraped(Collector):
    def __init__(self, metrics: list[_Read]):
        self.metrics = metrics  # gauges and counters, read at each scrape

    def collect(self) -> Iterable[Metric]:
        for name, doc, labels, read, kind in self.metrics:
            family = kind(name, doc, labels=labels)
            try:
                rows: Any = list(read())
            except Exception:  # a scrape never fails because one reader did
                rows = []
            for values, value in rows:
                family.add_metric(values, value)
            yield family

    def describe(self) -> Iterable[Metric]:
        return []
