"""reconcilePods: table tests mirroring raycluster_controller_unit_test.go (TestShouldDeletePod,
TestReconcile_*: head Pod, replicas, WorkersToDelete, random Pod delete, suspend, expectations)."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api import with_defaults
from raybus.decisions.cluster.expectations import HEAD_GROUP, ScaleAction, ScaleExpectations, expect_scale_pod
from raybus.decisions.cluster.hashing import KUBERAY_VERSION_KEY, UPGRADE_STRATEGY_RECREATE_HASH_KEY
from raybus.decisions.cluster.pods import reconcile_pods
from raybus.decisions.cluster.podutil import should_delete_pod
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    SETTINGS,
    T0,
    creates,
    deletes,
    head_service,
    later,
    make_cluster,
    patches,
    pod,
    worker_group,
)


@pytest.mark.parametrize(
    ("phase", "terminated", "policy", "expected"),
    [
        ("Running", False, "Always", False),
        ("Running", False, "Never", False),
        ("Pending", False, "Never", False),
        ("Failed", False, "Always", True),
        ("Succeeded", False, "Always", True),
        ("Failed", True, "Never", True),
        ("Running", True, "Never", True),  # Ray container exited and cannot restart
        ("Running", True, "Always", False),  # kubelet restarts it
        ("Running", True, "OnFailure", False),
        ("Running", True, None, False),  # unset restartPolicy defaults to Always
    ],
)
@pytest.mark.parametrize("node_type", ["head", "worker"])
def test_should_delete_pod(
    phase: str, terminated: bool, policy: str | None, expected: bool, node_type: str
) -> None:
    p = pod("p", node_type=node_type, phase=phase, terminated=terminated, restart_policy=policy)
    should, reason = should_delete_pod(p, node_type)
    assert should is expected
    assert node_type in reason


def run(
    cluster_kw: dict[str, Any] | None = None,
    pods: list[dict[str, Any]] | None = None,
    *,
    expectations: ScaleExpectations | None = None,
    settings: OperatorSettings = SETTINGS,
    entropy: str = "e1",
    now_s: float = 0,
):  # type: ignore[no-untyped-def]
    cluster = make_cluster(**(cluster_kw or {}))
    snap = ClusterSnapshot(
        cluster=cluster,
        pods=pods or [],
        services=[head_service()],
        expectations=expectations or ScaleExpectations(),
    )
    return reconcile_cluster(snap, settings=settings, now=later(now_s), entropy=entropy)


HEAD = pod("demo-head-abcde", node_type="head")


def workers(n: int, group: str = "small") -> list[dict[str, Any]]:
    return [pod(f"demo-{group}-worker-{i:05d}", group=group) for i in range(n)]


# --- head Pod ------------------------------------------------------------------------------------


def test_creates_head_with_recreate_hash_and_version() -> None:
    d = run({"groups": []})
    (head,) = creates(d)
    assert head.event_reason == "CreatedHeadPod"
    meta = head.object["metadata"]
    assert meta["name"].startswith("demo-head-") and len(meta["name"]) == len("demo-head-") + 5
    assert meta["annotations"][KUBERAY_VERSION_KEY] == SETTINGS.kuberay_version
    assert meta["annotations"][UPGRADE_STRATEGY_RECREATE_HASH_KEY]
    assert [p.name for p in d.expectations.for_group(HEAD_GROUP)] == [meta["name"]]
    assert d.expectations.for_group(HEAD_GROUP)[0].action is ScaleAction.CREATE


def test_deterministic_head_pod_name() -> None:
    d = run({"groups": []}, settings=OperatorSettings(enable_deterministic_head_pod_name=True))
    assert creates(d)[0].object["metadata"]["name"] == "demo-head"


def test_healthy_head_is_left_alone() -> None:
    d = run({"groups": []}, [HEAD])
    assert not creates(d) and not deletes(d)


def test_failed_head_is_deleted_and_round_stops() -> None:
    failed = pod("demo-head-abcde", node_type="head", phase="Failed")
    d = run({}, [failed])
    assert [(c.target.name, c.event_reason) for c in deletes(d)] == [("demo-head-abcde", "DeletedHeadPod")]
    assert not creates(d)  # returns an error before the worker groups
    assert d.error is not None and d.requeue_after is None  # rate-limited retry
    assert d.expectations.for_group(HEAD_GROUP)[0].action is ScaleAction.DELETE


def test_more_than_one_head_is_an_error_without_deleting() -> None:
    heads = [pod("demo-head-aaaaa", node_type="head"), pod("demo-head-bbbbb", node_type="head")]
    d = run({}, heads)
    assert not deletes(d) and not creates(d)
    assert any("2 head pods found" in r for r in d.reasons)
    assert d.error is not None and "2 head pods found" in d.error


def test_provisioned_cluster_with_head_restart_disabled_does_not_recreate_head() -> None:
    status = {
        "conditions": [{"type": "RayClusterProvisioned", "status": "True", "reason": "x", "message": ""}]
    }
    kw = {"annotations": {"ray.io/disable-provisioned-head-restart": "true"}, "status": status}
    d = run(kw, workers(2))
    assert not creates(d)
    # Without the Provisioned condition the head is recreated.
    assert creates(run({"annotations": kw["annotations"]}, workers(2)))


def test_unsatisfied_head_expectation_skips_head_but_not_workers() -> None:
    exp = expect_scale_pod(
        ScaleExpectations(), group=HEAD_GROUP, pod_name="demo-head-zzzzz", action=ScaleAction.CREATE, now=T0
    )
    d = run({}, [], expectations=exp, now_s=5)
    assert [c.event_reason for c in creates(d)] == ["CreatedWorkerPod", "CreatedWorkerPod"]
    # After the 30 s ExpectationsTimeout the head is created again.
    d = run({}, workers(2), expectations=exp, now_s=31)
    assert [c.event_reason for c in creates(d)] == ["CreatedHeadPod"]


# --- worker groups -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "lo", "hi", "existing", "creates_n", "deletes_n"),
    [
        (3, 0, 10, 0, 3, 0),
        (3, 0, 10, 3, 0, 0),
        (1, 0, 10, 3, 0, 2),  # random delete without autoscaler
        (20, 0, 5, 2, 3, 0),  # clamped to max
        (0, 2, 5, 0, 2, 0),  # raised to min
    ],
)
def test_worker_diff(replicas: int, lo: int, hi: int, existing: int, creates_n: int, deletes_n: int) -> None:
    groups = [worker_group(replicas=replicas, minReplicas=lo, maxReplicas=hi)]
    d = run({"groups": groups}, [HEAD, *workers(existing)])
    assert len(creates(d)) == creates_n
    assert len(deletes(d)) == deletes_n
    assert all(c.event_reason == "CreatedWorkerPod" for c in creates(d))
    assert sum(len(d.expectations.for_group(g)) for g in ("small",)) == creates_n + deletes_n


def test_random_delete_is_deterministic_per_entropy() -> None:
    groups = [worker_group(replicas=2)]
    pods = [HEAD, *workers(6)]
    a = [c.target.name for c in deletes(run({"groups": groups}, pods, entropy="x"))]
    b = [c.target.name for c in deletes(run({"groups": groups}, pods, entropy="x"))]
    assert a == b and len(a) == 4


@pytest.mark.parametrize(("random_delete", "expected"), [(False, 0), (True, 2)])
def test_autoscaler_disables_random_delete_unless_env(random_delete: bool, expected: int) -> None:
    kw = {"groups": [worker_group(replicas=1)], "enableInTreeAutoscaling": True}
    pods = [HEAD, *workers(3)]
    d = run(kw, pods, settings=OperatorSettings(enable_random_pod_delete=random_delete))
    assert len(deletes(d)) == expected


@pytest.mark.parametrize("autoscaling", [False, True])
def test_workers_to_delete_then_cleared(autoscaling: bool) -> None:
    pods = [HEAD, *workers(3)]
    victim = pods[2]["metadata"]["name"]
    groups = [worker_group(replicas=2, scaleStrategy={"workersToDelete": [victim, "not-there"]})]
    d = run({"groups": groups, "enableInTreeAutoscaling": autoscaling}, pods)
    assert [c.target.name for c in deletes(d)] == [victim]
    assert not creates(d)  # replicas already reduced by the autoscaler: diff 0
    (patch,) = patches(d)
    body = patch.merge_patch
    assert body["metadata"] == {"resourceVersion": "100"}
    (group,) = body["spec"]["workerGroupSpecs"]
    assert "workersToDelete" not in group["scaleStrategy"] and group["replicas"] == 2
    # The command order: delete before the patch that forgets the request.
    assert d.commands.index(deletes(d)[0]) < d.commands.index(patch)


def test_workers_to_delete_ignored_names_still_cleared_and_diff_recreates() -> None:
    groups = [worker_group(replicas=3, scaleStrategy={"workersToDelete": ["gone"]})]
    d = run({"groups": groups}, [HEAD, *workers(2)])
    assert not deletes(d) and len(creates(d)) == 1 and len(patches(d)) == 1


def test_unhealthy_worker_deleted_and_nothing_created_this_round() -> None:
    bad = pod("demo-small-worker-bad00", phase="Failed")
    groups = [worker_group(replicas=3), worker_group("other", replicas=1)]
    d = run({"groups": groups}, [HEAD, bad, *workers(1)])
    assert [c.target.name for c in deletes(d)] == ["demo-small-worker-bad00"]
    assert not creates(d)  # KubeRay returns an error: the later group waits too
    assert d.error == "delete 1 unhealthy worker Pods"


def test_suspended_worker_group_deletes_its_pods_only() -> None:
    groups = [worker_group(replicas=2, suspend=True), worker_group("other", replicas=1)]
    other = workers(1, "other")
    d = run({"groups": groups}, [HEAD, *workers(2), *other])
    assert sorted(c.target.name for c in deletes(d)) == sorted(p["metadata"]["name"] for p in workers(2))
    assert not creates(d)


def test_unsatisfied_group_expectations_skip_the_group() -> None:
    exp = expect_scale_pod(
        ScaleExpectations(), group="small", pod_name="x", action=ScaleAction.DELETE, now=T0
    )
    groups = [worker_group(replicas=5), worker_group("other", replicas=1)]
    d = run({"groups": groups}, [HEAD, pod("x")], expectations=exp, now_s=3600)
    assert [c.object["metadata"]["labels"]["ray.io/group"] for c in creates(d)] == ["other"]
    assert [p.name for p in d.expectations.for_group("small")] == ["x"]  # deletes never time out


def test_pending_pods_count_as_running() -> None:
    pending = [pod(f"demo-small-worker-p{i}", phase="Pending", ready=False) for i in range(2)]
    d = run({}, [HEAD, *pending])
    assert not creates(d) and not deletes(d)


# --- suspend (atomic) ----------------------------------------------------------------------------


def _status(*conds: tuple[str, str]) -> dict[str, Any]:
    return {"conditions": [{"type": t, "status": s, "reason": t, "message": ""} for t, s in conds]}


def test_spec_suspend_waits_for_suspending_condition() -> None:
    d = run({"suspend": True}, [HEAD, *workers(2)])
    assert not deletes(d)
    assert d.status is not None
    conds = {c["type"]: c["status"] for c in d.status["conditions"]}
    assert conds["RayClusterSuspending"] == "True"


@pytest.mark.parametrize("spec_suspend", [True, False])  # a flip back to false mid-way still completes
def test_suspending_deletes_all_pods(spec_suspend: bool) -> None:
    status = _status(("RayClusterSuspending", "True"))
    already = pod("demo-small-worker-gone0", deleting=True)
    d = run({"suspend": spec_suspend, "status": status}, [HEAD, *workers(2), already])
    assert len(deletes(d)) == 3  # terminating Pods are not deleted again
    assert {c.event_reason for c in deletes(d)} == {"DeletedPod"}
    assert not creates(d)


def test_suspending_without_pods_becomes_suspended() -> None:
    d = run({"suspend": True, "status": _status(("RayClusterSuspending", "True"))}, [])
    assert d.status is not None
    conds = {c["type"]: (c["status"], c.get("message")) for c in d.status["conditions"]}
    assert conds["RayClusterSuspending"][0] == "False"
    assert conds["RayClusterSuspended"][0] == "True"
    assert conds["RayClusterProvisioned"] == ("False", "RayCluster has been suspended")
    assert d.status["state"] == "suspended"
    assert not creates(d)


def test_suspended_then_resumed() -> None:
    status = _status(("RayClusterSuspended", "True"))
    assert not run({"suspend": True, "status": status}, []).commands
    d = run({"suspend": False, "status": status}, [])
    assert not creates(d)  # still Suspended this round; the condition flips first
    assert d.status is not None
    assert {c["type"]: c["status"] for c in d.status["conditions"]}["RayClusterSuspended"] == "False"


def test_gate_off_suspend_deletes_directly() -> None:
    settings = OperatorSettings.from_env({}, feature_gates="RayClusterStatusConditions=false")
    d = run({"suspend": True}, [HEAD, *workers(1)], settings=settings)
    assert len(deletes(d)) == 2


# --- Recreate upgrade ----------------------------------------------------------------------------


def _hash_of(cluster_kw: dict[str, Any]) -> str:
    d = run(cluster_kw, [])
    return str(creates(d)[0].object["metadata"]["annotations"][UPGRADE_STRATEGY_RECREATE_HASH_KEY])


def test_recreate_on_spec_change_deletes_everything_and_clears_expectations() -> None:
    kw: dict[str, Any] = {"upgradeStrategy": {"type": "Recreate"}}
    old_hash = _hash_of({**kw, "rayVersion": "2.45.0"})
    head = pod(
        "demo-head-abcde",
        node_type="head",
        annotations={
            UPGRADE_STRATEGY_RECREATE_HASH_KEY: old_hash,
            KUBERAY_VERSION_KEY: SETTINGS.kuberay_version,
        },
    )
    exp = expect_scale_pod(
        ScaleExpectations(), group="small", pod_name="zz", action=ScaleAction.DELETE, now=T0
    )
    d = run({**kw, "rayVersion": "2.46.0"}, [head, *workers(2)], expectations=exp)
    assert len(deletes(d)) == 3 and not creates(d)
    assert d.expectations.is_empty()


def test_recreate_ignores_replica_changes() -> None:
    kw: dict[str, Any] = {"upgradeStrategy": {"type": "Recreate"}}
    h = _hash_of({**kw, "groups": [worker_group(replicas=1)]})
    head = pod(
        "demo-head-abcde",
        node_type="head",
        annotations={UPGRADE_STRATEGY_RECREATE_HASH_KEY: h, KUBERAY_VERSION_KEY: SETTINGS.kuberay_version},
    )
    d = run({**kw, "groups": [worker_group(replicas=3)]}, [head, *workers(1)])
    assert not deletes(d) and len(creates(d)) == 2


def test_recreate_skipped_when_operator_version_changed() -> None:
    kw: dict[str, Any] = {"upgradeStrategy": {"type": "Recreate"}, "groups": []}
    head = pod(
        "demo-head-abcde",
        node_type="head",
        annotations={UPGRADE_STRATEGY_RECREATE_HASH_KEY: "OLDHASH", KUBERAY_VERSION_KEY: "v1.3.0"},
    )
    d = run(kw, [head])
    assert not deletes(d)
    (patch,) = patches(d, "Pod")
    annotations = patch.merge_patch["metadata"]["annotations"]
    assert annotations[KUBERAY_VERSION_KEY] == SETTINGS.kuberay_version
    assert annotations[UPGRADE_STRATEGY_RECREATE_HASH_KEY] == _hash_of(kw)


def test_no_recreate_without_strategy() -> None:
    head = pod("demo-head-abcde", node_type="head", annotations={UPGRADE_STRATEGY_RECREATE_HASH_KEY: "OLD"})
    assert not deletes(run({"groups": []}, [head]))


def test_reconcile_pods_direct_api() -> None:
    out = reconcile_pods(
        with_defaults(make_cluster()),
        pods=[],
        expectations=ScaleExpectations(),
        settings=SETTINGS,
        now=T0,
        entropy="e",
    )
    assert out.error is None and len(out.commands) == 3 and out.cleared_workers_to_delete == []
