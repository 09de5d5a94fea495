"""RayCluster end to end (issue 4 item 7) on the local stack, two cluster-reconciler replicas."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.integration.e2e.conftest import Kube


def _workers(n: int, **extra: Any):  # type: ignore[no-untyped-def]
    def mutate(body: dict[str, Any]) -> None:
        group = body["spec"]["workerGroupSpecs"][0]
        group.update(replicas=n, minReplicas=0, maxReplicas=10, **extra)
    return mutate


async def test_apply_converges_to_ready_with_status(kube: Kube) -> None:
    await kube.apply_cluster("e2e-basic", mutate=_workers(2))
    rc = await kube.wait_ready("e2e-basic", workers=2)
    status = rc["status"]
    assert status["desiredWorkerReplicas"] == 2 and status["readyWorkerReplicas"] == 2
    assert status["availableWorkerReplicas"] == 2 and status["maxWorkerReplicas"] == 10
    assert status["head"]["serviceName"] == "e2e-basic-head-svc"
    assert status["head"]["podName"].startswith("e2e-basic-head-")
    assert status["observedGeneration"] == rc["metadata"]["generation"]
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["HeadPodReady"]["status"] == "True"
    assert conds["RayClusterProvisioned"]["status"] == "True"
    # One Event per created pod: no duplicate creates by the two replicas.
    assert await kube.event_count("e2e-basic", "CreatedWorkerPod") == 2
    assert await kube.event_count("e2e-basic", "CreatedHeadPod") == 1


async def test_deleted_worker_is_recreated_exactly_once(kube: Kube) -> None:
    await kube.apply_cluster("e2e-recreate", mutate=_workers(2))
    await kube.wait_ready("e2e-recreate", workers=2)
    victim = (await kube.pods("e2e-recreate", node_type="worker"))[0]["metadata"]["name"]
    await kube.delete_pod(victim)
    await kube.wait_ready("e2e-recreate", workers=2)
    await kube.settled("e2e-recreate")  # nothing queued or expected: a duplicate would show now
    names = {p["metadata"]["name"] for p in await kube.pods("e2e-recreate", node_type="worker")}
    assert victim not in names and len(names) == 2
    assert await kube.event_count("e2e-recreate", "CreatedWorkerPod") == 3


async def test_scale_up_and_down(kube: Kube) -> None:
    await kube.apply_cluster("e2e-scale", mutate=_workers(1))
    await kube.wait_ready("e2e-scale", workers=1)
    rc = await kube.cluster("e2e-scale")
    groups = rc["spec"]["workerGroupSpecs"]
    groups[0]["replicas"] = 4
    await kube.patch_cluster("e2e-scale", {"spec": {"workerGroupSpecs": groups}})
    await kube.wait_ready("e2e-scale", workers=4)
    groups[0]["replicas"] = 2
    await kube.patch_cluster("e2e-scale", {"spec": {"workerGroupSpecs": groups}})
    await kube.wait_ready("e2e-scale", workers=2)

    async def status_follows() -> bool:  # the status write trails the pods (level state)
        status = (await kube.cluster("e2e-scale"))["status"]
        return bool(status["desiredWorkerReplicas"] == 2 and status["availableWorkerReplicas"] == 2)
    await kube.eventually(status_follows, what="desiredWorkerReplicas 2 in the status")


async def test_workers_to_delete_is_honoured_then_cleared(kube: Kube) -> None:
    # What the Ray autoscaler does: lower replicas and name the pods to remove.
    await kube.apply_cluster("e2e-wtd", mutate=_workers(3))
    await kube.wait_ready("e2e-wtd", workers=3)
    victims = sorted(p["metadata"]["name"] for p in await kube.pods("e2e-wtd", node_type="worker"))[:2]
    groups = (await kube.cluster("e2e-wtd"))["spec"]["workerGroupSpecs"]
    groups[0]["replicas"] = 1
    groups[0]["scaleStrategy"] = {"workersToDelete": victims}
    await kube.patch_cluster("e2e-wtd", {"spec": {"workerGroupSpecs": groups}})
    await kube.wait_ready("e2e-wtd", workers=1)
    left = {p["metadata"]["name"] for p in await kube.pods("e2e-wtd", node_type="worker")}
    assert not left & set(victims)

    async def cleared() -> bool:
        spec = (await kube.cluster("e2e-wtd"))["spec"]["workerGroupSpecs"][0]
        return not (spec.get("scaleStrategy") or {}).get("workersToDelete")

    await kube.eventually(cleared, what="workersToDelete cleared")


async def test_suspend_and_resume(kube: Kube) -> None:
    await kube.apply_cluster("e2e-suspend", mutate=_workers(2))
    await kube.wait_ready("e2e-suspend", workers=2)
    await kube.patch_cluster("e2e-suspend", {"spec": {"suspend": True}})

    async def suspended() -> bool:
        rc = await kube.cluster("e2e-suspend")
        conds = {c["type"]: c["status"] for c in (rc.get("status") or {}).get("conditions") or []}
        return (not await kube.pods("e2e-suspend") and rc["status"].get("state") == "suspended"
                and conds.get("RayClusterSuspended") == "True")

    await kube.eventually(suspended, what="suspended with no pods")
    await kube.patch_cluster("e2e-suspend", {"spec": {"suspend": False}})
    await kube.wait_ready("e2e-suspend", workers=2)


async def test_recreate_upgrade_replaces_every_pod(kube: Kube) -> None:
    await kube.apply_cluster("e2e-upgrade", mutate=lambda b: (
        _workers(1)(b), b["spec"].__setitem__("upgradeStrategy", {"type": "Recreate"})))
    await kube.wait_ready("e2e-upgrade", workers=1)
    before = {p["metadata"]["name"] for p in await kube.pods("e2e-upgrade")}
    rc = await kube.cluster("e2e-upgrade")
    head = rc["spec"]["headGroupSpec"]
    head["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.46.0-py311"
    await kube.patch_cluster("e2e-upgrade", {"spec": {"headGroupSpec": head}})

    async def replaced() -> bool:
        pods = await kube.pods("e2e-upgrade")
        return len(pods) == 2 and not before & {p["metadata"]["name"] for p in pods}

    await kube.eventually(replaced, what="all pods recreated")
    await kube.wait_ready("e2e-upgrade", workers=1)


async def test_multi_host_group_creates_whole_replica_groups(kube: Kube) -> None:
    await kube.apply_cluster("e2e-multihost", mutate=_workers(2, numOfHosts=2))
    await kube.wait_ready("e2e-multihost", workers=4)
    workers = await kube.pods("e2e-multihost", node_type="worker")
    groups: dict[str, set[str]] = {}
    for pod in workers:
        labels = pod["metadata"]["labels"]
        groups.setdefault(labels["ray.io/worker-group-replica-name"], set()).add(
            labels["ray.io/replica-host-index"])
    assert len(groups) == 2 and all(hosts == {"0", "1"} for hosts in groups.values())


async def test_failed_head_is_replaced(kube: Kube) -> None:
    await kube.apply_cluster("e2e-headfail", mutate=_workers(1))
    await kube.wait_ready("e2e-headfail", workers=1)
    head = (await kube.pods("e2e-headfail", node_type="head"))[0]["metadata"]["name"]
    await kube.sim(f"pods/default/{head}/fail", {"reason": "Error"})

    async def new_head() -> bool:
        heads = await kube.pods("e2e-headfail", node_type="head")
        return len(heads) == 1 and heads[0]["metadata"]["name"] != head

    await kube.eventually(new_head, what="head pod replaced")
    await kube.wait_ready("e2e-headfail", workers=1)
    assert await kube.event_count("e2e-headfail", "CreatedHeadPod") == 2


async def test_many_clusters_two_replicas_no_duplicates(kube: Kube) -> None:
    names = [f"e2e-many-{i}" for i in range(6)]
    await asyncio.gather(*(kube.apply_cluster(n, mutate=_workers(3)) for n in names))
    for n in names:
        await kube.wait_ready(n, workers=3, timeout=60)
    for n in names:
        await kube.settled(n)
    for n in names:
        assert len(await kube.pods(n, node_type="worker")) == 3
        assert await kube.event_count(n, "CreatedWorkerPod") == 3
        assert await kube.event_count(n, "CreatedHeadPod") == 1
