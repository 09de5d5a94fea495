"""Restarting any process, NATS or Redis loses nothing and duplicates nothing (e2e)."""

from __future__ import annotations

import asyncio

from raybus.cli.stack import LocalStack
from tests.integration.e2e.conftest import Kube
from tests.integration.e2e.test_raycluster import _workers


async def _exactly(kube: Kube, names: list[str], workers: int) -> None:
    for n in names:
        await kube.wait_ready(n, workers=workers, timeout=90)
    await asyncio.sleep(1.0)
    for n in names:
        assert len(await kube.pods(n, node_type="worker")) == workers
        assert await kube.event_count(n, "CreatedWorkerPod") == workers, n
        assert await kube.event_count(n, "CreatedHeadPod") == 1, n


async def test_reconciler_killed_mid_convergence(kube: Kube, stack: LocalStack) -> None:
    names = [f"e2e-kill-{i}" for i in range(4)]
    await asyncio.gather(*(kube.apply_cluster(n, mutate=_workers(5)) for n in names))
    await asyncio.sleep(0.3)  # mid-convergence
    stack.restart("cluster-reconciler-0", kill=True)  # SIGKILL, then a fresh replica
    await _exactly(kube, names, 5)


async def test_executor_and_watcher_restart(kube: Kube, stack: LocalStack) -> None:
    names = [f"e2e-exec-{i}" for i in range(3)]
    await asyncio.gather(*(kube.apply_cluster(n, mutate=_workers(4)) for n in names))
    await asyncio.sleep(0.2)
    stack.restart("command-executor", kill=True)
    stack.restart("watcher", kill=True)
    await _exactly(kube, names, 4)


async def test_nats_and_redis_restart(kube: Kube, stack: LocalStack) -> None:
    assert stack.nats is not None and stack.redis is not None
    await kube.apply_cluster("e2e-infra", mutate=_workers(2))
    await kube.wait_ready("e2e-infra", workers=2)
    stack.redis.restart()
    stack.nats.restart()  # JetStream state is on disk; every client reconnects
    rc = await kube.cluster("e2e-infra")
    groups = rc["spec"]["workerGroupSpecs"]
    groups[0]["replicas"] = 4
    await kube.patch_cluster("e2e-infra", {"spec": {"workerGroupSpecs": groups}})
    await _exactly(kube, ["e2e-infra"], 4)
