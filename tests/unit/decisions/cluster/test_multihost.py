"""reconcileMultiHostWorkerGroup: atomic replica groups (TestReconcile_MultiHost* in KubeRay)."""

from __future__ import annotations

from typing import Any

from raybus.decisions.cluster.multihost import next_free_index
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    SETTINGS,
    T0,
    apply,
    creates,
    deletes,
    head_service,
    make_cluster,
    patches,
    pod,
    worker_group,
)

HEAD = pod("demo-head-abcde", node_type="head")
HOSTS = 2


def replica(replica_name: str, index: int, hosts: int = HOSTS, **kw: Any) -> list[dict[str, Any]]:
    return [
        pod(
            f"demo-tpu-worker-{replica_name}-{h}",
            group="tpu",
            labels={
                "ray.io/worker-group-replica-name": replica_name,
                "ray.io/worker-group-replica-index": str(index),
                "ray.io/replica-host-index": str(h),
            },
            **(kw if h == 0 else {}),
        )
        for h in range(hosts)
    ]


def run(pods: list[dict[str, Any]], *, settings: OperatorSettings = SETTINGS, **group_kw: Any):  # type: ignore[no-untyped-def]
    groups = [worker_group("tpu", numOfHosts=HOSTS, **{"replicas": 2, **group_kw})]
    snap = ClusterSnapshot(
        cluster=make_cluster(groups=groups),
        pods=[HEAD, *pods],
        services=[
            head_service(),
            {
                "metadata": {"name": "demo-headless", "labels": {"ray.io/headless-worker-svc": "demo"}},
                "spec": {},
            },
        ],
    )
    return reconcile_cluster(snap, settings=settings, now=T0, entropy="e")


def labels_of(d: Any) -> list[tuple[str, str, str]]:
    return [
        (
            c.object["metadata"]["labels"]["ray.io/worker-group-replica-name"],
            c.object["metadata"]["labels"]["ray.io/worker-group-replica-index"],
            c.object["metadata"]["labels"]["ray.io/replica-host-index"],
        )
        for c in creates(d)
    ]


def test_next_free_index() -> None:
    assert next_free_index(set()) == 0
    assert next_free_index({0, 1, 3}) == 2


def test_scale_up_creates_whole_replicas_with_indices() -> None:
    d = run(replica("tpu-aaaaa", 1))
    got = labels_of(d)
    assert len(got) == HOSTS  # one missing replica * 2 hosts
    assert {idx for _, idx, _ in got} == {"0"}  # lowest free index
    assert sorted(h for _, _, h in got) == ["0", "1"]
    assert len({name for name, _, _ in got}) == 1 and got[0][0].startswith("tpu-")


def test_incomplete_replica_group_is_deleted_entirely() -> None:
    pods = [*replica("tpu-aaaaa", 0), *replica("tpu-bbbbb", 1)[:1]]
    d = run(pods)
    assert [c.target.name for c in deletes(d)] == ["demo-tpu-worker-tpu-bbbbb-0"]
    assert not creates(d)
    assert d.error is not None and d.requeue_after is None  # rate-limited retry


def test_unhealthy_host_takes_its_replica_down() -> None:
    pods = [*replica("tpu-aaaaa", 0, phase="Failed"), *replica("tpu-bbbbb", 1)]
    d = run(pods)
    assert sorted(c.target.name for c in deletes(d)) == [
        "demo-tpu-worker-tpu-aaaaa-0",
        "demo-tpu-worker-tpu-aaaaa-1",
    ]
    assert not creates(d)


def test_workers_to_delete_expands_to_replica_and_is_cleared() -> None:
    pods = [*replica("tpu-aaaaa", 0), *replica("tpu-bbbbb", 1)]
    d = run(pods, replicas=1, scaleStrategy={"workersToDelete": ["demo-tpu-worker-tpu-bbbbb-1"]})
    assert sorted(c.target.name for c in deletes(d)) == [
        "demo-tpu-worker-tpu-bbbbb-0",
        "demo-tpu-worker-tpu-bbbbb-1",
    ]
    assert len(patches(d)) == 1


def test_scale_down_removes_whole_replicas_only_without_autoscaler() -> None:
    pods = [*replica("tpu-aaaaa", 0), *replica("tpu-bbbbb", 1), *replica("tpu-ccccc", 2)]
    d = run(pods, replicas=1)
    victims = sorted(c.target.name for c in deletes(d))
    assert len(victims) == 4
    assert len({v.rsplit("-", 1)[0] for v in victims}) == 2  # two whole replica groups


def test_gate_off_falls_back_to_plain_pod_counting() -> None:
    settings = OperatorSettings.from_env({}, feature_gates="RayMultiHostIndexing=false")
    d = run([], settings=settings)
    assert len(creates(d)) == 2 * HOSTS
    assert all("ray.io/worker-group-replica-name" not in c.object["metadata"]["labels"] for c in creates(d))


def test_multi_host_converges() -> None:
    groups = [worker_group("tpu", numOfHosts=4, replicas=3)]
    snap = ClusterSnapshot(cluster=make_cluster(groups=groups))
    for _ in range(4):
        d = reconcile_cluster(snap, settings=SETTINGS, now=T0, entropy="e")
        snap = apply(snap, d)
    workers = [p for p in snap.pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert len(workers) == 12
    by_replica: dict[str, set[str]] = {}
    for p in workers:
        labels = p["metadata"]["labels"]
        by_replica.setdefault(labels["ray.io/worker-group-replica-name"], set()).add(
            labels["ray.io/worker-group-replica-index"]
        )
    assert len(by_replica) == 3
    assert sorted(i for s in by_replica.values() for i in s) == ["0", "1", "2"]
    assert not creates(reconcile_cluster(snap, settings=SETTINGS, now=T0, entropy="other"))


def test_unlabelled_legacy_pods_use_the_budget() -> None:
    legacy = [pod(f"demo-tpu-worker-old{i}", group="tpu") for i in range(3)]
    d = run(legacy)  # desired 4 Pods, 3 exist without replica labels: no whole replica fits
    assert not creates(d) and not deletes(d)
    d = run(legacy[:2])
    assert len(creates(d)) == HOSTS
