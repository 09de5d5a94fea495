"""Every transition of the seed's JobDeploymentStatus table (002 "状态转换汇总表"), plus the v1.7
ones the seed lists as Failed reasons: one row each = starting status + observation -> expected
status, reason, commands and Events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from raybus.decisions.job.model import JobSnapshot
from tests.unit.decisions.job.fixtures import (
    T0,
    decide,
    head_pod,
    make_cluster,
    make_job,
    observation,
    submitter,
    ts,
)

CL = "rj-abcde"
T0_MS = int(T0.timestamp() * 1000)
JID = "rj-xyz12"


def st(jds: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"jobDeploymentStatus": jds, "jobId": JID, "rayClusterName": CL, "startTime": ts(0),
                            "failed": 0, "succeeded": 0}
    if jds in ("Running", "Waiting") or kw.pop("url", False):
        base["dashboardURL"] = f"{CL}-head-svc.ns.svc.cluster.local:8265"
    base.update(kw)
    return base


Build = Callable[[], JobSnapshot]


@dataclass
class Row:
    id: str
    build: Build
    seconds: float
    jds: str
    reason: str | None = None
    job_status: str | None = None
    events: list[str] = field(default_factory=list)
    check: Callable[[Any], None] | None = None


def snap(status: dict[str, Any] | None, *, cluster: bool | str = True, sub: dict[str, Any] | None = None,
         obs: Any = None, pods: list[dict[str, Any]] | None = None, **spec: Any) -> Build:
    def build() -> JobSnapshot:
        job = make_job(status=status, **spec)
        c = None
        if cluster:
            c = make_cluster(job, CL, ready=cluster != "not-ready")
        return JobSnapshot(rayjob=job, cluster=c, submitter=sub, dashboard=obs, head_pods=pods or [],
                           head_service={"metadata": {"name": "rj-head-svc"},
                                         "spec": {"selector": {"ray.io/cluster": CL}}})
    return build


def kinds_created(d: Any) -> list[str]:
    return sorted(c.object["kind"] for c in d.commands if getattr(c, "op", "") == "create")


ROWS = [
    # --- seed table ---
    # (The finalizer is added first, on its own: test_new_adds_the_finalizer_before_any_status.)
    Row("New->Initializing", snap(None, cluster=False), 0, "Initializing",
        check=lambda d: (d.status["startTime"] == ts(0) and d.commands == []
                         and d.status["jobId"].startswith("rj-") and d.status["rayClusterName"].startswith("rj-"))),
    Row("Initializing->Running (K8sJobMode: cluster ready, submitter created)",
        snap(st("Initializing"), sub=None), 5, "Running", events=["CreatedRayJobSubmitter"],
        check=lambda d: d.status["dashboardURL"] == f"{CL}-head-svc.ns.svc.cluster.local:8265"
        and kinds_created(d) == ["Job"]),
    Row("Initializing->Running (HTTPMode: no submitter)", snap(st("Initializing"), submissionMode="HTTPMode"), 5,
        "Running", check=lambda d: kinds_created(d) == [] and d.interest.jobs == [JID]),
    Row("Initializing->Running (SidecarMode)", snap(st("Initializing"), submissionMode="SidecarMode"), 5, "Running",
        check=lambda d: kinds_created(d) == []),
    Row("Initializing->Waiting (InteractiveMode)", snap(st("Initializing", jobId=None), submissionMode="InteractiveMode"),
        5, "Waiting"),
    Row("Initializing->Suspending (suspend)", snap(st("Initializing"), suspend=True, shutdownAfterJobFinishes=True), 5,
        "Suspending"),
    Row("Initializing->Failed (activeDeadlineSeconds)", snap(st("Initializing"), cluster="not-ready",
                                                            activeDeadlineSeconds=10), 10, "Failed",
        reason="DeadlineExceeded",
        check=lambda d: d.status["message"] == "The RayJob has passed the activeDeadlineSeconds. "
        "StartTime: 2026-01-01 00:00:00 +0000 UTC. ActiveDeadlineSeconds: 10" and d.status["failed"] == 1
        and d.status["endTime"] == ts(10)),
    Row("Waiting->Running (spec.jobId set)", snap(st("Waiting", jobId=None), submissionMode="InteractiveMode",
                                                 jobId="user-id"), 5, "Running",
        check=lambda d: d.status["jobId"] == "user-id" and d.interest.jobs == ["user-id"]),
    Row("Running->Complete (SUCCEEDED + submitter finished)",
        snap(st("Running", jobStatus="RUNNING"), sub=submitter(finished="Complete", at_seconds=20),
             obs=observation(CL, jobs={JID: "SUCCEEDED"}, start_ms=1000, end_ms=19000)), 21, "Complete",
        job_status="SUCCEEDED",
        check=lambda d: d.status["succeeded"] == 1 and d.status["rayJobInfo"]["endTime"] == "1970-01-01T00:00:19Z"
        and d.status["endTime"] == ts(21)),
    # Nothing observed within the read-back (test_failed_submitter_reads_the_ray_job_first): a submission failure.
    Row("Running->Failed (submitter Job failed)", snap(st("Running", jobStatus="RUNNING"),
                                                       sub=submitter(finished="Failed", at_seconds=20)), 25,
        "Failed", reason="SubmissionFailed",
        check=lambda d: d.status["message"] == "Job submission has failed. Reason: BackoffLimitExceeded. "
        "Message: Job has reached the specified backoff limit"),
    Row("Running->Failed (activeDeadlineSeconds)", snap(st("Running", jobStatus="RUNNING"), sub=submitter(),
                                                        activeDeadlineSeconds=60), 60, "Failed",
        reason="DeadlineExceeded"),
    # KubeRay judges with its last poll's jobStatus (here RUNNING -> SubmissionFailed); raybus applies
    # the observation first, so the job's own failure explains the submitter's.
    Row("Running->Failed (AppFailed: job FAILED + submitter failed)",
        snap(st("Running", jobStatus="RUNNING"), sub=submitter(finished="Failed", at_seconds=20),
             obs=observation(CL, jobs={JID: "FAILED"}, message="boom")), 21, "Failed", reason="AppFailed",
        job_status="FAILED", check=lambda d: d.status["message"] == "boom"),
    Row("Running->Failed (AppFailed: FAILED observed, submitter Complete)",
        snap(st("Running", jobStatus="RUNNING"), sub=submitter(finished="Complete", at_seconds=20),
             obs=observation(CL, jobs={JID: "FAILED"}, message="boom")), 21, "Failed", reason="AppFailed",
        job_status="FAILED", check=lambda d: d.status["message"] == "boom"),
    Row("Running->Suspending (suspend)", snap(st("Running"), sub=submitter(), suspend=True,
                                              shutdownAfterJobFinishes=True), 5, "Suspending"),
    Row("Suspending->Suspended (resources gone)", snap(st("Suspending"), cluster=False, suspend=True,
                                                       shutdownAfterJobFinishes=True), 5, "Suspended",
        check=lambda d: "rayClusterName" not in d.status and "jobId" not in d.status
        and "dashboardURL" not in d.status),
    Row("Suspended->New (resume)", snap(st("Suspended", jobId=None, rayClusterName=None), cluster=False,
                                        shutdownAfterJobFinishes=True), 5, ""),
    Row("Failed->Retrying (backoffLimit, not a deadline)",
        snap(st("Running", jobStatus="RUNNING"), sub=submitter(finished="Complete", at_seconds=20),
             obs=observation(CL, jobs={JID: "FAILED"}), backoffLimit=2), 21, "Retrying", reason="AppFailed",
        check=lambda d: d.status["failed"] == 1 and "endTime" not in d.status),
    Row("Retrying->New (resources gone)", snap(st("Retrying", failed=1), cluster=False, backoffLimit=2), 5, "",
        check=lambda d: d.status["failed"] == 1 and "rayClusterName" not in d.status),
    Row("any->ValidationFailed", snap(st("Running"), entrypoint="x", runtimeEnvYAML="[1, 2"), 5, "ValidationFailed",
        reason="ValidationFailed", events=["InvalidRayJobSpec"]),
    # --- v1.7 transitions the seed lists among Failed reasons ---
    Row("Initializing->Failed (preRunningDeadlineSeconds)", snap(st("Initializing"), cluster="not-ready",
                                                                 preRunningDeadlineSeconds=30), 30, "Failed",
        reason="PreRunningDeadlineExceeded"),
    Row("Waiting->Failed (preRunningDeadlineSeconds)", snap(st("Waiting", jobId=None), submissionMode="InteractiveMode",
                                                            preRunningDeadlineSeconds=30), 31, "Failed",
        reason="PreRunningDeadlineExceeded"),
    Row("Running->Complete (grace period: job terminal, submitter never finished)",
        snap(st("Running", jobStatus="SUCCEEDED", rayJobInfo={"endTime": ts(10)}), sub=submitter(),
             obs=observation(CL, jobs={JID: "SUCCEEDED"})), 310, "Complete",
        reason="JobDeploymentStatusTransitionGracePeriodExceeded", job_status="SUCCEEDED"),
    Row("Running->Failed (grace period, FAILED job)",
        snap(st("Running", jobStatus="FAILED", rayJobInfo={"endTime": ts(10)}), sub=submitter()), 310, "Failed",
        reason="JobDeploymentStatusTransitionGracePeriodExceeded"),
    Row("Running->Failed (submitter finished, job not terminal for 30 s)",
        snap(st("Running", jobStatus="RUNNING"), sub=submitter(finished="Complete", at_seconds=20),
             obs=observation(CL, jobs={JID: "RUNNING"})), 50, "Failed",
        reason="JobDeploymentStatusTransitionGracePeriodExceeded", job_status="FAILED",
        check=lambda d: d.status["message"] == "The RayJob submitter finished at 2026-01-01 00:00:20 but the ray job "
        "did not reach terminal state within 30s"),
    Row("Running->Failed (submitter finished, job not found)",
        snap(st("Running", jobStatus="RUNNING"), sub=submitter(finished="Complete", at_seconds=20),
             obs=observation(CL, missing=[JID])), 25, "Failed", reason="AppFailed",
        check=lambda d: d.status["message"] == "Submitter completed but Ray job not found in RayCluster."),
    Row("Running->Failed (job status check timeout)",
        snap(st("Running", jobStatus="RUNNING", jobStatusCheckFailureStartTime=ts(100)), sub=submitter(),
             obs=observation(CL, reachable=False)), 400, "Failed", reason="JobStatusCheckTimeoutExceeded"),
    Row("Running->Failed (SidecarMode: head Pod gone)", snap(st("Running"), submissionMode="SidecarMode"), 5,
        "Failed", reason="AppFailed", check=lambda d: d.status["message"] == "Ray head pod not found."),
    Row("Running->Failed (SidecarMode: submitter container exit 1)",
        snap(st("Running", jobStatus="RUNNING"), submissionMode="SidecarMode", pods=[head_pod(CL, exit_code=1)]),
        5, "Failed", reason="SubmissionFailed",
        check=lambda d: d.status["message"] == "Ray head pod container ray-job-submitter terminated with exit code 1: Error"),
    Row("Running->Complete (SidecarMode: SUCCEEDED + container exit 0)",
        snap(st("Running", jobStatus="RUNNING"), submissionMode="SidecarMode",
             pods=[head_pod(CL, exit_code=0, finished_s=4)], obs=observation(CL, jobs={JID: "SUCCEEDED"})),
        5, "Complete", job_status="SUCCEEDED"),
    Row("Running->Complete (HTTPMode: STOPPED is terminal)",
        snap(st("Running", jobStatus="RUNNING"), submissionMode="HTTPMode", obs=observation(CL, jobs={JID: "STOPPED"})),
        5, "Complete", job_status="STOPPED"),
    Row("Running->Running (SUCCEEDED but submitter not finished: wait)",
        snap(st("Running", jobStatus="RUNNING"), sub=submitter(), obs=observation(CL, jobs={JID: "SUCCEEDED"},
                                                                                   end_ms=T0_MS + 4000)),
        5, "Running", job_status="SUCCEEDED",
        # the transition grace period (300 s from the job's end) is the next time-based step
        check=lambda d: d.requeue_after == 299.0 and d.status["rayJobInfo"]["endTime"] == ts(4)),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_transition(row: Row) -> None:
    d = decide(row.build(), seconds=row.seconds)
    assert d.error is None, d.reasons
    assert d.status is not None, d.reasons
    assert d.status.get("jobDeploymentStatus", "") == row.jds
    if row.reason is not None:
        assert d.status.get("reason") == row.reason
    if row.job_status is not None:
        assert d.status.get("jobStatus") == row.job_status
    for event in row.events:
        assert event in [getattr(c, "event_reason", None) for c in d.commands]
    if row.check is not None:
        assert row.check(d) is not False, d.model_dump()


@pytest.mark.parametrize(("mode", "obs", "seconds", "expected"), [
    # The submitter failed, the Ray job's status is not terminal yet: read it first (poll now).
    ("K8sJobMode", None, 21, "wait"),
    ("K8sJobMode", observation(CL, jobs={JID: "RUNNING"}), 24, "wait"),
    ("K8sJobMode", observation(CL, missing=[JID]), 21, "wait"),
    ("SidecarMode", None, 21, "wait"),
    # The read shows FAILED: the application failed.
    ("K8sJobMode", observation(CL, jobs={JID: "FAILED"}), 21, "AppFailed"),
    ("SidecarMode", observation(CL, jobs={JID: "FAILED"}), 21, "AppFailed"),
    # Still not failed after the read-back, or the head does not answer: the submission failed.
    ("K8sJobMode", observation(CL, jobs={JID: "RUNNING"}), 25, "SubmissionFailed"),
    ("SidecarMode", observation(CL, missing=[JID]), 26, "SubmissionFailed"),
    ("K8sJobMode", observation(CL, reachable=False), 21, "SubmissionFailed"),
    # SUCCEEDED but the submitter failed: KubeRay's rule, a failed submission.
    ("K8sJobMode", observation(CL, jobs={JID: "SUCCEEDED"}), 21, "SubmissionFailed"),
])
def test_failed_submitter_reads_the_ray_job_first(mode: str, obs: Any, seconds: float, expected: str) -> None:
    kwargs: dict[str, Any] = ({"pods": [head_pod(CL, exit_code=1, finished_s=20)]} if mode == "SidecarMode"
                              else {"sub": submitter(finished="Failed", at_seconds=20)})
    d = decide(snap(st("Running", jobStatus="RUNNING"), obs=obs, submissionMode=mode, **kwargs)(), seconds=seconds)
    assert d.error is None
    if expected == "wait":
        assert d.status is None and d.commands == []
        assert d.interest.poll_now == "submitter-failed/" + ts(20) and d.requeue_after == 25 - seconds
    else:
        assert d.status is not None and d.status["jobDeploymentStatus"] == "Failed"
        assert d.status["reason"] == expected


@pytest.mark.parametrize("status", [None, {"jobDeploymentStatus": ""}])
def test_new_adds_the_finalizer_before_any_status(status: dict[str, Any] | None) -> None:
    """KubeRay's r.Update(finalizer) precedes the status write and returns on failure; raybus's two
    writes go separately, so the status waits for the next step (which sees the finalizer)."""
    d = decide(snap(status, cluster=False, finalizer=False)())
    assert d.status is None and d.error is None and len(d.commands) == 1
    assert d.commands[0].merge_patch == {"metadata": {"finalizers": ["ray.io/rayjob-finalizer"],
                                                      "resourceVersion": "7"}}


def test_a_finished_submitter_whose_job_was_not_seen_waits_for_the_next_read() -> None:
    """The observation may predate the submission (KubeRay's GetJobInfo is always fresh)."""
    build = snap(st("Running", jobStatus="RUNNING"), sub=submitter(finished="Complete", at_seconds=20),
                 obs=observation(CL, missing=[JID]))
    d = decide(build(), seconds=21)
    assert d.status is None and d.requeue_after == 4 and d.interest.poll_now == "submitter-finished/" + ts(20)


@pytest.mark.parametrize(("obs", "job_status", "expected"), [
    (observation(CL, jobs={JID: "SUCCEEDED"}), "RUNNING", ("Complete", "")),  # seen terminal: no timeout
    (observation(CL, jobs={JID: "RUNNING"}), "RUNNING", ("Failed", "JobDeploymentStatusTransitionGracePeriodExceeded")),
])
def test_submitter_finished_timeout_spares_a_job_seen_terminal(obs: Any, job_status: str,
                                                                expected: tuple[str, str]) -> None:
    """Decided 40 s after the submitter finished (e.g. a reconcile held that long)."""
    build = snap(st("Running", jobStatus=job_status), sub=submitter(finished="Complete", at_seconds=20), obs=obs)
    d = decide(build(), seconds=60)
    assert d.status is not None and (d.status["jobDeploymentStatus"], d.status.get("reason", "")) == expected


@pytest.mark.parametrize(("exit_code", "jds"), [(None, "Initializing"), (0, "Running"), (1, "Running")])
def test_sidecar_job_that_ended_before_the_cluster_was_ready_moves_on(exit_code: int | None, jds: str) -> None:
    """kuberay#4199: the ended submitter container keeps the head Pod not Ready, so the cluster
    would never become ready; raybus goes on to Running, which judges the submitter."""
    build = snap(st("Initializing", dashboardURL=None), cluster="not-ready", submissionMode="SidecarMode",
                 pods=[head_pod(CL, exit_code=exit_code, finished_s=4)] if exit_code is not None else [])
    d = decide(build(), seconds=5)
    if jds == "Initializing":
        assert d.status is None or d.status["jobDeploymentStatus"] == "Initializing"
    else:
        assert d.status is not None and d.status["jobDeploymentStatus"] == "Running"
        assert d.status["dashboardURL"] == f"{CL}-head-svc.ns.svc.cluster.local:8265"


def _restarting_head(restarts: int, *, running: bool) -> dict[str, Any]:
    pod = head_pod(CL)
    sub = pod["status"]["containerStatuses"][1]
    sub["restartCount"] = restarts
    sub["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ts(3)}}
    if not running:
        sub["state"] = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ts(4)}}
    return pod


