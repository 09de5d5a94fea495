"""calculateStatus / InconsistentRayClusterStatus: mirrors TestCalculateStatus*,
TestRayClusterProvisionedCondition, TestStateTransitionTimes, TestGetHeadServiceIPAndName,
TestUpdateEndpoints and utils/consistency_test.go."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api import with_defaults
from raybus.decisions.cluster.outcome import ReconcileError
from raybus.decisions.cluster.reconcile import (
    ClusterSnapshot,
    CommandFailure,
    reconcile_cluster,
    status_update,
)
from raybus.decisions.cluster.status import (
    StatusError,
    calculate_status,
    differs_beyond_transition_times,
    head_pod_ready_condition,
    inconsistent_status,
    set_condition,
)
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    SETTINGS,
    T0,
    head_service,
    later,
    make_cluster,
    pod,
    worker_group,
)

HEAD = pod("demo-head-abcde", node_type="head", ip="10.0.0.9")


def workers(n: int, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"demo-small-worker-{i:05d}", **kw) for i in range(n)]


def status_of(
    pods: list[dict[str, Any]],
    *,
    error: ReconcileError | None = None,
    services: list[dict[str, Any]] | None = None,
    **cluster_kw: Any,
) -> dict[str, Any]:
    cluster = with_defaults(make_cluster(**cluster_kw))
    return calculate_status(
        cluster,
        pods=pods,
        head_services=[head_service()] if services is None else services,
        planned_head_service=False,
        reconcile_error=error,
        settings=SETTINGS,
        now=T0,
    )


def conds(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}


def test_counts_resources_and_ready_state() -> None:
    s = status_of([HEAD, *workers(2)], groups=[worker_group(replicas=2, minReplicas=1, maxReplicas=4)])
    assert s["state"] == "ready"
    assert (s["readyWorkerReplicas"], s["availableWorkerReplicas"], s["desiredWorkerReplicas"]) == (2, 2, 2)
    assert (s["minWorkerReplicas"], s["maxWorkerReplicas"]) == (1, 4)
    assert (s["desiredCPU"], s["desiredMemory"], s["desiredGPU"], s["desiredTPU"]) == ("3", "2Gi", "0", "0")
    assert s["observedGeneration"] == 1
    assert s["lastUpdateTime"] == "2026-01-01T00:00:00Z"
    assert s["stateTransitionTimes"] == {"ready": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("pods", "error", "ready"),
    [
        ([HEAD], None, False),  # one worker missing
        ([HEAD, *workers(2, phase="Pending", ready=False)], None, False),
        ([HEAD, *workers(2, ready=False)], None, False),  # PodReady=False
        ([HEAD, *workers(2)], ReconcileError("boom"), False),  # reconcile error
        ([HEAD, *workers(3)], None, False),  # more Pods than desired
        ([HEAD, *workers(2)], None, True),
    ],
)
def test_ready_state_rules(pods: list[dict[str, Any]], error: ReconcileError | None, ready: bool) -> None:
    assert (status_of(pods, error=error).get("state") == "ready") is ready


def test_ready_is_sticky_until_suspended() -> None:
    s = status_of([HEAD], status={"state": "ready"})  # a worker disappeared
    assert s["state"] == "ready"
    s = status_of([], suspend=True, status={"state": "ready"})
    assert s["state"] == "suspended"
    assert s["stateTransitionTimes"] == {"suspended": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (None, ("False", "HeadPodNotFound")),
        (HEAD, ("True", "HeadPodRunningAndReady")),
        (pod("h", node_type="head", ready=False), ("False", "Unknown")),
    ],
)
def test_head_pod_ready_condition(head: dict[str, Any] | None, expected: tuple[str, str]) -> None:
    s = status_of([head] if head else [])
    assert conds(s)["HeadPodReady"] == expected


def test_head_pod_ready_uses_container_waiting_reason() -> None:
    head = pod("h", node_type="head", ready=False)
    head["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
    head["status"]["containerStatuses"] = [
        {"name": "ray-head", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    ]
    assert head_pod_ready_condition(head)[:2] == ("False", "CrashLoopBackOff")
    head["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "PodCompleted"}]
    assert head_pod_ready_condition(head)[:2] == ("False", "PodCompleted")


def test_provisioned_first_time_then_sticky() -> None:
    s = status_of([HEAD, *workers(1, phase="Pending", ready=False)])
    assert conds(s)["RayClusterProvisioned"] == ("False", "RayClusterPodsProvisioning")
    # CheckAllPodsRunning ignores the desired count: one running head is enough.
    s = status_of([HEAD])
    assert conds(s)["RayClusterProvisioned"] == ("True", "AllPodRunningAndReadyFirstTime")
    # Once True it is never recomputed, even when Pods break.
    s2 = status_of([pod("h", node_type="head", phase="Failed")], status=s)
    assert conds(s2)["RayClusterProvisioned"] == ("True", "AllPodRunningAndReadyFirstTime")


def test_replica_failure_condition_set_and_removed() -> None:
    s = status_of([HEAD], error=ReconcileError("quota exceeded", "FailedCreateWorkerPod"))
    assert conds(s)["ReplicaFailure"] == ("True", "FailedCreateWorkerPod")
    s2 = status_of([HEAD], status=s)
    assert "ReplicaFailure" not in conds(s2)
    # An error without a replica-failure reason leaves the condition alone.
    s3 = status_of([HEAD], status=s, error=ReconcileError("delete 1 unhealthy worker Pods"))
    assert conds(s3)["ReplicaFailure"] == ("True", "FailedCreateWorkerPod")


def test_last_failures_become_replica_failure_via_reconcile() -> None:
    snap = ClusterSnapshot(
        cluster=make_cluster(),
        pods=[HEAD, *workers(1)],
        services=[head_service()],
        last_failures=[
            CommandFailure(reason="CreatedWorkerPod", message='pods "x" is forbidden: exceeded quota')
        ],
    )
    d = reconcile_cluster(snap, settings=SETTINGS, now=T0, entropy="e")
    assert d.status is not None
    cond = next(c for c in d.status["conditions"] if c["type"] == "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("True", "FailedCreateWorkerPod")
    assert "exceeded quota" in cond["message"]
    # The failure came in an Outcome, which already fed the rate limiter: no timer on top.
    assert d.requeue_after is None and d.error is None


def test_head_info_and_endpoints() -> None:
    s = status_of([HEAD], services=[head_service(cluster_ip="None")])
    assert s["head"] == {
        "podIP": "10.0.0.9",
        "podName": "demo-head-abcde",
        "serviceIP": "10.0.0.9",
        "serviceName": "demo-head-svc",
    }
    assert s["endpoints"] == {"dashboard": "8265", "gcs-server": "6379"}
    s = status_of([], services=[head_service(cluster_ip="10.96.0.5")])
    assert s["head"] == {"serviceIP": "10.96.0.5", "serviceName": "demo-head-svc"}


def test_endpoints_prefer_node_port_and_skip_unnamed() -> None:
    svc = head_service(cluster_ip="10.96.0.5")
    svc["spec"]["ports"] = [
        {"name": "dashboard", "port": 8265, "targetPort": 8265, "nodePort": 30001},
        {"port": 1, "targetPort": 1},
        {"name": "named", "port": 2, "targetPort": "http"},
    ]
    assert status_of([], services=[svc])["endpoints"] == {"dashboard": "30001", "named": "http"}


@pytest.mark.parametrize(
    "services",
    [[], [head_service("a"), head_service("b")], [head_service(cluster_ip="")]],
)
def test_head_service_errors(services: list[dict[str, Any]]) -> None:
    with pytest.raises(StatusError):
        status_of([], services=services)


def test_multiple_heads_is_a_status_error() -> None:
    with pytest.raises(StatusError):
        status_of([HEAD, pod("demo-head-other", node_type="head")])


def test_set_condition_keeps_transition_time_when_status_unchanged() -> None:
    conditions: list[dict[str, Any]] = []
    set_condition(conditions, cond_type="X", status="True", reason="a", message="", now="t1")
    set_condition(conditions, cond_type="X", status="True", reason="b", message="m", now="t2")
    assert conditions == [
        {"type": "X", "status": "True", "lastTransitionTime": "t1", "reason": "b", "message": "m"}
    ]
    set_condition(conditions, cond_type="X", status="False", reason="b", message="m", now="t3")
    assert conditions[0]["lastTransitionTime"] == "t3"


BASE = {
    "state": "ready",
    "readyWorkerReplicas": 1,
    "desiredCPU": "1",
    "lastUpdateTime": "t1",
    "head": {"podIP": "1"},
}


@pytest.mark.parametrize(
    ("change", "inconsistent"),
    [
        ({"lastUpdateTime": "t2"}, False),
        ({"observedGeneration": 7}, False),
        ({"desiredCPU": "5", "desiredMemory": "1Gi"}, False),
        ({"stateTransitionTimes": {"ready": "t9"}}, False),
        ({"state": "suspended"}, True),
        ({"reason": "x"}, True),
        ({"readyWorkerReplicas": 2}, True),
        ({"availableWorkerReplicas": 3}, True),
        ({"desiredWorkerReplicas": 3}, True),
        ({"minWorkerReplicas": 3}, True),
        ({"maxWorkerReplicas": 3}, True),
        ({"endpoints": {"a": "1"}}, True),
        ({"head": {"podIP": "2"}}, True),
        ({"conditions": [{"type": "X", "status": "True", "reason": "r", "message": ""}]}, True),
    ],
)
def test_inconsistent_status(change: dict[str, Any], inconsistent: bool) -> None:
    assert inconsistent_status(BASE, {**BASE, **change}) is inconsistent


def test_status_written_only_when_changed() -> None:
    snap = ClusterSnapshot(cluster=make_cluster(groups=[]), pods=[HEAD], services=[head_service()])
    d1 = reconcile_cluster(snap, settings=SETTINGS, now=T0, entropy="e")
    assert d1.status is not None and d1.requeue_after == 2.0
    snap2 = ClusterSnapshot(
        cluster=make_cluster(groups=[], status=d1.status), pods=[HEAD], services=[head_service()]
    )
    d2 = reconcile_cluster(snap2, settings=SETTINGS, now=later(60), entropy="e")
    assert d2.status is None
    assert d2.requeue_after == SETTINGS.raycluster_default_requeue_seconds


def test_state_transition_times_untouched_without_state_change() -> None:
    before = {"state": "ready", "stateTransitionTimes": {"ready": "2025-01-01T00:00:00Z"}}
    s = status_of([HEAD, *workers(2)], status=before)
    assert s["stateTransitionTimes"] == {"ready": "2025-01-01T00:00:00Z"}


def test_status_update_command() -> None:
    snap = ClusterSnapshot(cluster=make_cluster(groups=[]), pods=[HEAD], services=[head_service()])
    d = reconcile_cluster(snap, settings=SETTINGS, now=T0, entropy="e")
    cmd = status_update(snap, d)
    assert cmd is not None and cmd.status == d.status and cmd.target.kind == "RayCluster"
    assert cmd.target.uid == "uid-1"


def test_failed_pod_create_does_not_block_the_group() -> None:
    snap = ClusterSnapshot(
        cluster=make_cluster(groups=[worker_group(replicas=1)]), pods=[HEAD], services=[head_service()]
    )
    first = reconcile_cluster(snap, settings=SETTINGS, now=T0, entropy="e")
    (created,) = [c for c in first.commands if getattr(c, "event_reason", None) == "CreatedWorkerPod"]
    name = created.object["metadata"]["name"]  # type: ignore[union-attr]
    failure = CommandFailure(reason="FailedCreateWorkerPod", message="quota", target=f"Pod/ns/{name}")
    retry = snap.model_copy(update={"expectations": first.expectations, "last_failures": [failure]})
    again = reconcile_cluster(retry, settings=SETTINGS, now=later(1), entropy="f")
    assert [c.event_reason for c in again.commands if getattr(c, "op", "") == "create"] == [
        "CreatedWorkerPod"
    ]
    # Without the target the expectation holds the group until the 30 s timeout.
    blocked = snap.model_copy(
        update={
            "expectations": first.expectations,
            "last_failures": [failure.model_copy(update={"target": None})],
        }
    )
    assert not [
        c
        for c in reconcile_cluster(blocked, settings=SETTINGS, now=later(1), entropy="f").commands
        if getattr(c, "op", "") == "create"
    ]


def test_desired_resources_follow_the_spec_of_the_same_cluster() -> None:
    """The desired* fields are memoised per RayCluster on its spec object (issue 20): a scale-up
    of the same cluster is a new spec and counts again; the same spec answers as computed."""
    small = status_of([HEAD, *workers(2)], groups=[worker_group(replicas=2)])
    big = status_of([HEAD, *workers(2)], groups=[worker_group(replicas=6)])
    assert (small["desiredCPU"], big["desiredCPU"]) == ("3", "7")
    cluster = with_defaults(make_cluster(groups=[worker_group(replicas=2)]))

    def again() -> dict[str, Any]:
        return calculate_status(cluster, pods=[HEAD], head_services=[head_service()], planned_head_service=False,
                                reconcile_error=None, settings=SETTINGS, now=T0)
    first, second = again(), again()
    assert first["desiredMemory"] == second["desiredMemory"] == small["desiredMemory"]


def test_a_transition_computed_again_from_a_stale_cache_is_the_same_status() -> None:
    """Two rounds on the same cached RayCluster (the first one's status write not in the cache
    yet) stamp the same transitions with their own times: KubeRay's comparison sees a change, the
    in-flight memo's must not (writing it again would only move lastTransitionTime later)."""
    snap = ClusterSnapshot(cluster=make_cluster(groups=[]), pods=[HEAD], services=[head_service()])
    first = reconcile_cluster(snap, settings=SETTINGS, now=T0, entropy="e").status
    again = reconcile_cluster(snap, settings=SETTINGS, now=later(3), entropy="e").status
    assert first is not None and again is not None
    assert inconsistent_status(first, again)
    assert not differs_beyond_transition_times(first, again)
    flipped = {**again, "conditions": [{**c, "status": "True" if c["status"] == "False" else "False"}
                                       for c in again["conditions"]]}
    assert differs_beyond_transition_times(first, flipped)
    assert differs_beyond_transition_times(first, {**again, "readyWorkerReplicas": 3})

