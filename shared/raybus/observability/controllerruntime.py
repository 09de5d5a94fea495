"""controller-runtime's controller and workqueue metrics (sigs.k8s.io/controller-runtime v0.24,
KubeRay v1.7's), same names, labels, help and buckets, for raybus's reconcilers.

KubeRay's operator dashboard plots `workqueue_depth`, `controller_runtime_reconcile_total` and
`controller_runtime_reconcile_time_seconds` per controller; a KubeRay controller is named after
its kind, lower case ("raycluster", "rayjob", "rayservice"), and controller-runtime names each
controller's workqueue the same (`name` and `controller` labels alike). Every replica counts its
own reconciles and its own queue, as each KubeRay process does, so sums over Pods are totals.

Counters and histograms move where the Go code moves them (pkg/internal/controller/controller.go,
client-go's workqueue metrics); the gauges that describe the queue right now (depth, unfinished
work, longest running processor) are read from the queue at scrape time, which is what client-go's
periodic updater approximates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raybus.bus.subjects import Controller

# The controller names KubeRay's controllers get from their kinds.
CONTROLLER_NAMES = {Controller.CLUSTER: "raycluster", Controller.JOB: "rayjob",
                    Controller.SERVICE: "rayservice"}
RESULTS = ("error", "requeue_after", "requeue", "success")

RECONCILE_TOTAL = Counter("controller_runtime_reconcile_total",
                          "Total number of reconciliations per controller", ["controller", "result"])
RECONCILE_ERRORS = Counter("controller_runtime_reconcile_errors_total",
                           "Total number of reconciliation errors per controller", ["controller"])
TERMINAL_RECONCILE_ERRORS = Counter("controller_runtime_terminal_reconcile_errors_total",
                                    "Total number of terminal reconciliation errors per controller",
                                    ["controller"])
RECONCILE_PANICS = Counter("controller_runtime_reconcile_panics_total",
                           "Total number of reconciliation panics per controller", ["controller"])
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
    ["controller"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
             0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
             40, 50, 60))
MAX_CONCURRENT = Gauge("controller_runtime_max_concurrent_reconciles",
                       "Maximum number of concurrent reconciles per controller", ["controller"])
ACTIVE_WORKERS = Gauge("controller_runtime_active_workers",
                       "Number of currently used workers per controller", ["controller"])

_QUEUE_BUCKETS = tuple(10e-9 * 10 ** i for i in range(12))  # prometheus.ExponentialBuckets(10e-9, 10, 12)
ADDS = Counter("workqueue_adds", "Total number of adds handled by workqueue", ["name", "controller"])
QUEUE_LATENCY = Histogram("workqueue_queue_duration_seconds",
                          "How long in seconds an item stays in workqueue before being requested",
                          ["name", "controller"], buckets=_QUEUE_BUCKETS)
WORK_DURATION = Histogram("workqueue_work_duration_seconds",
                          "How long in seconds processing an item from workqueue takes.",
                          ["name", "controller"], buckets=_QUEUE_BUCKETS)
RETRIES = Counter("workqueue_retries",
                  "Total number of items added to the workqueue with a non-zero delay (rate-limited "
                  "requeues, explicit RequeueAfter or AddAfter calls)", ["name", "controller"])
_DEPTH_HELP = "Current depth of workqueue by workqueue and priority"
_UNFINISHED_HELP = ("How many seconds of work has been done that is in progress and hasn't been observed "
                    "by work_duration. Large values indicate stuck threads. One can deduce the number of "
                    "stuck threads by observing the rate at which this increases.")
_LONGEST_HELP = "How many seconds has the longest running processor for workqueue been running."


def init_controller(name: str, workers: int) -> None:
    """controller-runtime's initMetrics: every series of the controller exists from its start."""
    for result in RESULTS:
        RECONCILE_TOTAL.labels(name, result)
    for counter in (RECONCILE_ERRORS, TERMINAL_RECONCILE_ERRORS, RECONCILE_PANICS):
        counter.labels(name)
    MAX_CONCURRENT.labels(name).set(workers)
    ACTIVE_WORKERS.labels(name).set(0)


def observe_reconcile(name: str, seconds: float, *, error: bool, requeue_after: float | None) -> None:
    """reconcileHandler's accounting of one reconcile."""
    if error:
        RECONCILE_ERRORS.labels(name).inc()
        result = "error"
    elif requeue_after is not None and requeue_after > 0:
        result = "requeue_after"
    else:
        result = "success"
    RECONCILE_TOTAL.labels(name, result).inc()
    RECONCILE_TIME.labels(name).observe(seconds)


class QueueState(Protocol):
    """What the scrape reads from a work queue (runtime/workqueue.py)."""

    def depth(self) -> int: ...
    def processing_since(self) -> Iterable[float]: ...


class QueueMetrics:
    """client-go's queueMetrics for one named queue: the queue calls add/get/done/retry."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.clock = clock
        self._adds = ADDS.labels(name, name)
        self._latency = QUEUE_LATENCY.labels(name, name)
        self._work = WORK_DURATION.labels(name, name)
        self._retries = RETRIES.labels(name, name)

    def add(self) -> None:
        self._adds.inc()

    def got(self, added_at: float | None, now: float) -> None:
        if added_at is not None:
            self._latency.observe(max(now - added_at, 0.0))

    def done(self, started_at: float | None) -> None:
        if started_at is not None:
            self._work.observe(max(self.clock() - started_at, 0.0))

    def retry(self) -> None:
        self._retries.inc()


class QueueCollector(Collector):
    """The scrape-time queue gauges of every registered queue of this process."""

    def __init__(self) -> None:
        self._queues: dict[str, tuple[QueueState, Callable[[], float]]] = {}

    def add(self, name: str, queue: QueueState, clock: Callable[[], float] = time.monotonic) -> None:
        self._queues[name] = (queue, clock)

    def remove(self, name: str, queue: QueueState) -> None:
        if name in self._queues and self._queues[name][0] is queue:
            del self._queues[name]

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        depth = GaugeMetricFamily("workqueue_depth", _DEPTH_HELP, labels=["name", "controller", "priority"])
        unfinished = GaugeMetricFamily("workqueue_unfinished_work_seconds", _UNFINISHED_HELP,
                                       labels=["name", "controller"])
        longest = GaugeMetricFamily("workqueue_longest_running_processor_seconds", _LONGEST_HELP,
                                    labels=["name", "controller"])
        for name, (queue, clock) in list(self._queues.items()):
            now = clock()
            running = [now - t for t in queue.processing_since()]
            depth.add_metric([name, name, ""], queue.depth())  # no priority, as NewDepthMetric
            unfinished.add_metric([name, name], sum(running))
            longest.add_metric([name, name], max(running, default=0.0))
        return [depth, unfinished, longest]


QUEUES = QueueCollector()
REGISTRY.register(QUEUES)
