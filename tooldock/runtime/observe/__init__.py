"""What the gateway records about the calls it serves: the caller's context (front end, request id, key),
one audit line per call, and Prometheus metrics. Front ends set the context; the engine records."""

from tooldock.runtime.observe.audit import AuditLog, timestamp
from tooldock.runtime.observe.context import CallInfo, call_info, current_call
from tooldock.runtime.observe.metrics import Metrics

__all__ = ["AuditLog", "CallInfo", "Metrics", "call_info", "current_call", "timestamp"]
