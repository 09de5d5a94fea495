"""KubeRay's RayJob status checks (``rayjob_controller.go``): suspend, deadlines, grace periods,
submitter status and the backoff limit. Each returns True when it changed the status (KubeRay's
``shouldUpdate`` -> ``break`` out of the switch). Every time limit is measured from a persisted
status timestamp and registered with ``w.deadline`` so the reconcile is requeued exactly then."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from raybus.api.predicates import as_dict, as_list
from raybus.api.rayjob import TERMINAL_JOB_STATUSES, JobFailedReason, JobSubmissionMode
from raybus.decisions.cluster import podutil
from raybus.decisions.job import constants as c
from raybus.decisions.job.timefmt import go_date_time, go_time_string, parse_time
from raybus.decisions.job.work import Work

# checkBackoffLimitAndUpdateStatusIfNeeded (v1.7): DeadlineExceeded and JobStatusCheckTimeoutExceeded
# are never retried; PreRunningDeadlineExceeded is (a retry restarts status.startTime in New, so the
# new attempt gets a whole pre-running deadline of its own).
NOT_RETRIED = frozenset({JobFailedReason.DEADLINE_EXCEEDED.value,
                         JobFailedReason.JOB_STATUS_CHECK_TIMEOUT_EXCEEDED.value})


def is_job_terminal(status: str) -> bool:
    """rayv1.IsJobTerminal (Ray's JobStatus.is_terminal)."""
    return status in TERMINAL_JOB_STATUSES


def update_status_to_suspending_if_needed(w: Work) -> bool:
    """updateStatusToSuspendingIfNeeded: only Running and Initializing may become Suspending."""
    if not w.job.spec.suspend or w.jds not in ("Running", "Initializing"):
        return False
    w.log(f"spec.suspend is true: JobDeploymentStatus {w.jds} -> Suspending")
    w.jds = "Suspending"
    return True


def _check_deadline(w: Work, seconds: int | None, *, reason: str, field: str) -> bool:
    """Fail the RayJob once status.startTime + seconds has passed; else note the deadline (the
    next reconcile is requeued exactly then, from the status, so it survives restarts)."""
    start = w.start_time
    if seconds is None or start is None:
        return False
    deadline = start + timedelta(seconds=seconds)
    if w.now < deadline:
        w.deadline(deadline)
        return False
    w.fail(reason, f"The RayJob has passed the {field}. StartTime: {go_time_string(start)}. "
                   f"{field[0].upper()}{field[1:]}: {seconds}")
    return True


def check_active_deadline(w: Work) -> bool:
    """checkActiveDeadlineAndUpdateStatusIfNeeded (Initializing and Running)."""
    return _check_deadline(w, w.job.spec.active_deadline_seconds,
                           reason=JobFailedReason.DEADLINE_EXCEEDED.value, field="activeDeadlineSeconds")


def check_pre_running_deadline(w: Work) -> bool:
    """preRunningDeadlineSeconds (KubeRay v1.6+, kuberay#4525): measured from status.startTime and
    covering Initializing and Waiting, i.e. everything before Running."""
    return _check_deadline(w, w.job.spec.pre_running_deadline_seconds,
                           reason=JobFailedReason.PRE_RUNNING_DEADLINE_EXCEEDED.value,
                           field="preRunningDeadlineSeconds")


def check_transition_grace_period(w: Work) -> bool:
    """checkTransitionGracePeriodAndUpdateStatusIfNeeded: jobStatus terminal but the deployment still
    Running (the submitter has not finished) for the grace period after rayJobInfo.endTime."""
    if not (is_job_terminal(w.job_status) and w.jds == "Running"):
        return False
    end = w.ray_job_info_end()
    if end is None:  # RayJob CRDs older than rayJobInfo: KubeRay's nil-pointer guard
        return False
    deadline = end + timedelta(seconds=w.settings.transition_grace_period_seconds)
    if w.now < deadline:
        w.deadline(deadline)
        return False
    w.jds = "Failed" if w.job_status == "FAILED" else "Complete"
    w.st["reason"] = JobFailedReason.TRANSITION_GRACE_PERIOD_EXCEEDED.value
    w.st["message"] = ("JobDeploymentStatus does not transition to Complete or Failed within the grace period "
                       "after JobStatus reaches a terminal state.")
    w.log(f"transition grace period exceeded: JobDeploymentStatus -> {w.jds}")
    return True


def check_submitter_finished_timeout(w: Work, finished_at: datetime | None) -> bool:
    """checkSubmitterFinishedTimeoutAndUpdateStatusIfNeeded: the submitter finished but the Ray job
    did not reach a terminal state within DefaultSubmitterFinishedTimeout (30 s)."""
    if finished_at is None or is_job_terminal(w.job_status):
        return False
    timeout = w.settings.submitter_finished_timeout_seconds
    deadline = finished_at + timedelta(seconds=timeout)
    if w.now < deadline:
        w.deadline(deadline)
        return False
    w.job_status = "FAILED"
    w.fail(JobFailedReason.TRANSITION_GRACE_PERIOD_EXCEEDED.value,
           f"The RayJob submitter finished at {go_date_time(finished_at)} but the ray job did not reach "
           f"terminal state within {timeout}s")
    return True


def _conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [as_dict(x) for x in as_list(as_dict(job.get("status")).get("conditions"))]


def submitter_job_failed_condition(job: dict[str, Any]) -> dict[str, Any] | None:
    """checkK8sJobStatus: the Failed=True condition."""
    return next((x for x in _conditions(job) if x.get("type") == c.JOB_FAILED and x.get("status") == "True"), None)


def submitter_job_finished_at(job: dict[str, Any]) -> datetime | None:
    """getJobFinishedCondition's lastTransitionTime (Complete or Failed = True)."""
    for cond in _conditions(job):
        if cond.get("type") in (c.JOB_COMPLETE, c.JOB_FAILED) and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def _submitter_container_status(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    for status in as_list(as_dict(pod.get("status")).get("containerStatuses")):
        if as_dict(status).get("name") == c.SUBMITTER_CONTAINER_NAME:
            return as_dict(status)
    return None


def sidecar_submitter_ended(w: Work) -> bool:
    """SidecarMode: has the head Pod's submitter container already terminated?"""
    if w.mode != JobSubmissionMode.SIDECAR:
        return False
    heads = podutil.head_pods(w.snapshot.head_pods)
    status = _submitter_container_status(heads[0]) if len(heads) == 1 else None
    return bool(status and as_dict(as_dict(status.get("state")).get("terminated")))


def _submitter_backoff_limit(w: Work) -> int:
    config = w.job.spec.submitter_config
    return config.backoff_limit if config is not None and config.backoff_limit is not None \
        else c.DEFAULT_SUBMITTER_BACKOFF_LIMIT


def _restart_gate(w: Work) -> bool:
    return bool(w.settings.operator.feature_gates.sidecar_submitter_restart)


def restart_count_exceeded(status: Mapping[str, Any] | None, backoff_limit: int) -> bool:
    """checkIsRestartCountExceeded (SidecarSubmitterRestart): only once the container terminated at
    least once (lastState.terminated), never while it sits terminated with exit code 0."""
    if status is None or not as_dict(as_dict(status.get("lastState")).get("terminated")):
        return False
    current = as_dict(as_dict(status.get("state")).get("terminated"))
    if current and int(current.get("exitCode") or 0) == 0:
        return False
    return int(status.get("restartCount") or 0) >= backoff_limit


def submitter_failed_at(w: Work) -> datetime | None:
    """When the submitter failed (K8sJobMode: the Job's Failed condition; SidecarMode: the head's
    submitter container terminated with a non-zero exit code, or with SidecarSubmitterRestart
    restarted submitterConfig.backoffLimit times), None if it has not."""
    if w.mode == JobSubmissionMode.SIDECAR:
        heads = podutil.head_pods(w.snapshot.head_pods)
        status = _submitter_container_status(heads[0]) if len(heads) == 1 else None
        if _restart_gate(w):
            if not restart_count_exceeded(status, _submitter_backoff_limit(w)):
                return None
            last = as_dict(as_dict(as_dict(status).get("lastState")).get("terminated"))
            return parse_time(last.get("finishedAt")) or w.now
        terminated = as_dict(as_dict(status.get("state")).get("terminated")) if status else {}
        if not terminated or int(terminated.get("exitCode") or 0) == 0:
            return None
        return parse_time(terminated.get("finishedAt")) or w.now
    job = w.snapshot.submitter
    condition = submitter_job_failed_condition(job) if job is not None else None
    if condition is None:
        return None
    return parse_time(condition.get("lastTransitionTime")) or w.now


def check_submitter(w: Work) -> tuple[bool, datetime | None]:
    """checkSubmitterAndUpdateStatusIfNeeded (K8sJobMode, SidecarMode) -> (shouldUpdate, finishedAt).
    Sets ``w.error`` (and returns (False, None)) where KubeRay returns an error."""
    if w.mode == JobSubmissionMode.SIDECAR:
        heads = podutil.head_pods(w.snapshot.head_pods)
        if len(heads) > 1:
            w.fail_reconcile(f"multiple head Pods found: {sorted(podutil.name(p) for p in heads)}")
            return False, None
        if not heads:
            w.fail(JobFailedReason.APP_FAILED.value, "Ray head pod not found.")
            return True, None
        status = _submitter_container_status(heads[0])
        terminated = as_dict(as_dict(status.get("state")).get("terminated")) if status else {}
        should_update = False
        if _restart_gate(w):
            # SidecarSubmitterRestart (alpha): the container restarts on failure (restartPolicy
            # OnFailure), so a non-zero exit is transient until the restarts exceed the limit.
            if restart_count_exceeded(status, _submitter_backoff_limit(w)):
                should_update = True
                if w.job_status == "FAILED":
                    w.fail(JobFailedReason.APP_FAILED.value, w.get("message"))
                else:
                    w.fail(JobFailedReason.SUBMISSION_FAILED.value,
                           f"Ray head pod submitter container {as_dict(status).get('name')} terminated after "
                           "exceeding the maximum restart count")
        # `ray job submit` (waiting) exits 0 when the job succeeded and 1 otherwise.
        elif status is not None and terminated and int(terminated.get("exitCode") or 0) != 0:
            should_update = True
            if w.job_status == "FAILED":
                w.fail(JobFailedReason.APP_FAILED.value, w.get("message"))
            else:
                w.fail(JobFailedReason.SUBMISSION_FAILED.value,
                       f"Ray head pod container {status.get('name')} terminated with exit code "
                       f"{int(terminated.get('exitCode') or 0)}: {terminated.get('reason') or ''}")
        finished = parse_time(terminated.get("finishedAt")) if terminated else None
        return should_update, finished
    job = w.snapshot.submitter
    if job is None:
        w.fail_reconcile(f"Failed to get the submitter Kubernetes Job for RayJob: jobs.batch \"{w.job.name}\" "
                         "not found")
        return False, None
    condition = submitter_job_failed_condition(job)
    should_update = False
    if condition is not None:
        # The submitter waits for the user code, so a failed submitter is a failed submission unless
        # the Ray job itself was already seen FAILED (then the previous message explains it).
        should_update = True
        if w.job_status == "FAILED":
            w.fail(JobFailedReason.APP_FAILED.value, w.get("message"))
        else:
            w.fail(JobFailedReason.SUBMISSION_FAILED.value,
                   f"Job submission has failed. Reason: {condition.get('reason') or ''}. "
                   f"Message: {condition.get('message') or ''}")
    return should_update, submitter_job_finished_at(job)


def check_backoff_limit(w: Work) -> None:
    """checkBackoffLimitAndUpdateStatusIfNeeded: runs after every switch that falls through; counts
    the attempt that just ended and turns an eligible Failed into Retrying (each retry = a new cluster)."""
    failed = int(w.st.get("failed") or 0)
    succeeded = int(w.st.get("succeeded") or 0)
    if w.jds == "Failed":
        failed += 1
    if w.job_status == "SUCCEEDED" and w.jds == "Complete":
        succeeded += 1
    w.st["failed"] = failed
    w.st["succeeded"] = succeeded
    limit = w.job.spec.backoff_limit
    if w.jds == "Failed" and limit is not None and failed < limit + 1:
        if w.get("reason") in NOT_RETRIED:
            w.log("RayJob is not eligible for retry due to failure with DeadlineExceeded or "
                  f"JobStatusCheckTimeoutExceeded (reason {w.get('reason')}, "
                  f"backoffLimit {limit}, failed {failed})")
            return
        w.log(f"RayJob is eligible for retry (backoffLimit {limit}, failed {failed}): JobDeploymentStatus -> Retrying")
        w.jds = "Retrying"
