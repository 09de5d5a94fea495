"""GCS FT Redis cleanup: the finalizer before any Pod, the cleanup Job on deletion, the finalizer
removal on Job completion/failure or after ray.io/gcs-ft-deletion-timeout (issue 13 item 2)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.decisions.cluster.reconcile import ClusterDecision, ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.redis_cleanup import (
    GCS_FT_REDIS_CLEANUP_FINALIZER as FIN,
)
from raybus.decisions.cluster.redis_cleanup import (
    build_redis_cleanup_job,
    deletion_timeout_seconds,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject, RecordEvent
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    SETTINGS,
    T0,
    apply,
    creates,
    later,
    make_cluster,
    patches,
    pod,
)

FT = {"gcsFaultToleranceOptions": {"redisAddress": "redis:6379"}}
DELETED_AT = "2026-01-01T00:00:00Z"


def decide(snapshot: ClusterSnapshot, *, seconds: float = 0, s: OperatorSettings = SETTINGS) -> ClusterDecision:
    return reconcile_cluster(snapshot, settings=s, now=later(seconds), entropy="e")


def ft_cluster(*, finalizers: list[str] | None = None, deleting: bool = False,
               annotations: dict[str, str] | None = None, **spec: Any):  # type: ignore[no-untyped-def]
    rc = make_cluster(annotations=annotations, **{**FT, **spec})
    body = rc.to_manifest()
    if finalizers is not None:
        body["metadata"]["finalizers"] = finalizers
    if deleting:
        body["metadata"]["deletionTimestamp"] = DELETED_AT
    return type(rc).model_validate(body)


def job(status: dict[str, Any] | None = None) -> dict[str, Any]:
    manifest = copy.deepcopy(build_redis_cleanup_job(ft_cluster(finalizers=[FIN]), settings=SETTINGS))
    manifest["status"] = status or {}
    return manifest


def finished(kind: str) -> dict[str, Any]:
    return {"conditions": [{"type": kind, "status": "True"}], "failed" if kind == "Failed" else "succeeded": 1}


# --- the finalizer ---------------------------------------------------------------------------------------
def test_finalizer_is_added_first_with_the_resource_version_and_no_pod() -> None:
    d = decide(ClusterSnapshot(cluster=ft_cluster(finalizers=["other"])))
    (patch,) = d.commands
    assert isinstance(patch, PatchObject) and patch.target.kind == "RayCluster" and patch.target.uid == "uid-1"
    assert patch.merge_patch == {"metadata": {"finalizers": ["other", FIN], "resourceVersion": "100"}}
    assert d.requeue_after == 2.0 and d.status is None


@pytest.mark.parametrize(
    ("spec", "s", "adds"),
    [
        (FT, SETTINGS, True),
        ({}, SETTINGS, False),
        (FT, OperatorSettings(enable_gcs_ft_redis_cleanup=False), False),
    ],
    ids=["ft", "no-ft", "ENABLE_GCS_FT_REDIS_CLEANUP=false"],
)
def test_finalizer_only_with_redis_ft_and_cleanup_enabled(spec: dict[str, Any], s: OperatorSettings,
                                                          adds: bool) -> None:
    d = decide(ClusterSnapshot(cluster=make_cluster(**spec)), s=s)
    assert bool(patches(d)) == adds
    assert bool(creates(d, "Pod")) != adds


def test_annotation_enables_ft_and_the_finalizer_too() -> None:
    rc = make_cluster(annotations={"ray.io/ft-enabled": "true"})
    assert patches(decide(ClusterSnapshot(cluster=rc)))[0].merge_patch["metadata"]["finalizers"] == [FIN]


def test_with_the_finalizer_the_cluster_is_reconciled_normally() -> None:
    d = decide(ClusterSnapshot(cluster=ft_cluster(finalizers=[FIN])))
    assert creates(d, "Pod") and not patches(d)


# --- deletion --------------------------------------------------------------------------------------------
def test_deletion_deletes_head_then_workers_and_waits_for_the_head() -> None:
    pods = [pod("w1"), pod("h", node_type="head"), pod("w2", deleting=True)]
    d = decide(ClusterSnapshot(cluster=ft_cluster(finalizers=[FIN], deleting=True), pods=pods))
    deleted = [c.target.name for c in d.commands if isinstance(c, DeleteObject)]
    assert deleted == ["h", "w1"]  # head first; an already terminating Pod is not deleted again
    assert all(c.target.uid for c in d.commands if isinstance(c, DeleteObject))
    assert d.requeue_after == 10.0 and not creates(d, "Job") and d.status is None


def test_terminating_head_still_blocks_the_job() -> None:
    pods = [pod("h", node_type="head", deleting=True)]
    d = decide(ClusterSnapshot(cluster=ft_cluster(finalizers=[FIN], deleting=True), pods=pods))
    assert d.commands == [] and d.requeue_after == 10.0


def test_cleanup_job_is_created_once_the_head_is_gone() -> None:
    pods = [pod("w1", deleting=True)]
    d = decide(ClusterSnapshot(cluster=ft_cluster(finalizers=[FIN], deleting=True), pods=pods))
    (create,) = creates(d, "Job")
    assert create.event_reason == "CreatedRedisCleanupJob" and d.requeue_after == 2.0
    j = create.object
    assert j["metadata"]["name"] == "demo-redis-cleanup"
    labels = j["metadata"]["labels"]
    assert labels["ray.io/node-type"] == "redis-cleanup" and labels["ray.io/cluster"] == "demo"
    assert labels["app.kubernetes.io/created-by"] == "kuberay-operator"  # the watcher's Job selector
    assert j["spec"]["template"]["metadata"]["labels"] == labels
    assert j["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    assert j["spec"]["backoffLimit"] == 0 and j["spec"]["activeDeadlineSeconds"] == 300
    spec = j["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never" and len(spec["containers"]) == 1
    ray = spec["containers"][0]
    assert ray["command"] == ["/bin/bash", "-lc", "--"]
    assert ray["args"][0].startswith('echo "To get more information about manually delete the storage namespace')
    assert "cleanup_redis_storage(host=parsed.hostname, port=parsed.port, password=" in ray["args"][0]
    assert "livenessProbe" not in ray and "readinessProbe" not in ray
    assert ray["resources"] == {"limits": {"cpu": "200m", "memory": "256Mi"},
                                "requests": {"cpu": "200m", "memory": "256Mi"}}
    env = {e["name"]: e.get("value") for e in ray["env"]}
    assert env["RAY_redis_db_connect_retries"] == "120" and env["RAY_redis_db_connect_wait_milliseconds"] == "500"
    assert env["RAY_REDIS_ADDRESS"] == "redis:6379" and env["RAY_external_storage_namespace"] == "uid-1"


def test_redis_username_switches_the_script() -> None:
    rc = ft_cluster(finalizers=[FIN], gcsFaultToleranceOptions={
        "redisAddress": "redis:6379", "redisUsername": {"value": "u"}})
    script = build_redis_cleanup_job(rc, settings=SETTINGS)["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "username=os.getenv('REDIS_USERNAME', parsed.username)" in script


@pytest.mark.parametrize("outcome", ["Complete", "Failed"])
def test_finished_job_removes_only_our_finalizer(outcome: str) -> None:
    rc = ft_cluster(finalizers=["keep", FIN], deleting=True)
    d = decide(ClusterSnapshot(cluster=rc, jobs=[job(finished(outcome))]))
    (patch,) = patches(d)
    assert patch.merge_patch == {"metadata": {"finalizers": ["keep"], "resourceVersion": "100"}}
    assert d.requeue_after is None


def test_running_job_requeues() -> None:
    d = decide(ClusterSnapshot(cluster=ft_cluster(finalizers=[FIN], deleting=True), jobs=[job({"active": 1})]))
    assert d.commands == [] and d.requeue_after == 2.0


@pytest.mark.parametrize(
    ("annotation", "seconds"),
    [(None, 300.0), ("10m", 600.0), ("90", 90.0), ("1h30m", 5400.0), ("nonsense", 300.0), ("0", 300.0)],
)
def test_deletion_timeout_annotation(annotation: str | None, seconds: float) -> None:
    annotations = {"ray.io/gcs-ft-deletion-timeout": annotation} if annotation else {}
    assert deletion_timeout_seconds(ft_cluster(annotations=annotations)) == seconds


def test_stuck_deletion_is_forced_after_the_timeout() -> None:
    rc = ft_cluster(finalizers=[FIN], deleting=True, annotations={"ray.io/gcs-ft-deletion-timeout": "60s"})
    pods = [pod("h", node_type="head", deleting=True)]
    before = decide(ClusterSnapshot(cluster=rc, pods=pods), seconds=55)
    assert before.requeue_after == 5.0  # woken in time for the timeout, not after 10 s
    after = decide(ClusterSnapshot(cluster=rc, pods=pods), seconds=60)
    event, patch = after.commands
    assert isinstance(event, RecordEvent) and event.type == "Warning"
    assert event.event_reason == "ForceDeletedStuckCluster" and "uid-1" in event.message  # storage namespace
    assert isinstance(patch, PatchObject) and patch.merge_patch["metadata"]["finalizers"] == []


def test_deleting_without_our_finalizer_is_left_alone() -> None:
    d = decide(ClusterSnapshot(cluster=ft_cluster(finalizers=["other"], deleting=True), pods=[pod("h", node_type="head")]))
    assert d.commands == [] and d.requeue_after is None


def test_deleting_non_ft_cluster_is_ignored() -> None:
    rc = make_cluster()
    body = rc.to_manifest()
    body["metadata"]["deletionTimestamp"] = DELETED_AT
    d = decide(ClusterSnapshot(cluster=type(rc).model_validate(body), pods=[pod("h", node_type="head")]))
    assert d.commands == [] and d.requeue_after is None


# --- the whole lifecycle in the in-memory world ----------------------------------------------------------
def _run_job(snapshot: ClusterSnapshot, outcome: str) -> ClusterSnapshot:
    return snapshot.model_copy(update={"jobs": [dict(j, status=finished(outcome)) for j in snapshot.jobs]})


@settings(max_examples=30, deadline=None)
@given(workers=st.integers(0, 3), outcome=st.sampled_from(["Complete", "Failed"]),
       head_lingers=st.integers(0, 3))
def test_lifecycle_finalizer_pods_deletion_job_release(workers: int, outcome: str, head_lingers: int) -> None:
    """Create -> finalizer before any Pod -> Pods -> delete: Pods go, the Job runs only once the
    head is gone, the finalizer goes once the Job finished; never two Jobs, never Pods while deleting."""
    rc = make_cluster(groups=[{**_group(), "replicas": workers}], **FT)
    snapshot = ClusterSnapshot(cluster=rc)
    first = decide(snapshot)
    assert not creates(first, "Pod") and patches(first)
    for i in range(4):
        snapshot = apply(snapshot, decide(snapshot, seconds=i))
    assert FIN in (snapshot.cluster.metadata.finalizers or [])
    assert len(snapshot.pods) == workers + 1
    body = snapshot.cluster.to_manifest()
    body["metadata"]["deletionTimestamp"] = DELETED_AT
    snapshot = snapshot.model_copy(update={"cluster": type(rc).model_validate(body)})
    jobs_created = 0
    for i in range(20):
        d = decide(snapshot, seconds=10 + i)
        assert not creates(d, "Pod")
        jobs_created += len(creates(d, "Job"))
        if any(isinstance(c, DeleteObject) and c.target.name.startswith("demo-head") for c in d.commands):
            assert jobs_created == 0
        # The kubelet may take a few rounds to terminate the head.
        nxt = apply(snapshot, d, drop_deleted=False)
        if i >= head_lingers:
            nxt = nxt.model_copy(update={"pods": [p for p in nxt.pods if not p["metadata"].get("deletionTimestamp")]})
        if nxt.jobs and not any(podutil_head(p) for p in nxt.pods):
            nxt = _run_job(nxt, outcome)
        snapshot = nxt
        if FIN not in (snapshot.cluster.metadata.finalizers or []):
            break
    assert FIN not in (snapshot.cluster.metadata.finalizers or [])
    assert jobs_created == 1 and snapshot.pods == []


def podutil_head(p: dict[str, Any]) -> bool:
    return bool(p["metadata"]["labels"].get("ray.io/node-type") == "head")


def _group() -> dict[str, Any]:
    from tests.unit.decisions.cluster.test_reconcile_helpers import worker_group

    return worker_group()


def test_deletion_timestamp_in_the_future_of_now_is_not_a_timeout() -> None:
    rc = ft_cluster(finalizers=[FIN], deleting=True)
    d = reconcile_cluster(ClusterSnapshot(cluster=rc), settings=SETTINGS, now=T0 - timedelta(seconds=5), entropy="e")
    assert creates(d, "Job") and not any(isinstance(c, RecordEvent) for c in d.commands)
    assert isinstance(creates(d, "Job")[0], CreateObject)
