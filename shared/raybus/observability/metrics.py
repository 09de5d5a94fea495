"""Prometheus metrics: one registry per process, served on the service's metrics port."""

from __future__ import annotations

from prometheus_client import Counter, Histogram, start_http_server

DEAD_LETTERS = Counter("raybus_dead_letters_total", "Undecodable bus messages sent to the DLQ",
                       ["service", "subject_kind"])
MESSAGES = Counter("raybus_messages_total", "Bus messages handled", ["service", "kind", "outcome"])
RECONCILES = Counter("raybus_reconciles_total", "Reconciles run", ["controller", "result"])
RECONCILE_SECONDS = Histogram("raybus_reconcile_seconds", "Reconcile duration", ["controller"])
COMMANDS = Counter("raybus_commands_total", "Commands executed", ["op", "result"])


def serve_metrics(port: int) -> None:
    """Port 0 disables the endpoint (tests start many processes)."""
    if port:
        start_http_server(port, addr="0.0.0.0")
