"""reconcile_rayjob outside the transition table: skip/deletion/validation order, dashboard commands,
status-write rule, interest, requeue timing, names, clusterSelector and failures of the previous round
(mirrors rayjob_controller_unit_test.go where it applies)."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.decisions.job.model import JobSnapshot, KubeCommandFailure
from raybus.decisions.job.names import generate_ray_cluster_name, generate_ray_job_id
from raybus.decisions.job.settings import JobSettings
from tests.unit.decisions.job.fixtures import (
    SETTINGS,
    T0,
    created,
    decide,
    deleted,
    events,
    make_cluster,
    make_job,
    observation,
    patched,
    ready_status,
    result,
    stops,
    submits,
    submitter,
    ts,
)

CL = "rj-abcde"
JID = "rj-xyz12"
URL = f"{CL}-head-svc.ns.svc.cluster.local:8265"


def running(**kw: Any) -> dict[str, Any]:
    base = {"jobDeploymentStatus": "Running", "jobId": JID, "rayClusterName": CL, "dashboardURL": URL,
            "startTime": ts(0), "jobStatus": "RUNNING", "failed": 0, "succeeded": 0, "rayClusterStatus": ready_status()}
    base.update(kw)
    return base


def snap(status: dict[str, Any] | None, *, cluster: bool = True, **kw: Any) -> JobSnapshot:
    spec = kw.pop("spec", {})
    meta = kw.pop("meta", None)
    job = make_job(status=status, meta=meta, **spec)
    kw.setdefault("head_service", {"metadata": {"name": "rj-head-svc"}, "spec": {"selector": {"ray.io/cluster": CL}}})
    return JobSnapshot(rayjob=job, cluster=make_cluster(job, CL) if cluster else None, **kw)


# --- order of KubeRay's Reconcile -------------------------------------------------------------------------
def test_managed_by_external_controller_is_skipped() -> None:
    d = decide(snap(None, spec={"managedBy": "kueue.x-k8s.io/multikueue"}))
    assert d.commands == [] and d.status is None and d.requeue_after is None and d.interest.cluster is None


def test_deletion_stops_a_running_job_then_removes_the_finalizer() -> None:
    deleting = {"deletionTimestamp": ts(0), "finalizers": ["other", "ray.io/rayjob-finalizer"]}
    d = decide(snap(running(), meta=deleting, submitter=submitter()))
    assert [(s.cluster, s.job_id) for s in stops(d)] == [(CL, JID)] and d.commands == []
    assert d.interest.cluster is None  # nothing to follow any more
    # the StopJob's result (whatever it is) arrives: the finalizer goes
    for state in ("ok", "failed", "unknown"):
        d2 = decide(snap(running(), meta=deleting, dashboard_results=[result("stop_job", CL, state)]))
        assert stops(d2) == []
        assert patched(d2, "RayJob") == [{"metadata": {"finalizers": ["other"], "resourceVersion": "7"}}]


def test_deletion_of_a_terminal_or_unsubmitted_job_only_removes_the_finalizer() -> None:
    deleting = {"deletionTimestamp": ts(0)}
    for status in (running(jobStatus="SUCCEEDED", jobDeploymentStatus="Complete"),
                   {"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID},
                   None):
        d = decide(snap(status, meta=deleting))
        assert stops(d) == [] and patched(d, "RayJob")[0]["metadata"]["finalizers"] == []
    d = decide(snap(running(), meta=deleting, cluster=False))  # cluster already gone: StopJob cannot work
    assert stops(d) == [] and patched(d, "RayJob")


def test_deletion_without_our_finalizer_does_nothing() -> None:
    d = decide(snap(running(), meta={"deletionTimestamp": ts(0), "finalizers": []}))
    assert d.commands == [] and d.dashboard_commands == []


def test_deletion_is_checked_before_validation() -> None:
    d = decide(snap(running(), meta={"deletionTimestamp": ts(0)}, spec={"runtimeEnvYAML": "[1"}))
    assert stops(d) and d.status is None


def test_validation_failure_event_and_status_once() -> None:
    d = decide(snap(running(), spec={"activeDeadlineSeconds": -1}))
    assert d.status["jobDeploymentStatus"] == "ValidationFailed" and events(d) == ["InvalidRayJobSpec"]
    again = decide(snap(d.status, spec={"activeDeadlineSeconds": -1}))
    assert again.status is None and again.commands == [] and again.requeue_after is None


def test_validation_failed_stays_even_after_a_fix() -> None:
    d = decide(snap({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed"}))
    assert d.status is None and d.commands == [] and d.requeue_after is None


def test_previous_round_failure_is_returned_as_error_without_new_commands() -> None:
    failure = KubeCommandFailure(message="admission webhook denied", target="RayCluster/ns/rj-abcde", code=403)
    d = decide(snap({"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID, "startTime": ts(0)},
                    cluster=False, failures=[failure]))
    assert d.error is not None and "admission webhook denied" in d.error and d.commands == [] and d.status is None
    retry = decide(snap({"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID,
                         "startTime": ts(0)}, cluster=False))
    assert [c["metadata"]["name"] for c in created(retry, "RayCluster")] == [CL] and retry.error is None


# --- New / Initializing -------------------------------------------------------------------------------------
def test_new_keeps_spec_job_id_and_selected_cluster_and_adds_no_finalizer_twice() -> None:
    d = decide(snap(None, cluster=False, spec={"jobId": "mine", "clusterSelector": {"ray.io/cluster": "shared"}}))
    assert d.status["jobId"] == "mine" and d.status["rayClusterName"] == "shared"
    assert patched(d, "RayJob") == []  # the fixture's RayJob already has the finalizer
    interactive = decide(snap(None, cluster=False, spec={"submissionMode": "InteractiveMode", "jobId": "x"}))
    assert "jobId" not in interactive.status


def test_names_are_deterministic_and_change_per_attempt() -> None:
    job = make_job()
    assert generate_ray_cluster_name(job, entropy="e") == generate_ray_cluster_name(job, entropy="e")
    assert len(generate_ray_cluster_name(job, entropy="e")) == len("rj-") + 5
    retried = make_job(status={"failed": 1, "startTime": ts(0)})
    resumed = make_job(status={"startTime": ts(0)}, meta={"generation": 3})  # suspend + resume: 2 spec edits
    resumed_again = make_job(status={"startTime": ts(0)}, meta={"generation": 5})  # within the same second
    jobs = (job, retried, resumed, resumed_again)
    assert len({generate_ray_cluster_name(j, entropy="e") for j in jobs}) == 4
    assert len({generate_ray_job_id(j, entropy="e") for j in jobs}) == 4
    d1, d2 = decide(snap(None, cluster=False, entropy="e")), decide(snap(None, cluster=False, entropy="e"))
    assert d1 == d2


def test_initializing_creates_the_cluster_then_waits_for_ready() -> None:
    status = {"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID, "startTime": ts(0)}
    d = decide(snap(status, cluster=False))
    assert [c["metadata"]["name"] for c in created(d, "RayCluster")] == [CL] and events(d) == ["CreatedRayCluster"]
    assert d.status is None and d.requeue_after is None  # the cluster's status change triggers the next step
    job = make_job(status=status)
    not_ready = make_cluster(job, CL, ready=False).model_copy(
        update={"status": make_cluster(job, CL, ready=False).status.model_copy(update={"reason": "pods pending"})})
    d2 = decide(JobSnapshot(rayjob=job, cluster=not_ready))
    assert d2.status["rayClusterStatus"] == {"reason": "pods pending"} and created(d2, "RayCluster") == []


def test_initializing_with_a_submitter_already_there_does_not_create_another() -> None:
    status = {"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID, "startTime": ts(0)}
    d = decide(snap(status, submitter=submitter()))
    assert created(d, "Job") == [] and d.status["jobDeploymentStatus"] == "Running"


def test_cluster_selector_never_creates_a_cluster() -> None:
    status = {"jobDeploymentStatus": "Initializing", "rayClusterName": "shared", "jobId": JID, "startTime": ts(0)}
    d = decide(snap(status, cluster=False, spec={"clusterSelector": {"ray.io/cluster": "shared"}}))
    assert created(d, "RayCluster") == [] and d.error is not None and events(d) == ["RayClusterNotFound"]


def test_metadata_with_old_ray_is_a_reconcile_error() -> None:
    status = {"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID, "startTime": ts(0)}
    spec = {"metadata": {"k": "v"}, "rayClusterSpec": {"rayVersion": "2.5.0", "headGroupSpec": {"template": {
        "spec": {"containers": [{"name": "ray-head", "image": "i"}]}}}}}
    d = decide(snap(status, spec=spec))
    assert d.error is not None and "2.6.0" in d.error and created(d, "Job") == []


# --- Running ----------------------------------------------------------------------------------------------
def test_running_creates_and_updates_the_rayjob_head_service() -> None:
    d = decide(snap(running(), submitter=submitter(), head_service=None))
    svc = created(d, "Service")
    assert [s["metadata"]["name"] for s in svc] == ["rj-head-svc"] and events(d) == ["CreatedService"]
    old = {"metadata": {"name": "rj-head-svc", "uid": "s1"}, "spec": {"clusterIP": "10.1.1.1",
                                                                       "selector": {"ray.io/cluster": "old"}}}
    d2 = decide(snap(running(), submitter=submitter(), head_service=old))
    patch = patched(d2, "Service")[0]
    assert patch["spec"]["selector"]["ray.io/cluster"] == CL and patch["spec"]["clusterIP"] == "10.1.1.1"


def test_running_without_the_submitter_job_is_an_error() -> None:
    d = decide(snap(running()))
    assert d.error is not None and d.status is None


def test_running_recreates_a_deleted_cluster_like_get_or_create() -> None:
    d = decide(snap(running(), cluster=False, submitter=submitter(), dashboard=observation(CL, jobs={JID: "RUNNING"})))
    assert [c["metadata"]["name"] for c in created(d, "RayCluster")] == [CL]


def test_status_only_written_when_crucial_fields_change() -> None:
    same = decide(snap(running(), submitter=submitter(), dashboard=observation(CL, jobs={JID: "RUNNING"},
                                                                                message="new text")))
    assert same.status is None  # the message alone is not crucial (updateRayJobStatus)
    moved = decide(snap(running(jobStatus="PENDING"), submitter=submitter(),
                        dashboard=observation(CL, jobs={JID: "RUNNING"}, start_ms=5000)))
    assert moved.status["jobStatus"] == "RUNNING" and moved.status["rayJobInfo"] == {"startTime": "1970-01-01T00:00:05Z"}
    assert "endTime" not in moved.status


def test_not_yet_observed_job_waits_without_failure() -> None:
    for obs in (None, observation("other-cluster", jobs={JID: "SUCCEEDED"}), observation(CL)):
        d = decide(snap(running(jobStatus=""), submitter=submitter(), dashboard=obs))
        assert d.status is None and d.error is None
        assert d.interest.cluster == CL and d.interest.jobs == [JID] and d.interest.expect_change


def test_ghost_job_record_is_ignored() -> None:
    obs = observation(CL, jobs={JID: "FAILED"})
    ghost = obs.model_copy(update={"jobs": {JID: obs.jobs[JID].model_copy(update={"ghost": True})}})
    d = decide(snap(running(), submitter=submitter(), dashboard=ghost))
    assert d.status is None


def test_status_check_timeout_starts_persists_and_clears() -> None:
    d = decide(snap(running(), submitter=submitter(), dashboard=observation(CL, reachable=False)), seconds=50)
    assert d.status["jobStatusCheckFailureStartTime"] == ts(50) and d.status["jobDeploymentStatus"] == "Running"
    assert d.error is None
    d2 = decide(snap(d.status, submitter=submitter(), dashboard=observation(CL, reachable=False)), seconds=100)
    assert d2.status is None and d2.requeue_after == 250.0
    d3 = decide(snap(d.status, submitter=submitter(), dashboard=observation(CL, jobs={JID: "RUNNING"})), seconds=120)
    assert "jobStatusCheckFailureStartTime" not in d3.status
    short = JobSettings(status_check_timeout_seconds=10)
    d4 = decide(snap(d.status, submitter=submitter(), dashboard=observation(CL, reachable=False)), seconds=60,
                settings=short)
    assert d4.status["reason"] == "JobStatusCheckTimeoutExceeded"


def test_submitter_finished_asks_the_poller_to_read_now() -> None:
    d = decide(snap(running(), submitter=submitter(finished="Complete", at_seconds=20),
                    dashboard=observation(CL, jobs={JID: "RUNNING"})), seconds=21)
    assert d.interest.poll_now == f"submitter-finished/{ts(20)}" and d.requeue_after == 29.0


# --- HTTPMode ------------------------------------------------------------------------------------------------
HTTP = {"submissionMode": "HTTPMode", "runtimeEnvYAML": "pip: [requests]", "metadata": {"a": "b"},
        "entrypointNumCpus": 1, "entrypointResources": '{"Custom": 2}'}


def test_http_mode_submits_when_the_job_is_definitely_missing() -> None:
    d = decide(snap(running(jobStatus=""), spec=HTTP, dashboard=observation(CL, missing=[JID])))
    [submit] = submits(d)
    assert (submit.cluster, submit.job_id, submit.entrypoint) == (CL, JID, "python /home/ray/samples/sample_code.py")
    assert submit.runtime_env == {"pip": ["requests"]} and submit.metadata == {"a": "b"}
    assert submit.entrypoint_num_cpus == 1.0 and submit.entrypoint_resources == {"Custom": 2.0}
    assert d.status is None and d.interest.expect_change


def test_http_mode_never_resubmits_on_the_observation_that_predates_the_submission() -> None:
    stale = observation(CL, missing=[JID])
    for state in ("ok", "unknown"):
        d = decide(snap(running(jobStatus=""), spec=HTTP, dashboard=stale,
                        dashboard_results=[result("submit_job", CL, state)]))
        assert submits(d) == [] and d.error is None and d.interest.poll_now == f"submitted/{CL}/{JID}"
    failed = decide(snap(running(jobStatus=""), spec=HTTP, dashboard=stale,
                         dashboard_results=[result("submit_job", CL, "failed", "500 boom")]))
    # v1.7 (reconcileHTTPModeJobNotFound): a failed submission starts the status-check timer.
    assert submits(failed) == [] and failed.error is None
    assert failed.status["jobStatusCheckFailureStartTime"] == ts(0) and failed.status["jobDeploymentStatus"] == "Running"
    expired = result("submit_job", CL, "failed").model_copy(update={"expired": True}) \
        if "expired" in result("submit_job", CL).model_fields else None
    if expired is not None:
        again = decide(snap(running(jobStatus=""), spec=HTTP, dashboard=stale, dashboard_results=[expired]))
        assert len(submits(again)) == 1


def test_http_mode_resubmits_a_job_a_restarted_head_lost() -> None:
    d = decide(snap(running(jobStatus="RUNNING"), spec=HTTP, dashboard=observation(CL, missing=[JID])))
    assert len(submits(d)) == 1


# --- Suspending / Retrying ------------------------------------------------------------------------------------
def test_suspending_deletes_cluster_and_submitter_then_waits() -> None:
    spec = {"suspend": True, "shutdownAfterJobFinishes": True}
    d = decide(snap(running(jobDeploymentStatus="Suspending"), spec=spec, submitter=submitter()))
    assert deleted(d, "RayCluster") == [CL] and deleted(d, "Job") == ["rj"] and d.status is None
    assert sorted(events(d)) == ["DeletedRayCluster", "DeletedRayJobSubmitter"]
    job = make_job(status=running(jobDeploymentStatus="Suspending"), **spec)
    d2 = decide(JobSnapshot(rayjob=job, cluster=make_cluster(job, CL, deleting=True),
                            submitter=submitter(deleting=True)))
    assert d2.commands == [] and d2.status is None


def test_suspending_is_atomic_even_if_suspend_is_cleared() -> None:
    d = decide(snap(running(jobDeploymentStatus="Suspending"), cluster=False, spec={"shutdownAfterJobFinishes": True}))
    assert d.status["jobDeploymentStatus"] == "Suspended"


def test_suspended_waits_without_requeue() -> None:
    d = decide(snap({"jobDeploymentStatus": "Suspended"}, cluster=False,
                    spec={"suspend": True, "shutdownAfterJobFinishes": True}))
    assert d.status is None and d.requeue_after is None and d.commands == []


def test_waiting_for_job_id_does_not_poll() -> None:
    d = decide(snap({"jobDeploymentStatus": "Waiting", "rayClusterName": CL, "startTime": ts(0), "dashboardURL": URL},
                    spec={"submissionMode": "InteractiveMode"}))
    assert d.status is None and d.requeue_after is None


# --- requeue timing -------------------------------------------------------------------------------------------
def test_requeue_is_the_exact_time_to_the_next_deadline() -> None:
    status = {"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID, "startTime": ts(0)}
    job = make_job(status=status, activeDeadlineSeconds=600, preRunningDeadlineSeconds=100)
    d = decide(JobSnapshot(rayjob=job, cluster=make_cluster(job, CL, ready=False)), seconds=40)
    assert d.requeue_after == 60.0
    d2 = decide(snap(running(), submitter=submitter(), spec={"activeDeadlineSeconds": 600},
                     dashboard=observation(CL, jobs={JID: "RUNNING"})), seconds=40)
    assert d2.requeue_after == 560.0


def test_a_transition_into_a_timed_state_runs_once_more_when_visible() -> None:
    d = decide(snap(running(), submitter=submitter(finished="Complete", at_seconds=1),
                    dashboard=observation(CL, jobs={JID: "SUCCEEDED"}), spec={"shutdownAfterJobFinishes": True,
                                                                              "ttlSecondsAfterFinished": 10}), seconds=2)
    assert d.status["jobDeploymentStatus"] == "Complete" and d.requeue_after == 0.0
    plain = decide(snap(running(), submitter=submitter(finished="Complete", at_seconds=1),
                        dashboard=observation(CL, jobs={JID: "SUCCEEDED"})), seconds=2)
    assert plain.status["jobDeploymentStatus"] == "Complete" and plain.requeue_after is None


def test_counters_and_backoff_exhaustion() -> None:
    obs = observation(CL, jobs={JID: "FAILED"})
    d = decide(snap(running(failed=2), spec={"backoffLimit": 2}, submitter=submitter(finished="Complete"),
                    dashboard=obs), seconds=1)
    assert d.status["jobDeploymentStatus"] == "Failed" and d.status["failed"] == 3
    deadline = decide(snap(running(), spec={"backoffLimit": 2, "activeDeadlineSeconds": 5}, submitter=submitter()),
                      seconds=5)
    assert deadline.status["jobDeploymentStatus"] == "Failed" and deadline.status["reason"] == "DeadlineExceeded"


def test_settings_from_env() -> None:
    s = JobSettings.from_env({"RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS": "12",
                              "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS": "x", "DELETE_RAYJOB_CR_AFTER_JOB_FINISHES": "TRUE"},
                             feature_gates="RayJobDeletionPolicy=false")
    assert s.transition_grace_period_seconds == 12 and s.status_check_timeout_seconds == 300
    assert s.delete_rayjob_cr_after_job_finishes and not s.deletion_policy_gate
    assert SETTINGS.deletion_policy_gate


# --- mirrors of rayjob_controller_unit_test.go ------------------------------------------------------------------
def test_update_status_to_suspending_only_from_running_or_initializing() -> None:
    """TestUpdateStatusToSuspendingIfNeeded."""
    spec = {"suspend": True, "shutdownAfterJobFinishes": True}
    complete = decide(snap(running(jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", endTime=ts(1)), spec=spec),
                      seconds=2)
    assert complete.status is None
    init = decide(snap({"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID, "startTime": ts(0)},
                       spec=spec))
    assert init.status["jobDeploymentStatus"] == "Suspending"
    not_suspended = decide(snap({"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID,
                                 "startTime": ts(0)}, spec={"shutdownAfterJobFinishes": True}))
    assert not_suspended.status["jobDeploymentStatus"] != "Suspending"


def test_update_rayjob_status_writes_the_message_only_with_a_crucial_change() -> None:
    """TestUpdateRayJobStatus: a new message alone is not written; with a new JobDeploymentStatus it is."""
    obs = observation(CL, jobs={JID: "RUNNING"}, message="new message")
    d = decide(snap(running(message="old message"), submitter=submitter(), dashboard=obs))
    assert d.status is None
    suspend = decide(snap(running(message="old message"), submitter=submitter(), dashboard=obs,
                          spec={"suspend": True, "shutdownAfterJobFinishes": True}))
    assert suspend.status["jobDeploymentStatus"] == "Suspending"


def test_create_submitter_if_needed_labels() -> None:
    """TestCreateRayJobSubmitterIfNeed."""
    status = {"jobDeploymentStatus": "Initializing", "rayClusterName": CL, "jobId": JID, "startTime": ts(0)}
    [job] = created(decide(snap(status)), "Job")
    assert job["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "rj"
    assert job["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"


# --- follow streams: the job-end signal of the modes without a submitter container -------------------------
@pytest.mark.parametrize(("mode", "observed", "follows"), [
    ("HTTPMode", "RUNNING", True),
    ("HTTPMode", "PENDING", True),
    ("HTTPMode", None, True),  # not observed yet: followed once the poller sees it non-terminal
    ("InteractiveMode", "RUNNING", True),
    ("K8sJobMode", "RUNNING", False),  # its submitter container follows the log tail and ends with it
    ("SidecarMode", "RUNNING", False),
    ("HTTPMode", "SUCCEEDED", False),  # terminal: no interest at all once Complete
    ("InteractiveMode", "FAILED", False),
])
def test_follow_jobs_only_for_modes_without_a_submitter_while_not_terminal(
        mode: str, observed: str | None, follows: bool) -> None:
    spec: dict[str, Any] = {"submissionMode": mode}
    if mode == "InteractiveMode":
        spec["jobId"] = JID
    jobs = {JID: observed} if observed else {}
    job_status = observed if observed in ("PENDING", "RUNNING") else "RUNNING"
    d = decide(snap(running(jobStatus=job_status), spec=spec, submitter=submitter(),
                    dashboard=observation(CL, jobs=jobs)))
    assert d.interest.follow_jobs == ([JID] if follows else [])
    if follows:
        assert d.interest.jobs == [JID] and d.interest.cluster == CL
    if d.interest.cluster is not None:  # the submitter container reports the end in the other modes
        assert d.interest.job_end_signalled == (mode in ("K8sJobMode", "SidecarMode"))


@pytest.mark.parametrize(("name", "start", "results", "seconds", "expect"), [
    # (timer already running, previous submission failed again): no write, submit again in 3 s
    ("refused again, timer running", 0, "failed", 100, {"status": None, "requeue": 3.0, "submits": 0}),
    # the previous submission went through: clearJobStatusCheckFailureTimer persists the clear
    ("accepted, timer cleared", 0, "ok", 100, {"status": "cleared", "submits": 0}),
    # nothing submitted last round, job still missing: submit again, timer untouched
    ("not found, submit again", 0, None, 100, {"status": None, "submits": 1}),
    # the timeout is judged before anything else in Running, with KubeRay's message
    ("timeout after a failed re-submit", 0, "failed", 300, {"failed": True}),
])
def test_http_mode_failed_resubmit_runs_the_status_check_timer(
        name: str, start: int, results: str | None, seconds: int, expect: dict[str, Any]) -> None:
    stale = observation(CL, missing=[JID])
    found = [result("submit_job", CL, results, "500 boom")] if results else []
    d = decide(snap(running(jobStatus="", jobStatusCheckFailureStartTime=ts(start)), spec=HTTP, dashboard=stale,
                    dashboard_results=found), seconds=seconds)
    assert d.error is None, name
    if expect.get("failed"):
        assert d.status["jobDeploymentStatus"] == "Failed" and d.status["reason"] == "JobStatusCheckTimeoutExceeded"
        assert d.status["message"] == ("Job status checks have been failing since 2026-01-01 00:00:00; "
                                       "exceeded timeout of 300s")
        return
    assert len(submits(d)) == expect["submits"], name
    if expect["status"] == "cleared":
        assert "jobStatusCheckFailureStartTime" not in d.status
    else:
        assert d.status is None, name
    if "requeue" in expect:
        assert d.requeue_after == expect["requeue"]


@pytest.mark.parametrize(("reason", "retried"), [
    # checkBackoffLimitAndUpdateStatusIfNeeded (v1.7)
    ("AppFailed", True),
    ("SubmissionFailed", True),
    ("PreRunningDeadlineExceeded", True),
    ("DeadlineExceeded", False),
    ("JobStatusCheckTimeoutExceeded", False),
])
def test_backoff_limit_retries_by_reason(reason: str, retried: bool) -> None:
    from raybus.decisions.job.checks import check_backoff_limit
    from raybus.decisions.job.work import Work

    w = Work(snap(running(jobDeploymentStatus="Failed", reason=reason), spec={"backoffLimit": 2}),
             settings=JobSettings(), now=T0)
    check_backoff_limit(w)
    assert w.st["failed"] == 1
    assert w.jds == ("Retrying" if retried else "Failed")
