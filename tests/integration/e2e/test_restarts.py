"""Restarting any process, NATS or Redis loses nothing and duplicates nothing (e2e).

Assertions are on objects: a pod watch started before the clusters records every Pod ever
created, so "exactly one head and N workers were ever created" is checked, not just the final
count. (Event counts are not part of that contract: an executor killed between a create and the
ledger's record re-applies the batch, and the AlreadyExists path may record its Event again.)
"""

from __future__ import annotations

import time

from raybus.adapters.kube import KubeClient, new_api_client
from raybus_sim.devstack.stack import LocalStack
from tests.integration.e2e.conftest import Kube, PodLedger
from tests.integration.e2e.test_raycluster import _workers


async def _exactly(kube: Kube, ledger: PodLedger, names: list[str], workers: int, *,
                   timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    for n in names:
        await kube.wait_ready(n, workers=workers, timeout=max(1.0, deadline - time.monotonic()))
    for n in names:
        assert len(await kube.pods(n, node_type="head")) == 1, n
        assert len(await kube.pods(n, node_type="worker")) == workers, n
        assert len(ledger.heads.get(n, ())) == 1, (n, ledger.heads.get(n))
        assert len(ledger.created.get(n, ())) == workers + 1, (n, ledger.created.get(n))


async def _some_pods_exist(kube: Kube, names: list[str]) -> None:
    """Mid-convergence: pods were created for some clusters, not yet all of them."""
    async def started() -> bool:
        counts = [len(await kube.pods(n)) for n in names]
        return sum(counts) > 0
    await kube.eventually(started, timeout=60, what="the first pods")


async def _ledger(stack: LocalStack, prefix: str) -> PodLedger:
    ledger = PodLedger(KubeClient(await new_api_client(str(stack.kubeconfig))), prefix)
    await ledger.start()
    return ledger


async def test_reconciler_killed_mid_convergence(kube: Kube, stack: LocalStack) -> None:
    names = [f"e2e-kill-{i}" for i in range(4)]
    ledger = await _ledger(stack, "e2e-kill-")
    try:
        for n in names:
            await kube.apply_cluster(n, mutate=_workers(5))
        await _some_pods_exist(kube, names)
        stack.restart("cluster-reconciler-0", kill=True)  # SIGKILL, then a fresh replica
        await _exactly(kube, ledger, names, 5)
    finally:
        await ledger.stop()


async def test_executor_killed_mid_convergence_fails_over(kube: Kube, stack: LocalStack) -> None:
    names = [f"e2e-exec-{i}" for i in range(3)]
    ledger = await _ledger(stack, "e2e-exec-")
    try:
        for n in names:
            await kube.apply_cluster(n, mutate=_workers(4))
        await _some_pods_exist(kube, names)
        killed = time.monotonic()
        stack.restart("command-executor", kill=True)
        # Its unacked batches reach the new executor after ack_wait (5 s): one head each and exact
        # counts, never a second create. About 10 s after the restart on an idle machine (printed);
        # the bound only rules out waiting for a slow safety net (the failover time is a benchmark
        # figure, not a test's: a loaded CI machine once took over 15 s).
        await _exactly(kube, ledger, names, 4, timeout=45.0)
        print(f"executor failover: one head and exact pod counts {time.monotonic() - killed:.1f} s after SIGKILL")
    finally:
        await ledger.stop()


async def test_watcher_killed_mid_convergence(kube: Kube, stack: LocalStack) -> None:
    names = [f"e2e-watch-{i}" for i in range(2)]
    ledger = await _ledger(stack, "e2e-watch-")
    try:
        for n in names:
            await kube.apply_cluster(n, mutate=_workers(3))
        await _some_pods_exist(kube, names)
        stack.restart("watcher", kill=True)
        await _exactly(kube, ledger, names, 3)
    finally:
        await ledger.stop()


async def test_nats_and_redis_restart(kube: Kube, stack: LocalStack) -> None:
    assert stack.nats is not None and stack.redis is not None
    ledger = await _ledger(stack, "e2e-infra")
    try:
        await kube.apply_cluster("e2e-infra", mutate=_workers(2))
        await kube.wait_ready("e2e-infra", workers=2)
        stack.redis.restart()
        stack.nats.restart()  # JetStream state is on disk; every client reconnects
        rc = await kube.cluster("e2e-infra")
        groups = rc["spec"]["workerGroupSpecs"]
        groups[0]["replicas"] = 4
        await kube.patch_cluster("e2e-infra", {"spec": {"workerGroupSpecs": groups}})
        await _exactly(kube, ledger, ["e2e-infra"], 4)
    finally:
        await ledger.stop()
