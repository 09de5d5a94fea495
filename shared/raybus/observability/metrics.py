"""Prometheus metrics: one registry per process, served on the service's metrics port."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

DEAD_LETTERS = Counter("raybus_dead_letters_total", "Undecodable bus messages sent to the DLQ",
                       ["service", "subject_kind"])
MESSAGES = Counter("raybus_messages_total", "Bus messages handled", ["service", "kind", "outcome"])
RECONCILES = Counter("raybus_reconciles_total", "Reconciles run", ["controller", "result"])
RECONCILE_SECONDS = Histogram("raybus_reconcile_seconds", "Reconcile duration", ["controller"])
COMMANDS = Counter("raybus_commands_total", "Commands executed", ["op", "result"])
WORKQUEUE_DEPTH = Gauge("raybus_workqueue_depth", "Keys waiting in a reconciler's work queue",
                        ["controller"])
# Dashboard gateway (dashboard-poller): every HTTP request to a Ray dashboard or Serve proxy, by
# endpoint template ("GET /api/jobs/{id}") and status code ("200", "404", "timeout", "error").
DASHBOARD_REQUESTS = Counter("raybus_dashboard_requests_total", "Requests to Ray dashboards/proxies",
                             ["endpoint", "code"])
# From a change on the head to its observation being published. part="job_end": exact (the job's
# end_time is known); part="change": upper bound (time since the previous successful poll).
DASHBOARD_OBSERVATION_LAG = Histogram(
    "raybus_dashboard_observation_lag_seconds", "Change on a Ray head -> observation published",
    ["part"], buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120))
DASHBOARD_COMMANDS = Counter("raybus_dashboard_commands_total", "Dashboard commands executed",
                             ["op", "state"])


def serve_metrics(port: int) -> None:
    """Port 0 disables the endpoint (tests start many processes)."""
    if port:
        start_http_server(port, addr="127.0.0.1" if port_is_local() else "0.0.0.0")


def port_is_local() -> bool:
    """The local stack binds to loopback only (RAYBUS_METRICS_LOCAL=1); a Pod serves its port."""
    import os  # noqa: PLC0415 - only read once, at start
    return os.environ.get("RAYBUS_METRICS_LOCAL") == "1"
