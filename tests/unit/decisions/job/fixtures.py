"""RayJob factories and a small in-memory world (API server + executor + dashboard-poller + Ray
dashboard) that applies a decision's commands, status and dashboard commands to the next snapshot."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject, RecordEvent
from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardCommandResult,
    JobObservation,
    StopJob,
    SubmitJob,
)
from raybus.decisions.job.model import JobDecision, JobSnapshot
from raybus.decisions.job.reconcile import reconcile_rayjob
from raybus.decisions.job.settings import JobSettings

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = JobSettings()
NS = "ns"
FINALIZER = "ray.io/rayjob-finalizer"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ts(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster_spec(*, workers: int = 1, head_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    head = {"name": "ray-head", "image": "rayproject/ray:2.52.0",
            "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                      {"containerPort": 10001, "name": "client"}]}
    head.update(head_extra or {})
    spec: dict[str, Any] = {"rayVersion": "2.52.0",
                            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}}}
    if workers:
        spec["workerGroupSpecs"] = [{"groupName": "small-group", "replicas": workers, "minReplicas": 0,
                                     "maxReplicas": 5, "rayStartParams": {},
                                     "template": {"spec": {"containers": [
                                         {"name": "ray-worker", "image": "rayproject/ray:2.52.0"}]}}}]
    return spec


def job_body(*, name: str = "rj", status: dict[str, Any] | None = None, finalizer: bool = True,
             meta: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    full: dict[str, Any] = {"entrypoint": "python /home/ray/samples/sample_code.py", "rayClusterSpec": cluster_spec()}
    full.update(spec)
    if full.get("clusterSelector"):
        full.pop("rayClusterSpec", None)
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "uid": "uid-rj", "resourceVersion": "7",
                                "generation": 1}
    if finalizer:
        metadata["finalizers"] = [FINALIZER]
    metadata.update(meta or {})
    body: dict[str, Any] = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": full}
    if status is not None:
        body["status"] = status
    return body


def make_job(**kw: Any) -> RayJob:
    return RayJob.model_validate(job_body(**kw))


def ready_status() -> dict[str, Any]:
    return {"state": "ready", "readyWorkerReplicas": 1, "endpoints": {"dashboard": "8265"},
            "head": {"podIP": "10.0.0.1", "serviceName": "c-head-svc"}}


def make_cluster(job: RayJob, name: str, *, ready: bool = True, deleting: bool = False,
                 suspended_workers: bool = False) -> RayCluster:
    spec = copy.deepcopy(job.spec.ray_cluster_spec.to_dict()) if job.spec.ray_cluster_spec else cluster_spec()
    for group in spec.get("workerGroupSpecs") or []:
        if suspended_workers:
            group["suspend"] = True
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "3"}
    if deleting:
        meta["deletionTimestamp"] = ts(0)
    body = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec,
            "status": ready_status() if ready else {}}
    return RayCluster.model_validate(body)


def submitter(*, finished: str | None = None, at_seconds: float = 0, name: str = "rj",
              reason: str = "BackoffLimitExceeded", message: str = "Job has reached the specified backoff limit",
              deleting: bool = False) -> dict[str, Any]:
    """finished: None (running), "Complete" or "Failed"."""
    job: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job",
                           "metadata": {"name": name, "namespace": NS, "uid": "uid-job"}, "status": {}}
    if deleting:
        job["metadata"]["deletionTimestamp"] = ts(0)
    if finished:
        cond = {"type": finished, "status": "True", "lastTransitionTime": ts(at_seconds)}
        if finished == "Failed":
            cond.update(reason=reason, message=message)
        job["status"]["conditions"] = [cond]
    return job


def head_pod(cluster: str, *, exit_code: int | None = None, finished_s: float = 0) -> dict[str, Any]:
    statuses: list[dict[str, Any]] = [{"name": "ray-head", "ready": True, "state": {"running": {}}}]
    sub: dict[str, Any] = {"name": "ray-job-submitter", "state": {"running": {}}}
    if exit_code is not None:
        sub["state"] = {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed",
                                       "finishedAt": ts(finished_s)}}
    statuses.append(sub)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{cluster}-head-x", "namespace": NS,
                         "labels": {"ray.io/cluster": cluster, "ray.io/node-type": "head"}},
            "status": {"phase": "Running", "containerStatuses": statuses}}


def observation(cluster: str, *, jobs: dict[str, str] | None = None, missing: list[str] | None = None,
                reachable: bool = True, start_ms: int | None = None, end_ms: int | None = None,
                message: str = "") -> ClusterObservation:
    return ClusterObservation(
        namespace=NS, cluster=cluster, reachable=reachable,
        jobs={jid: JobObservation(job_id=jid, status=st, message=message, start_time_ms=start_ms,
                                  end_time_ms=end_ms if st in ("SUCCEEDED", "FAILED", "STOPPED") else None)
              for jid, st in (jobs or {}).items()},
        jobs_missing=missing or [])


def decide(snapshot: JobSnapshot, *, seconds: float = 0, settings: JobSettings = SETTINGS) -> JobDecision:
    return reconcile_rayjob(snapshot, settings=settings, now=at(seconds))


def events(d: JobDecision) -> list[str]:
    """Event reasons a decision records (RecordEvent + the executor's events for event_reason)."""
    out = []
    for cmd in d.commands:
        if isinstance(cmd, RecordEvent):
            out.append(cmd.event_reason)
        elif getattr(cmd, "event_reason", None):
            out.append(str(cmd.event_reason))
    return out


def created(d: JobDecision, kind: str) -> list[dict[str, Any]]:
    return [c.object for c in d.commands if isinstance(c, CreateObject) and c.object.get("kind") == kind]


def deleted(d: JobDecision, kind: str) -> list[str]:
    return [c.target.name for c in d.commands if isinstance(c, DeleteObject) and c.target.kind == kind]


def patched(d: JobDecision, kind: str) -> list[dict[str, Any]]:
    return [c.merge_patch for c in d.commands if isinstance(c, PatchObject) and c.target.kind == kind]


def submits(d: JobDecision) -> list[SubmitJob]:
    return [c for c in d.dashboard_commands if isinstance(c, SubmitJob)]


def stops(d: JobDecision) -> list[StopJob]:
    return [c for c in d.dashboard_commands if isinstance(c, StopJob)]


def result(op: str, cluster: str, state: str = "ok", message: str = "") -> DashboardCommandResult:
    return DashboardCommandResult(command_id=f"{op}-1", op=op, cluster=cluster, state=state,  # type: ignore[arg-type]
                                  message=message)
