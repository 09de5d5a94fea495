"""controller-runtime's controller and workqueue metrics (observability/controllerruntime.py):
counted where controller-runtime and client-go's workqueue count them, with their names and
labels, the queue gauges read at scrape time."""

from __future__ import annotations

from prometheus_client import REGISTRY

from raybus.observability import controllerruntime as crm
from raybus.runtime.workqueue import WorkQueue


def value(metric: str, **labels: str) -> float:
    got = REGISTRY.get_sample_value(metric, labels)
    return 0.0 if got is None else got


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_workqueue_series_follow_client_go() -> None:
    clock = Clock()
    name = "unit-queue"
    q: WorkQueue[str, None] = WorkQueue(metrics=crm.QueueMetrics(name, clock=clock))
    crm.QUEUES.add(name, q, clock)
    ids = {"name": name, "controller": name}
    try:
        adds = value("workqueue_adds_total", **ids)
        q.add("a")
        q.add("a")  # already waiting: folded, not counted (client-go returns before metrics.add)
        q.add("b")
        assert value("workqueue_adds_total", **ids) == adds + 2
        assert value("workqueue_depth", **ids, priority="") == 2
        clock.now += 0.5
        key, _ = await q.get()
        assert value("workqueue_queue_duration_seconds_count", **ids) >= 1
        assert value("workqueue_depth", **ids, priority="") == 1
        clock.now += 2.0
        assert value("workqueue_longest_running_processor_seconds", **ids) == 2.0
        assert value("workqueue_unfinished_work_seconds", **ids) == 2.0
        q.add(key)  # dirty while running: not waiting for a worker yet
        assert value("workqueue_depth", **ids, priority="") == 1
        before = value("workqueue_work_duration_seconds_sum", **ids)
        q.done(key)
        assert value("workqueue_work_duration_seconds_sum", **ids) == before + 2.0
        assert value("workqueue_depth", **ids, priority="") == 2
        retries = value("workqueue_retries_total", **ids)
        q.add_after("c", 5.0)
        q.add_rate_limited("c")
        assert value("workqueue_retries_total", **ids) == retries + 2
    finally:
        crm.QUEUES.remove(name, q)
    assert REGISTRY.get_sample_value("workqueue_depth", {**ids, "priority": ""}) is None


def test_reconcile_results_as_controller_runtime_labels_them() -> None:
    name = "unit-controller"
    crm.init_controller(name, workers=8)
    # initMetrics: every result exists at 0 from the start, so rates and sums see the series
    for result in crm.RESULTS:
        assert REGISTRY.get_sample_value("controller_runtime_reconcile_total",
                                         {"controller": name, "result": result}) == 0.0
    assert value("controller_runtime_max_concurrent_reconciles", controller=name) == 8
    crm.observe_reconcile(name, 0.02, error=False, requeue_after=None)
    crm.observe_reconcile(name, 0.02, error=False, requeue_after=0.0)  # RequeueAfter 0: success
    crm.observe_reconcile(name, 0.02, error=False, requeue_after=2.0)
    crm.observe_reconcile(name, 0.02, error=True, requeue_after=2.0)  # an error wins
    assert value("controller_runtime_reconcile_total", controller=name, result="success") == 2
    assert value("controller_runtime_reconcile_total", controller=name, result="requeue_after") == 1
    assert value("controller_runtime_reconcile_total", controller=name, result="error") == 1
    assert value("controller_runtime_reconcile_errors_total", controller=name) == 1
    assert value("controller_runtime_reconcile_time_seconds_count", controller=name) == 4
    assert value("controller_runtime_reconcile_time_seconds_bucket", controller=name, le="0.025") == 4
