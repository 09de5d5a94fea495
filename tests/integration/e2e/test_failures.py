"""When the API server says no (issue: failure handling as controller-runtime does it).

A RayCluster whose head template the API server rejects is retried with controller-runtime's
per-key exponential backoff (5 ms doubling), under one head-Pod name, with one aggregated Warning
Event that reads as a failure: about a dozen attempts in 10 s, never dozens per second.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from raybus_sim.devstack.stack import LocalStack
from tests.integration.e2e.conftest import RC, Kube
from tests.integration.e2e.test_raycluster import _workers


def _bad_cpu(body: dict[str, Any]) -> None:
    """A cpu the CRD's Quantity pattern lets through (it allows a fractional exponent) and the Pod
    API cannot parse: the RayCluster is stored, its head Pod refused (as with KubeRay's CRD)."""
    container = body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "1e1.5"


async def test_rejected_head_pod_is_retried_with_backoff_under_one_name(kube: Kube) -> None:
    await kube.apply_cluster("e2e-badcpu", mutate=_bad_cpu)

    async def first_failure() -> bool:
        return bool(await kube.events("e2e-badcpu", "FailedToCreateHeadPod"))
    await kube.eventually(first_failure, what="the first rejected create")
    started = time.monotonic()
    await asyncio.sleep(10.0)  # the measurement window itself, not a wait for a condition
    window = time.monotonic() - started
    events = await kube.events("e2e-badcpu", "FailedToCreateHeadPod")
    assert len(events) == 1  # one name, one message: client-go aggregates the repeats
    attempts = int((events[0].get("series") or {}).get("count") or events[0].get("count") or 1)
    message = events[0]["message"]
    assert events[0]["type"] == "Warning"
    assert message.startswith("Failed to create head Pod default/e2e-badcpu-head-"), message
    assert "quantities must match the regular expression" in message, message
    # controller-runtime's limiter allows ~12 in 10 s (5 ms * 2^n); KubeRay's issue saw 437.
    assert 3 <= attempts <= 30, f"{attempts} rejected creates in {window:.1f}s"
    assert await kube.pods("e2e-badcpu") == []
    rc = await kube.cluster("e2e-badcpu")
    conditions = {c["type"]: c for c in (rc.get("status") or {}).get("conditions") or []}
    assert conditions["ReplicaFailure"]["reason"] == "FailedCreateHeadPod"


async def test_deleting_one_of_two_clusters_logs_no_error(kube: Kube, stack: LocalStack) -> None:
    logs = [p for p in stack.procs if p.name.startswith("cluster-reconciler")]
    offsets = {p.name: p.log.stat().st_size for p in logs}
    for name in ("e2e-pair-a", "e2e-pair-b"):
        await kube.apply_cluster(name, mutate=_workers(1))
    for name in ("e2e-pair-a", "e2e-pair-b"):
        await kube.wait_ready(name, workers=1)
    await kube.c.delete(RC, namespace="default", name="e2e-pair-a")

    async def gone() -> bool:
        return await kube.pods("e2e-pair-a") == []
    await kube.eventually(gone, what="e2e-pair-a's pods garbage-collected")
    await kube.settled("e2e-pair-a")
    await kube.settled("e2e-pair-b")
    assert len(await kube.pods("e2e-pair-b")) == 2
    for proc in logs:
        with proc.log.open("rb") as f:
            f.seek(offsets[proc.name])
            tail = f.read().decode(errors="replace")
        assert '"level": "ERROR"' not in tail and "Traceback" not in tail, tail[-2000:]
