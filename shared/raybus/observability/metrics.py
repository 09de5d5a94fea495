"""Prometheus metrics: one registry per process, served on the service's metrics port, with the
probes Kubernetes asks on that port: /healthz (the process serves) and /readyz (the service has
started and not begun to stop; deploy/kustomize's readiness probe, so rollouts and
PodDisruptionBudgets count only working replicas)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

DEAD_LETTERS = Counter("raybus_dead_letters_total", "Undecodable bus messages sent to the DLQ",
                       ["service", "subject_kind"])
MESSAGES = Counter("raybus_messages_total", "Bus messages handled", ["service", "kind", "outcome"])
RECONCILES = Counter("raybus_reconciles_total", "Reconciles run", ["controller", "result"])
# What woke each reconcile (the last trigger's cause: "<event> <kind>", or "requeue" for the
# replica's own requeues/look-agains) and what it decided: "commands", "status" (a status write
# only) or "nothing". Reconciles that decide nothing are the CPU to cut (issue 20).
RECONCILE_CAUSES = Counter("raybus_reconcile_causes_total", "Reconciles by cause and what they decided",
                           ["controller", "cause", "decided"])
RECONCILE_SECONDS = Histogram("raybus_reconcile_seconds", "Reconcile duration", ["controller"])
COMMANDS = Counter("raybus_commands_total", "Commands executed", ["op", "result"])
# A partition's trigger consumer that could not be bound yet (retried; see Controller._bind).
TRIGGER_BIND_FAILURES = Counter("raybus_trigger_bind_failures_total",
                                "Failed attempts to bind a partition's trigger consumer", ["controller"])
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
# The validating webhook's answers (services/webhook), by kind, operation and verdict.
WEBHOOK_ADMISSIONS = Counter("raybus_webhook_admissions_total", "Admission reviews answered",
                             ["kind", "operation", "allowed"])
RAY_EVENTS_RECEIVED = Counter("raybus_ray_events_posts_total", "POSTs of events pushed by Ray heads",
                              ["outcome"])


_READY = threading.Event()


def set_ready(ready: bool) -> None:
    """What /readyz answers: 200 once the service started, 503 before and once it stops."""
    if ready:
        _READY.set()
    else:
        _READY.clear()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds would flood stderr (prometheus_client's handler is silent too)."""


def _app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "")
    if path in ("/healthz", "/readyz"):
        ok = path == "/healthz" or _READY.is_set()
        start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
        return [b"ok\n" if ok else b"not ready\n"]
    return _METRICS(environ, start_response)  # type: ignore[no-any-return]


_METRICS = make_wsgi_app(REGISTRY)


def serve_metrics(port: int) -> None:
    """Port 0 disables the endpoint (tests start many processes). prometheus_client's
    start_http_server, with the two probe paths in front of its WSGI app."""
    if port:
        addr = "127.0.0.1" if port_is_local() else "0.0.0.0"
        httpd = make_server(addr, port, _app, ThreadingWSGIServer, handler_class=_QuietHandler)
        threading.Thread(target=httpd.serve_forever, name="metrics", daemon=True).start()


def port_is_local() -> bool:
    """The local stack binds to loopback only (RAYBUS_METRICS_LOCAL=1); a Pod serves its port."""
    import os
    return os.environ.get("RAYBUS_METRICS_LOCAL") == "1"