@pytest.mark.parametrize(("restarts", "running", "failed"), [
    (1, False, False),  # a non-zero exit is transient under SidecarSubmitterRestart
    (1, True, False),
    (2, True, True),    # submitterConfig.backoffLimit defaults to 2
])
def test_sidecar_submitter_restart_gate(restarts: int, running: bool, failed: bool) -> None:
    from raybus.api.settings import FeatureGates
    from raybus.decisions.cluster.settings import OperatorSettings
    from raybus.decisions.job.settings import JobSettings

    settings = JobSettings(operator=OperatorSettings(feature_gates=FeatureGates(sidecar_submitter_restart=True)))
    s = snap(st("Running", jobStatus="RUNNING"), submissionMode="SidecarMode",
             pods=[_restarting_head(restarts, running=running)], obs=observation(CL, jobs={JID: "RUNNING"}))
    # after the read-back window a failed submitter waits for (5 s), before the 30 s submitter-finished timeout
    d = decide(s(), seconds=20, settings=settings)
    jds = (d.status or {}).get("jobDeploymentStatus", "Running")
    if failed:
        assert (jds, d.status["reason"]) == ("Failed", "SubmissionFailed")
        assert d.status["message"] == ("Ray head pod submitter container ray-job-submitter terminated after "
                                       "exceeding the maximum restart count")
    else:
        assert jds == "Running"
