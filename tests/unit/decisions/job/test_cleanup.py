"""Terminal cleanup: shutdownAfterJobFinishes + TTL, DELETE_RAYJOB_CR_AFTER_JOB_FINISHES, legacy
onSuccess/onFailure, deletionRules (rayjob_controller_unit_test.go's deletion-rule cases)."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.decisions.job.model import JobSnapshot
from raybus.decisions.job.settings import JobSettings
from tests.unit.decisions.job.fixtures import decide, deleted, make_cluster, make_job, patched, submitter, ts

CL = "rj-abcde"


def done(jds: str = "Complete", job_status: str = "SUCCEEDED") -> dict[str, Any]:
    return {"jobDeploymentStatus": jds, "jobStatus": job_status, "jobId": "j", "rayClusterName": CL,
            "startTime": ts(0), "endTime": ts(100)}


def snap(status: dict[str, Any], *, cluster: str = "live", **spec: Any) -> JobSnapshot:
    job = make_job(status=status, **spec)
    c = None
    if cluster != "gone":
        c = make_cluster(job, CL, deleting=cluster == "deleting", suspended_workers=cluster == "suspended")
    return JobSnapshot(rayjob=job, cluster=c, submitter=submitter(finished="Complete", at_seconds=99))


SHUTDOWN = {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 10}


def test_no_cleanup_configured_keeps_everything() -> None:
    d = decide(snap(done()), seconds=1000)
    assert d.commands == [] and d.status is None and d.requeue_after is None and d.interest.cluster is None


def test_shutdown_after_ttl_deletes_only_the_cluster() -> None:
    early = decide(snap(done(), **SHUTDOWN), seconds=104)
    assert early.commands == [] and early.requeue_after == 6.0
    d = decide(snap(done(), **SHUTDOWN), seconds=110)
    assert deleted(d, "RayCluster") == [CL] and deleted(d, "Job") == [] and d.requeue_after is None
    assert decide(snap(done(), cluster="deleting", **SHUTDOWN), seconds=111).commands == []
    assert decide(snap(done(), cluster="gone", **SHUTDOWN), seconds=111).commands == []


def test_shutdown_applies_to_failed_jobs_too() -> None:
    d = decide(snap(done("Failed", "FAILED"), **SHUTDOWN), seconds=110)
    assert deleted(d, "RayCluster") == [CL]


def test_delete_rayjob_cr_after_job_finishes() -> None:
    d = decide(snap(done(), **SHUTDOWN), seconds=110, settings=JobSettings(delete_rayjob_cr_after_job_finishes=True))
    assert deleted(d, "RayJob") == ["rj"] and deleted(d, "RayCluster") == []


def test_cluster_selector_is_never_cleaned_up() -> None:
    d = decide(snap(done(), clusterSelector={"ray.io/cluster": CL}, shutdownAfterJobFinishes=True), seconds=1000)
    assert d.commands == [] and d.requeue_after is None


@pytest.mark.parametrize(("job_status", "policy", "expect"), [
    ("SUCCEEDED", "onSuccess", "DeleteCluster"), ("FAILED", "onFailure", "DeleteWorkers"),
    ("STOPPED", None, None), ("RUNNING", None, None)])
def test_legacy_policy(job_status: str, policy: str | None, expect: str | None) -> None:
    strategy = {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteWorkers"}}
    jds = "Complete" if job_status in ("SUCCEEDED", "STOPPED") else "Failed"
    d = decide(snap(done(jds, job_status), deletionStrategy=strategy, ttlSecondsAfterFinished=0), seconds=100)
    if expect == "DeleteCluster":
        assert deleted(d, "RayCluster") == [CL]
    elif expect == "DeleteWorkers":
        [patch] = patched(d, "RayCluster")
        assert [g["suspend"] for g in patch["spec"]["workerGroupSpecs"]] == [True]
        assert patch["metadata"] == {"resourceVersion": "3"}
    else:  # e.g. DeadlineExceeded while RUNNING: KubeRay applies no policy
        assert d.commands == []


def test_legacy_delete_none_and_ttl() -> None:
    none = {"onSuccess": {"policy": "DeleteNone"}, "onFailure": {"policy": "DeleteNone"}}
    assert decide(snap(done(), deletionStrategy=none), seconds=1000).commands == []
    # A TTL needs shutdownAfterJobFinishes (validation); the legacy policy still decides what goes.
    strategy = {"onSuccess": {"policy": "DeleteSelf"}, "onFailure": {"policy": "DeleteCluster"}}
    spec = {"deletionStrategy": strategy, "ttlSecondsAfterFinished": 30, "shutdownAfterJobFinishes": True}
    d = decide(snap(done(), **spec), seconds=120)
    assert d.commands == [] and d.requeue_after == 10.0
    assert deleted(decide(snap(done(), **spec), seconds=130), "RayJob") == ["rj"]


RULES = {"deletionRules": [
    {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 30}},
    {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 60}},
    {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": 90}},
    {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
]}


def test_deletion_rules_fire_in_ttl_order_one_action_per_reconcile() -> None:
    failed = done("Failed", "FAILED")
    assert decide(snap(failed, deletionStrategy=RULES), seconds=110).requeue_after == 20.0
    d = decide(snap(failed, deletionStrategy=RULES), seconds=131)
    assert len(patched(d, "RayCluster")) == 1 and d.requeue_after == 29.0
    # workers already suspended: that rule is complete, wait for DeleteCluster
    d2 = decide(snap(failed, cluster="suspended", deletionStrategy=RULES), seconds=132)
    assert d2.commands == [] and d2.requeue_after == 28.0
    d3 = decide(snap(failed, cluster="suspended", deletionStrategy=RULES), seconds=160)
    assert deleted(d3, "RayCluster") == [CL]
    d4 = decide(snap(failed, cluster="gone", deletionStrategy=RULES), seconds=170)
    assert d4.commands == [] and d4.requeue_after == 20.0


def test_overdue_rules_after_downtime_run_the_most_impactful_only() -> None:
    d = decide(snap(done("Failed", "FAILED"), deletionStrategy=RULES), seconds=500)
    assert deleted(d, "RayJob") == ["rj"] and deleted(d, "RayCluster") == [] and patched(d, "RayCluster") == []


def test_deletion_rules_match_job_status_or_deployment_status() -> None:
    d = decide(snap(done(), deletionStrategy=RULES), seconds=100)
    assert deleted(d, "RayCluster") == [CL]
    by_jds = {"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobDeploymentStatus": "Failed"}}]}
    deadline = done("Failed", "RUNNING") | {"reason": "DeadlineExceeded"}
    assert deleted(decide(snap(deadline, deletionStrategy=by_jds), seconds=100), "RayCluster") == [CL]
    assert decide(snap(done(), deletionStrategy=by_jds), seconds=100).commands == []


def test_missing_end_time_counts_as_long_finished() -> None:
    status = done()
    del status["endTime"]
    assert deleted(decide(snap(status, **SHUTDOWN), seconds=0), "RayCluster") == [CL]
