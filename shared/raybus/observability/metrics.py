"""Prometheus metrics: one registry per process, served on the service's metrics port, with the
probes Kubernetes asks on that port: /healthz (the process serves) and /readyz (the service has
started and not begun to stop; deploy/kustomize's readiness probe, so rollouts and
PodDisruptionBudgets count only working replicas). The endpoint runs on the service's event loop
(aiohttp), bound to the configured address only."""

from __future__ import annotations

import errno

from aiohttp import web
from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.exposition import choose_encoder

DEAD_LETTERS = Counter("raybus_dead_letters_total", "Undecodable bus messages sent to the DLQ",
                       ["service", "subject_kind"])
MESSAGES = Counter("raybus_messages_total", "Bus messages handled", ["service", "kind", "outcome"])
# What woke each reconcile (the last trigger's cause: "<event> <kind>", or "requeue" for the
# replica's own requeues/look-agains) and what it decided: "commands", "status" (a status write
# only) or "nothing". Reconciles that decide nothing are CPU spent for no change.
RECONCILE_CAUSES = Counter("raybus_reconcile_causes_total", "Reconciles by cause and what they decided",
                           ["controller", "cause", "decided"])
COMMANDS = Counter("raybus_commands_total", "Commands executed", ["op", "result"])
# A partition's trigger consumer that could not be bound yet (retried; see Controller._bind).
TRIGGER_BIND_FAILURES = Counter("raybus_trigger_bind_failures_total",
                                "Failed attempts to bind a partition's trigger consumer", ["controller"])
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
# The command ledger (bus/ledger.py): records written, by transition (claimed, taken_over,
# released, finished, revoked, refused); a taken-over batch may have been applied twice.
LEDGER_TRANSITIONS = Counter("raybus_ledger_transitions_total", "Command-ledger records written, by transition",
                             ["transition"])
RAY_EVENTS_RECEIVED = Counter("raybus_ray_events_posts_total", "POSTs of events pushed by Ray heads",
                              ["outcome"])


_READY = False


def set_ready(ready: bool) -> None:
    """What /readyz answers: 200 once the service started, 503 before and once it stops."""
    global _READY
    _READY = ready


async def _probe(request: web.Request) -> web.Response:
    ok = request.path == "/healthz" or _READY
    return web.Response(status=200 if ok else 503, text="ok\n" if ok else "not ready\n")


async def _metrics(request: web.Request) -> web.Response:
    # On the event loop, like everything else of the process: collectors read the snapshot cache
    # and the work queues without a lock, and a slow scrape is one more task, not a thread.
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return web.Response(body=encoder(REGISTRY), headers={"Content-Type": content_type})


def metrics_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/healthz", _probe)
    app.router.add_get("/readyz", _probe)
    return app


def bind_hosts(address: str) -> list[str]:
    """`--metrics-addr`: one host or several, comma-separated (a Pod: its IP and loopback)."""
    return [h.strip() for h in address.split(",") if h.strip()]


async def serve_metrics(port: int, address: str = "127.0.0.1") -> web.AppRunner | None:
    """/metrics, /healthz and /readyz on `address`:`port` (port 0: no endpoint; tests start many
    processes). Bound only where asked: the local stack on loopback, a Pod on its own IP."""
    if not port:
        return None
    runner = web.AppRunner(metrics_app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        # SO_REUSEADDR: a container restarted in its Pod keeps the Pod's network namespace, where the
        # previous process's probe connections linger in TIME_WAIT on this port (the kubelet's probes
        # ask the server to close); without it the new process cannot bind for a minute and crash-loops.
        # A port another process listens on still fails (Linux refuses a second listener).
        for host in bind_hosts(address):
            await web.TCPSite(runner, host, port, reuse_address=True).start()
    except OSError as err:
        await runner.cleanup()
        # One wording whatever the loop: `raybus up` retries a port taken meanwhile on this line.
        raise OSError(err.errno, f"metrics endpoint {address}:{port}: Address already in use"
                      if err.errno == errno.EADDRINUSE else f"metrics endpoint {address}:{port}: {err}") from err
    return runner
