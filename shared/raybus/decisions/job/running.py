"""The Running case of KubeRay's switch, with the dashboard read replaced by the dashboard-poller's
observation (raybus never calls a dashboard inside a reconcile).

KubeRay's ``GetJobInfo`` outcomes map to the observation as follows:
- the job in ``jobs``          -> JobInfo (a ``ghost`` record - the FAILED entry Ray re-creates after
                                   a DELETE - is ignored, never a reason to flip the RayJob);
- the job in ``jobs_missing``  -> BadRequest "not found" (HTTPMode submits; a finished submitter
                                   with no job -> Failed/AppFailed; else wait, kuberay#4916);
- observation unreachable      -> an error: the job-status-check timeout runs from
                                   status.jobStatusCheckFailureStartTime (RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS),
                                   as it does from a failed HTTPMode re-submission (v1.7);
- nothing observed yet         -> ErrAgain (v1.6's async client): wait, no failure.

A failed submitter is judged with the Ray job's status (checkSubmitterAndUpdateStatusIfNeeded:
FAILED -> AppFailed, else SubmissionFailed). KubeRay reads that status from its last 3 s poll, so
a job whose failure ended the submitter gets either reason depending on timing; raybus first reads
the job (the poller at once, at most SUBMITTER_FAILURE_READBACK_SECONDS), so a failing entrypoint
is AppFailed and only a submission that really failed is SubmissionFailed. Likewise a finished
submitter whose job the last observation did not find waits for the read that follows it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import yaml

from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import JobFailedReason, JobSubmissionMode, RayJob
from raybus.decisions.dashboard_contract import JobObservation, SubmitJob
from raybus.decisions.job import constants as c
from raybus.decisions.job.checks import (
    check_active_deadline,
    check_submitter,
    check_submitter_finished_timeout,
    check_transition_grace_period,
    is_job_terminal,
    submitter_failed_at,
    update_status_to_suspending_if_needed,
)
from raybus.decisions.job.resources import get_or_create_cluster, reconcile_services
from raybus.decisions.job.timefmt import fmt_time, from_unix_ms, go_date_time
from raybus.decisions.job.work import Work

BREAK = True  # fall through to checkBackoffLimit + the status update
RETURN = False  # return before the status update


def has_submitter(mode: str) -> bool:
    """utils.HasSubmitter."""
    return mode in (JobSubmissionMode.K8S_JOB, JobSubmissionMode.SIDECAR)


def submit_job_command(w: Work) -> SubmitJob:
    """dashboardClient.SubmitJob(rayJob): the Jobs API request KubeRay builds from the spec."""
    return submit_job_request(w.job, job_id=w.get("jobId"), cluster=w.get("rayClusterName"),
                              reason=f"The Ray job {w.get('jobId')} was not found: submit it via an HTTP request")


def submit_job_request(job: RayJob, *, job_id: str, cluster: str, reason: str = "") -> SubmitJob:
    """The Jobs API request of a (defaulted) RayJob: also what the dashboard-poller's admission
    rebuilds a submission from to check it."""
    spec = job.spec
    runtime_env = yaml.safe_load(spec.runtime_env_yaml) if spec.runtime_env_yaml else None
    resources = None
    if spec.entrypoint_resources:
        resources = {str(k): float(v) for k, v in json.loads(spec.entrypoint_resources).items()}
    return SubmitJob(
        reason=reason, cluster=cluster, job_id=job_id, entrypoint=spec.entrypoint or "",
        runtime_env=runtime_env if isinstance(runtime_env, dict) else None,
        metadata=dict(spec.metadata) if spec.metadata else None,
        entrypoint_num_cpus=float(spec.entrypoint_num_cpus) if spec.entrypoint_num_cpus else None,
        entrypoint_num_gpus=float(spec.entrypoint_num_gpus) if spec.entrypoint_num_gpus else None,
        entrypoint_resources=resources,
    )


def _observed_job(w: Work) -> tuple[str, JobObservation | None]:
    """('info'|'missing'|'unreachable'|'again', observation)."""
    obs = w.snapshot.dashboard
    job_id = w.get("jobId")
    if obs is None or obs.cluster != w.get("rayClusterName") or obs.namespace != w.job.namespace:
        return "again", None
    if not obs.reachable:
        return "unreachable", None
    info = obs.jobs.get(job_id)
    if info is not None and not info.ghost:
        return "info", info
    if job_id in obs.jobs_missing:
        return "missing", None
    return "again", None


def record_status_check_failure(w: Work, why: str) -> bool:
    """recordJobStatusCheckFailure: remember when status checks started failing (True: persist it).
    The timeout itself is judged at the top of the next Running round (check_status_check_timeout),
    which the deadline registered here requeues exactly on time."""
    start = w.time("jobStatusCheckFailureStartTime")
    if start is None:
        start = w.now
        w.st["jobStatusCheckFailureStartTime"] = fmt_time(start)
        w.log(f"Job status check began failing: {why}")
    w.deadline(start + timedelta(seconds=w.settings.status_check_timeout_seconds))
    return w.original.get("jobStatusCheckFailureStartTime") is None


def check_status_check_timeout(w: Work) -> bool:
    """checkJobStatusCheckTimeoutAndUpdateStatusIfNeeded (v1.7), with KubeRay's message. Never
    retried under backoffLimit (checks.NOT_RETRIED)."""
    start = w.time("jobStatusCheckFailureStartTime")
    if start is None:
        return False
    timeout = w.settings.status_check_timeout_seconds
    if w.now < start + timedelta(seconds=timeout):
        w.deadline(start + timedelta(seconds=timeout))
        return False
    w.fail(JobFailedReason.JOB_STATUS_CHECK_TIMEOUT_EXCEEDED.value,
           f"Job status checks have been failing since {go_date_time(start)}; exceeded timeout of {timeout}s")
    return True


def _status_check_failed(w: Work) -> bool:
    """GetJobInfo failed (the dashboard is unreachable): record the start and persist it (BREAK),
    else wait (KubeRay requeues every 3 s; here the poller reports recovery and the deadline
    registered by record_status_check_failure wakes the timeout)."""
    return BREAK if record_status_check_failure(w, "the Ray dashboard is unreachable") else RETURN


def _http_submit(w: Work) -> bool:
    """HTTPMode, job not found: submit it (again: a recreated head lost it), once per observation
    (reconcileHTTPModeJobNotFound). A failed submission starts the status-check timer as a failed
    GetJobInfo does (v1.7); a later successful one clears it."""
    cluster = w.get("rayClusterName")
    previous = [r for r in w.snapshot.dashboard_results
                if r.op == "submit_job" and r.cluster == cluster and not getattr(r, "expired", False)]
    failed = [r for r in previous if r.state == "failed"]
    if failed:
        why = "Failed to submit the Ray job: " + "; ".join(r.message for r in failed)
        if record_status_check_failure(w, why):
            return BREAK  # persist the start; the next round submits again
        # KubeRay: requeue after 3 s and submit again (this round had no dashboard command, so the
        # next one sees no previous result and submits).
        w.log(why)
        w.deadline(w.now + timedelta(seconds=c.RAY_JOB_DEFAULT_REQUEUE_SECONDS))
        return RETURN
    if previous:
        # Submitted last round; this observation may predate it. Ask the poller to read now.
        w.poll_now = f"submitted/{cluster}/{w.get('jobId')}"
        w.log("The Ray job was submitted; waiting for the dashboard to report it")
        if w.st.pop("jobStatusCheckFailureStartTime", None) is not None:
            return BREAK  # clearJobStatusCheckFailureTimer: persist the cleared timer
        return RETURN
    try:
        command = submit_job_command(w)
    except (ValueError, TypeError, AttributeError) as exc:  # entrypointResources is not a JSON map
        w.fail_reconcile(f"Failed to submit the Ray job: {exc}")
        return RETURN
    w.dashboard_commands.append(command)
    w.log(f"The Ray job {w.get('jobId')} was not found: submitting it via the dashboard")
    return RETURN


def _apply_job_info(w: Work, cluster: RayCluster, info: JobObservation, finished_at: datetime | None) -> None:
    terminal = is_job_terminal(info.status)
    # With a submitter, also wait for it to finish: it collects the logs (kuberay#1919).
    if has_submitter(w.mode):
        terminal = terminal and finished_at is not None
    jds, reason = "Running", ""
    if terminal:
        jds = "Complete"
        if info.status == "FAILED":
            jds, reason = "Failed", JobFailedReason.APP_FAILED.value
    # Always update RayClusterStatus along with JobStatus and JobDeploymentStatus.
    w.st["rayClusterStatus"] = cluster.status.to_dict() if cluster.status is not None else {}
    if w.job_status != info.status or w.jds != jds:
        w.log(f"Ray job {info.job_id} is {info.status}: JobDeploymentStatus {w.jds} -> {jds}")
    w.job_status = info.status
    w.jds = jds
    w.st["reason"] = reason
    w.st["message"] = info.message
    job_info = dict(w.st.get("rayJobInfo") or {})
    if info.start_time_ms:
        job_info["startTime"] = fmt_time(from_unix_ms(info.start_time_ms))
    if info.end_time_ms:
        job_info["endTime"] = fmt_time(from_unix_ms(info.end_time_ms))
    w.st["rayJobInfo"] = job_info
    w.st.pop("jobStatusCheckFailureStartTime", None)


def _await_job_status(w: Work, cluster: RayCluster) -> bool:
    """True (return before the status update) while a failed submitter waits for the read of the
    Ray job it submitted; applies that read when it is terminal (see the module docstring)."""
    failed_at = submitter_failed_at(w)
    if failed_at is None or is_job_terminal(w.job_status):
        return False
    outcome, info = _observed_job(w)
    if outcome == "info" and info is not None and is_job_terminal(info.status):
        _apply_job_info(w, cluster, info, None)  # the submitter check then sees why it failed
        return False
    deadline = failed_at + timedelta(seconds=c.SUBMITTER_FAILURE_READBACK_SECONDS)
    if w.now >= deadline or outcome == "unreachable":
        return False
    w.poll_now = f"submitter-failed/{fmt_time(failed_at)}"
    w.deadline(deadline)
    w.log("The submitter failed: reading the Ray job's status before deciding why")
    return True


def reconcile_running(w: Work) -> bool:
    if (update_status_to_suspending_if_needed(w) or check_active_deadline(w) or check_transition_grace_period(w)
            or check_status_check_timeout(w)):
        return BREAK
    cluster = get_or_create_cluster(w)
    if cluster is None:
        return RETURN
    reconcile_services(w, cluster)
    finished_at: datetime | None = None
    if has_submitter(w.mode):
        if _await_job_status(w, cluster):
            return RETURN
        should_update, finished_at = check_submitter(w)
        if w.error is not None:
            return RETURN
        if finished_at is not None:
            # The Ray job has most likely ended with its submitter: have the poller read now.
            w.poll_now = f"submitter-finished/{fmt_time(finished_at)}"
        # KubeRay's GetJobInfo comes right after; here the latest observation may already show the
        # end (e.g. after a long read-your-writes hold): never time out a job seen terminal.
        seen, seen_info = _observed_job(w)
        seen_terminal = seen == "info" and seen_info is not None and is_job_terminal(seen_info.status)
        if (not seen_terminal and check_submitter_finished_timeout(w, finished_at)) or should_update:
            return BREAK
    outcome, info = _observed_job(w)
    if outcome == "again":
        return RETURN
    if outcome == "unreachable":
        return _status_check_failed(w)
    if outcome == "missing":
        if w.mode == JobSubmissionMode.HTTP:
            return _http_submit(w)
        if finished_at is not None:
            # KubeRay's GetJobInfo is fresh; an observation may predate the submission. The poller
            # reads at once (poll_now above): conclude "not found" only if it still says so.
            readback = finished_at + timedelta(seconds=c.SUBMITTER_FAILURE_READBACK_SECONDS)
            if w.now < readback:
                w.deadline(readback)
                w.log("The submitter finished; waiting for a read of the Ray job that postdates it")
                return RETURN
            w.fail(JobFailedReason.APP_FAILED.value, "Submitter completed but Ray job not found in RayCluster.")
            return BREAK
        return RETURN
    assert info is not None
    _apply_job_info(w, cluster, info, finished_at)
    return BREAK


__all__ = ["BREAK", "RETURN", "has_submitter", "reconcile_running", "submit_job_command"]
