"""RayJobReconciler.Reconcile (``rayjob_controller.go``, KubeRay v1.7; seed 002 wins) as one pure step.

``reconcile_rayjob(snapshot, settings=..., now=...)`` mirrors KubeRay's order: managedBy external ->
skip; deletionTimestamp -> stop the Ray job, then drop ``ray.io/rayjob-finalizer``; validation ->
ValidationFailed; the switch over the 10 jobDeploymentStatus values; checkBackoffLimit; the status
write (updateRayJobStatus's consistency rule). Dashboard reads come from the poller's observation
and writes go out as dashboard commands: nothing here blocks on a dashboard.

Requeues: KubeRay requeues every 3 s to re-poll the dashboard and the API server. In raybus job
status changes arrive as dashboard observations and object changes as triggers, so the decision
asks for a requeue only for time-based transitions (deadlines, TTLs, grace periods, timeouts), at
exactly the next one - computed from persisted status timestamps, so it survives restarts.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from raybus.api import with_defaults
from raybus.api.rayjob import JobSubmissionMode, RayJob
from raybus.decisions.cluster.status import inconsistent_status
from raybus.decisions.commands import PatchObject, UpdateStatus
from raybus.decisions.dashboard_contract import DashboardInterest, StopJob
from raybus.decisions.job import constants as c
from raybus.decisions.job.checks import (
    check_active_deadline,
    check_backoff_limit,
    check_pre_running_deadline,
    is_job_terminal,
    sidecar_submitter_ended,
    update_status_to_suspending_if_needed,
)
from raybus.decisions.job.cleanup import handle_terminal
from raybus.decisions.job.cluster import dashboard_url
from raybus.decisions.job.model import JobDecision, JobSnapshot
from raybus.decisions.job.names import generate_ray_cluster_name, generate_ray_job_id
from raybus.decisions.job.resources import (
    create_submitter_if_needed,
    current_cluster,
    delete_cluster_resources,
    delete_submitter_job,
    get_or_create_cluster,
)
from raybus.decisions.job.running import BREAK, RETURN, reconcile_running
from raybus.decisions.job.settings import JobSettings
from raybus.decisions.job.submitter import SubmitterError
from raybus.decisions.job.timefmt import fmt_time, seconds_until
from raybus.decisions.job.validation import rayjob_validation
from raybus.decisions.job.work import Work, rayjob_ref

TERMINAL = ("Complete", "Failed")


def _finalizer_patch(job: RayJob, finalizers: list[str]) -> dict[str, Any]:
    # KubeRay Updates the object: the resourceVersion makes the merge patch just as optimistic.
    meta: dict[str, Any] = {"finalizers": finalizers}
    if job.metadata.resource_version:
        meta["resourceVersion"] = job.metadata.resource_version
    return {"metadata": meta}


def _handle_deletion(w: Work) -> JobDecision:
    """If the Ray job may still run (jobStatus not terminal, including New), StopJob first; the
    finalizer goes no matter whether StopJob succeeded (a gone cluster must not block deletion)."""
    finalizers = list(w.job.metadata.finalizers or [])
    if c.RAY_JOB_STOP_JOB_FINALIZER not in finalizers:
        return _decision(w, status=None)
    cluster_name, job_id = w.get("rayClusterName"), w.get("jobId")
    stoppable = bool(job_id and w.get("dashboardURL") and current_cluster(w) is not None)
    # An expired result was never executed (revoked before the poller claimed it): stop again.
    stopped = any(r.op == "stop_job" and r.cluster == cluster_name and not getattr(r, "expired", False)
                  for r in w.snapshot.dashboard_results)
    if not is_job_terminal(w.job_status) and stoppable and not stopped:
        w.dashboard_commands.append(StopJob(reason=f"RayJob {w.job.namespace}/{w.job.name} is being deleted",
                                            cluster=cluster_name, job_id=job_id))
        w.log(f"RayJob is being deleted: stopping Ray job {job_id} before removing the finalizer")
        return _decision(w, status=None)
    remaining = [f for f in finalizers if f != c.RAY_JOB_STOP_JOB_FINALIZER]
    w.commands.append(PatchObject(reason=f"Remove the finalizer {c.RAY_JOB_STOP_JOB_FINALIZER}",
                                  target=rayjob_ref(w.job), merge_patch=_finalizer_patch(w.job, remaining)))
    w.log("RayJob is being deleted: removing the finalizer no matter whether StopJob succeeded")
    return _decision(w, status=None)


def init_rayjob_status_if_need(w: Work) -> None:
    """initRayJobStatusIfNeed: the ONLY place Initializing is entered; jobId and rayClusterName are
    fixed here, before any submission or creation, so nothing is ever created twice."""
    if w.get("jobId") and w.get("rayClusterName") and w.job_status:
        return
    entropy = w.snapshot.entropy
    if w.mode != "InteractiveMode" and not w.get("jobId"):
        w.st["jobId"] = w.job.spec.job_id or generate_ray_job_id(w.job, entropy=entropy)
    if not w.get("rayClusterName"):
        selected = (w.job.spec.cluster_selector or {}).get(c.RAY_JOB_CLUSTER_SELECTOR_KEY, "")
        w.st["rayClusterName"] = selected or generate_ray_cluster_name(w.job, entropy=entropy)
    w.job_status = ""  # JobStatusNew
    w.jds = "Initializing"
    w.st["startTime"] = fmt_time(w.now)
    w.log(f"JobDeploymentStatus New -> Initializing (jobId {w.get('jobId')!r}, RayCluster {w.get('rayClusterName')})")


def _new(w: Work) -> bool:
    finalizers = list(w.job.metadata.finalizers or [])
    if c.RAY_JOB_STOP_JOB_FINALIZER not in finalizers:
        # KubeRay Updates the RayJob with the finalizer and returns if that fails, before it writes
        # the status. Here the two writes would race (the status, written first, makes the patch's
        # resourceVersion stale and the RayJob would run without its finalizer): add it, and
        # initialise the status on the next step, which sees the finalizer.
        w.commands.append(PatchObject(reason=f"Add the finalizer {c.RAY_JOB_STOP_JOB_FINALIZER}",
                                      target=rayjob_ref(w.job),
                                      merge_patch=_finalizer_patch(w.job, [*finalizers, c.RAY_JOB_STOP_JOB_FINALIZER])))
        return RETURN
    init_rayjob_status_if_need(w)
    return BREAK


def _initializing(w: Work) -> bool:
    if update_status_to_suspending_if_needed(w) or check_active_deadline(w) or check_pre_running_deadline(w):
        return BREAK
    cluster = get_or_create_cluster(w)
    if cluster is None:
        return RETURN
    if not w.get("dashboardURL"):
        # kuberay#4199 (open in v1.7): a SidecarMode job that ends before every Pod was ever Ready
        # leaves the head Pod not Ready for good (its submitter container terminated), so the
        # cluster never becomes ready and the RayJob would stay Initializing. The submitter having
        # run is what Running waits for anyway: go on and judge it there.
        if (cluster.status.state if cluster.status is not None else None) != "ready" \
                and not sidecar_submitter_ended(w):
            # The not-ready cluster status is reflected in the RayJob's status.
            w.st["rayClusterStatus"] = cluster.status.to_dict() if cluster.status is not None else {}
            return BREAK
        try:
            w.st["dashboardURL"] = dashboard_url(cluster, settings=w.settings.operator)
        except SubmitterError as exc:
            w.fail_reconcile(f"Failed to get the dashboard URL after the RayCluster is ready: {exc}")
            return RETURN
    if w.mode == "InteractiveMode":
        w.jds = "Waiting"
        w.log("InteractiveMode and the RayCluster is ready: JobDeploymentStatus Initializing -> Waiting")
        return BREAK
    if w.mode == "K8sJobMode" and not create_submitter_if_needed(w, cluster):
        return RETURN
    w.jds = "Running"
    w.log(f"RayCluster {cluster.name} is ready ({w.mode}): JobDeploymentStatus Initializing -> Running")
    return BREAK


def _waiting(w: Work) -> bool:
    if check_pre_running_deadline(w):
        return BREAK
    if not w.job.spec.job_id:
        return RETURN  # the user sets spec.jobId; that change triggers the next reconcile
    w.st["jobId"] = w.job.spec.job_id
    w.jds = "Running"
    w.log(f"spec.jobId {w.job.spec.job_id} set: JobDeploymentStatus Waiting -> Running")
    return BREAK


def _suspending_or_retrying(w: Work) -> bool:
    """Atomic: once Suspending, everything is deleted and the RayJob becomes Suspended whatever
    spec.suspend says meanwhile. KubeRay does not stop the Ray job first (no graceful-stop practice)."""
    cluster_deleted = delete_cluster_resources(w)
    job_deleted = delete_submitter_job(w)
    if not cluster_deleted or not job_deleted:
        w.log("Waiting for the RayCluster and the submitter Job to be deleted before the status transitions")
        return RETURN
    for key in ("rayClusterName", "dashboardURL", "jobId", "message", "reason", "jobStatusCheckFailureStartTime"):
        w.st.pop(key, None)
    w.st["rayClusterStatus"] = {}
    w.st["rayJobInfo"] = {}
    w.job_status = ""
    target = "Suspended" if w.jds == "Suspending" else ""  # Retrying -> New ("")
    w.log(f"Resources released: JobDeploymentStatus {w.jds} -> {target or 'New'}")
    w.jds = target
    return BREAK


def _suspended(w: Work) -> bool:
    if w.job.spec.suspend:
        return RETURN  # nothing to do until resumed
    w.job_status = ""
    w.jds = ""
    w.log("spec.suspend is false: JobDeploymentStatus Suspended -> New")
    return BREAK


_STATES = {"": _new, "Initializing": _initializing, "Waiting": _waiting, "Running": reconcile_running,
           "Suspending": _suspending_or_retrying, "Retrying": _suspending_or_retrying, "Suspended": _suspended}


def _status_to_write(w: Work) -> dict[str, Any] | None:
    """updateRayJobStatus: write only when a field crucial to the state machine changed (jobStatus,
    jobDeploymentStatus, the embedded RayClusterStatus; v1.7 also persists the status-check
    failure start). endTime is stamped whenever a terminal status is written."""
    old, new = w.original, w.st
    changed = (
        (old.get("jobStatus") or "") != (new.get("jobStatus") or "")
        or (old.get("jobDeploymentStatus") or "") != (new.get("jobDeploymentStatus") or "")
        or inconsistent_status(old.get("rayClusterStatus") or {}, new.get("rayClusterStatus") or {})
        or old.get("jobStatusCheckFailureStartTime") != new.get("jobStatusCheckFailureStartTime")
    )
    if not changed:
        return None
    if new.get("jobDeploymentStatus") in TERMINAL:
        new["endTime"] = fmt_time(w.now)
    # raybus addition (KubeRay never sets it, kuberay#4042): which generation this status reflects.
    if w.job.metadata.generation is not None:
        new["observedGeneration"] = w.job.metadata.generation
    return {key: value for key, value in new.items() if value is not None and value != ""}


def _has_time_based_followup(w: Work) -> bool:
    """Does the new state have a deadline/TTL the next reconcile must compute?"""
    spec = w.job.spec
    if w.jds in ("Initializing", "Waiting", "Running"):
        return bool(spec.active_deadline_seconds or spec.pre_running_deadline_seconds
                    or is_job_terminal(w.job_status) or w.st.get("jobStatusCheckFailureStartTime"))
    if w.jds in TERMINAL:
        return not spec.cluster_selector and bool(spec.deletion_strategy or spec.shutdown_after_job_finishes)
    return False


# K8sJobMode/SidecarMode: the submitter container runs `ray job submit`, which follows the job's log
# tail and exits with it; the watcher sees that and the reconciler bumps poll_now
# (`job_end_signalled`). The other modes have no such container: the dashboard-poller holds that
# same log tail stream itself (`follow_jobs`). Either way the poller need not poll for the end.
_FOLLOWED_MODES = frozenset({JobSubmissionMode.HTTP, JobSubmissionMode.INTERACTIVE})
_SUBMITTER_MODES = frozenset({JobSubmissionMode.K8S_JOB, JobSubmissionMode.SIDECAR})


def _interest(w: Work) -> DashboardInterest:
    """Follow the job while Running; the fast cadence while it may start or end any moment."""
    if (w.jds != "Running" or not w.get("jobId") or not w.get("rayClusterName")
            or w.job.metadata.deletion_timestamp):
        return DashboardInterest()
    job_id = w.get("jobId")
    follow = w.mode in _FOLLOWED_MODES and not is_job_terminal(w.job_status)
    return DashboardInterest(cluster=w.get("rayClusterName"), jobs=[job_id],
                             expect_change=w.job_status in ("", "PENDING") or bool(w.dashboard_commands),
                             poll_now=w.poll_now, follow_jobs=[job_id] if follow else [],
                             job_end_signalled=w.mode in _SUBMITTER_MODES)


def _requeue_after(w: Work, status: dict[str, Any] | None) -> float | None:
    if w.error is not None:
        return None  # the rate limiter decides
    if status is not None and (w.original.get("jobDeploymentStatus") or "") != w.jds:
        # A new state: the deadlines gathered on the way are the old state's. Run the new state's
        # first step once this write is visible (KubeRay: the watch event of its own status update)
        # if it has time-based behaviour; it computes its deadlines itself.
        return 0.0 if _has_time_based_followup(w) else None
    if w.jds == "Running" and is_job_terminal(w.job_status):
        end = w.ray_job_info_end()  # the transition grace period now runs
        if end is not None:
            w.deadline(end + timedelta(seconds=w.settings.transition_grace_period_seconds))
    return seconds_until(min(w.deadlines), w.now) if w.deadlines else None


def _decision(w: Work, *, status: dict[str, Any] | None) -> JobDecision:
    requeue = _requeue_after(w, status)
    return JobDecision(commands=w.commands, dashboard_commands=w.dashboard_commands, status=status,
                       interest=_interest(w), requeue_after=requeue, error=w.error, reasons=w.reasons)


def reconcile_rayjob(snapshot: JobSnapshot, *, settings: JobSettings, now: datetime) -> JobDecision:
    job = snapshot.rayjob
    managed_by = job.spec.managed_by
    if managed_by and managed_by != c.KUBERAY_OPERATOR:
        return JobDecision(reasons=[f"Skipping RayJob managed by a custom controller ({managed_by})"])
    w = Work(snapshot.model_copy(update={"rayjob": with_defaults(job)}), settings=settings, now=now)
    if snapshot.failures:
        # The previous round's command failed: KubeRay's reconcile returned that error.
        w.fail_reconcile("; ".join(f"{f.target}: {f.message}" if f.target else f.message for f in snapshot.failures))
        return _decision(w, status=None)
    if job.metadata.deletion_timestamp:
        return _handle_deletion(w)
    invalid = rayjob_validation(job, gates=settings.operator.feature_gates)
    if invalid is not None:
        status = next((cmd.status for cmd in invalid.commands if isinstance(cmd, UpdateStatus)), None)
        return JobDecision(commands=[cmd for cmd in invalid.commands if not isinstance(cmd, UpdateStatus)],
                           status=status, reasons=invalid.reasons)
    if w.jds in TERMINAL:
        handle_terminal(w)  # returns without a status update
        return _decision(w, status=None)
    handler = _STATES.get(w.jds)
    if handler is None:
        # ValidationFailed (terminal) or an unknown value: KubeRay logs and does nothing.
        w.log(f"JobDeploymentStatus {w.jds!r}: nothing to do")
        return _decision(w, status=None)
    if handler(w) is RETURN:
        return _decision(w, status=None)
    check_backoff_limit(w)
    return _decision(w, status=_status_to_write(w))


__all__ = ["init_rayjob_status_if_need", "reconcile_rayjob"]
