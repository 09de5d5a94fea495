"""An in-memory world for the RayJob decision: API server + executor + kubelet + Ray dashboards +
dashboard-poller, driven by environment events. ``World.step()`` runs one decision on a consistent
snapshot (read-your-writes) and applies its output; every apply checks the safety invariants."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from raybus.api.rayjob import RayJob
from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject
from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardCommandResult,
    DashboardInterest,
    JobObservation,
    StopJob,
    SubmitJob,
)
from raybus.decisions.job.model import JobDecision, JobSnapshot
from raybus.decisions.job.settings import JobSettings
from tests.unit.decisions.job.fixtures import NS, at, decide, job_body, ready_status, ts

TERMINAL = ("Complete", "Failed")
# checkBackoffLimitAndUpdateStatusIfNeeded (v1.7): these reasons are never retried.
DEADLINES = ("DeadlineExceeded", "JobStatusCheckTimeoutExceeded")


class Violation(AssertionError):
    pass


@dataclass
class World:
    spec: dict[str, Any]
    settings: JobSettings = field(default_factory=JobSettings)
    now: float = 0.0
    job: dict[str, Any] = field(default_factory=dict)
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    submitter: dict[str, Any] | None = None
    head_service: dict[str, Any] | None = None
    dash: dict[str, dict[str, str]] = field(default_factory=dict)  # cluster -> job id -> Ray status
    unreachable: set[str] = field(default_factory=set)
    sidecar: dict[str, tuple[int, float]] = field(default_factory=dict)  # cluster -> (exit code, finished at)
    observation: ClusterObservation | None = None
    interest: DashboardInterest = field(default_factory=DashboardInterest)
    results: list[DashboardCommandResult] = field(default_factory=list)
    refresh_after_decision: bool = False
    last: JobDecision | None = None
    gone: bool = False
    # history for the invariants
    created_clusters: list[str] = field(default_factory=list)
    submitter_creations: list[str] = field(default_factory=list)  # cluster name per creation
    duplicate_submissions: int = 0
    statuses: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.job = job_body(finalizer=False, **self.spec)
        selected = (self.spec.get("clusterSelector") or {}).get("ray.io/cluster")
        if selected:  # the user's cluster, ready, not owned by the RayJob
            self.clusters[selected] = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                       "metadata": {"name": selected, "namespace": NS, "uid": "user"},
                                       "spec": job_body()["spec"]["rayClusterSpec"], "status": ready_status()}

    # --- observation of the world ---------------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any]:
        return self.job.get("status") or {}

    def _cluster_name(self) -> str:
        return self.status.get("rayClusterName") or (self.spec.get("clusterSelector") or {}).get("ray.io/cluster", "")

    def _head_pods(self, name: str) -> list[dict[str, Any]]:
        cluster = self.clusters.get(name)
        if cluster is None or (cluster.get("status") or {}).get("state") != "ready":
            return []
        statuses: list[dict[str, Any]] = [{"name": "ray-head", "ready": True}]
        if name in self.sidecar:
            code, finished = self.sidecar[name]
            statuses.append({"name": "ray-job-submitter", "state": {"terminated": {
                "exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": ts(finished)}}})
        return [{"metadata": {"name": f"{name}-head", "labels": {"ray.io/cluster": name, "ray.io/node-type": "head"}},
                 "status": {"containerStatuses": statuses}}]

    def snapshot(self) -> JobSnapshot:
        name = self._cluster_name()
        return JobSnapshot(rayjob=RayJob.model_validate(copy.deepcopy(self.job)), cluster=self.clusters.get(name),
                           submitter=copy.deepcopy(self.submitter), head_pods=self._head_pods(name),
                           head_service=self.head_service, dashboard=self.observation,
                           dashboard_results=list(self.results), entropy="world")

    # --- one reconcile --------------------------------------------------------------------------------------
    def step(self) -> JobDecision | None:
        if self.gone:
            return None
        snap = self.snapshot()
        decision = decide(snap, seconds=self.now, settings=self.settings)
        if decide(snap, seconds=self.now, settings=self.settings) != decision:
            raise Violation("the same snapshot decided twice gave different decisions")
        self.results = []
        if self.refresh_after_decision:  # the gateway's contract: the observation after a result reflects it
            self.poll()
            self.refresh_after_decision = False
        self.apply(decision)
        self.last = decision
        return decision

    def apply(self, d: JobDecision) -> None:
        for cmd in d.commands:
            if isinstance(cmd, CreateObject):
                self._create(cmd.object)
            elif isinstance(cmd, DeleteObject):
                self._delete(cmd.target.kind, cmd.target.name)
            elif isinstance(cmd, PatchObject):
                self._patch(cmd.target.kind, cmd.merge_patch)
        if d.status is not None and not self.gone:
            self._write_status(d.status)
        for dc in d.dashboard_commands:
            self._dashboard(dc)
        self.interest = d.interest

    def _create(self, obj: dict[str, Any]) -> None:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind == "RayCluster":
            if name in self.clusters or name in self.created_clusters:
                raise Violation(f"RayCluster {name} created twice")
            if any(c["metadata"].get("uid") != "user" for c in self.clusters.values()):
                raise Violation("a second RayCluster while one still exists")
            if self.spec.get("clusterSelector"):
                raise Violation("clusterSelector mode created a RayCluster")
            self.created_clusters.append(name)
            self.clusters[name] = copy.deepcopy(obj) | {"status": {}}
        elif kind == "Job":
            attempt = self.status.get("rayClusterName", "")
            if self.submitter is not None or attempt in self.submitter_creations:
                raise Violation(f"a second submitter Job for attempt {attempt}")
            self.submitter_creations.append(attempt)
            self.submitter = copy.deepcopy(obj) | {"status": {}}
        elif kind == "Service":
            self.head_service = copy.deepcopy(obj)

    def _delete(self, kind: str, name: str) -> None:
        if kind == "RayCluster":
            if self.clusters[name]["metadata"].get("uid") == "user":
                raise Violation("deleted the user's RayCluster")
            self.clusters[name]["metadata"]["deletionTimestamp"] = ts(self.now)
        elif kind == "Job" and self.submitter is not None:
            self.submitter["metadata"]["deletionTimestamp"] = ts(self.now)
        elif kind == "RayJob":
            self.job["metadata"]["deletionTimestamp"] = ts(self.now)

    def _patch(self, kind: str, patch: dict[str, Any]) -> None:
        if kind == "RayJob":
            self.job["metadata"]["finalizers"] = patch["metadata"]["finalizers"]
            if self.job["metadata"].get("deletionTimestamp") and not self.job["metadata"]["finalizers"]:
                self.gone = True
        elif kind == "RayCluster":
            cluster = next(c for c in self.clusters.values() if c["metadata"].get("uid") != "user")
            cluster["spec"]["workerGroupSpecs"] = patch["spec"]["workerGroupSpecs"]
        elif kind == "Service" and self.head_service is not None:
            self.head_service["spec"] = patch["spec"]

    def _write_status(self, new: dict[str, Any]) -> None:
        old = self.status
        if old.get("jobDeploymentStatus") in TERMINAL and new.get("jobDeploymentStatus") != old["jobDeploymentStatus"]:
            raise Violation(f"left terminal {old['jobDeploymentStatus']} for {new.get('jobDeploymentStatus')!r}")
        if new.get("reason") in DEADLINES and new.get("jobDeploymentStatus") == "Retrying":
            raise Violation("a DeadlineExceeded/JobStatusCheckTimeoutExceeded failure was retried")
        for counter in ("failed", "succeeded"):
            if int(new.get(counter) or 0) < int(old.get(counter) or 0):
                raise Violation(f"{counter} decreased")
        if new.get("jobDeploymentStatus") in TERMINAL and not new.get("endTime"):
            raise Violation("terminal status without endTime")
        self.job["status"] = copy.deepcopy(new)
        self.statuses.append(copy.deepcopy(new))

    def _dashboard(self, dc: Any) -> None:
        jobs = self.dash.setdefault(dc.cluster, {})
        ok = dc.cluster in self.clusters and dc.cluster not in self.unreachable
        if isinstance(dc, SubmitJob):
            if ok and dc.job_id in jobs:
                self.duplicate_submissions += 1
            if ok and dc.job_id not in jobs:
                jobs[dc.job_id] = "PENDING"
            self.results.append(DashboardCommandResult(command_id="c", op=dc.op, cluster=dc.cluster,
                                                       state="ok" if ok else "unknown"))
            self.refresh_after_decision = True
        elif isinstance(dc, StopJob):
            if ok and jobs.get(dc.job_id) in ("PENDING", "RUNNING"):
                jobs[dc.job_id] = "STOPPED"
            self.results.append(DashboardCommandResult(command_id="c", op=dc.op, cluster=dc.cluster,
                                                       state="ok" if ok else "failed"))

    # --- environment events ---------------------------------------------------------------------------------------
    def poll(self) -> None:
        """The dashboard-poller reads the cluster of interest and publishes what it saw."""
        name = self.interest.cluster
        if not name:
            return
        if name in self.unreachable or name not in self.clusters:
            prev = self.observation if self.observation is not None and self.observation.cluster == name else None
            self.observation = ClusterObservation(namespace=NS, cluster=name, reachable=False,
                                                  jobs=prev.jobs if prev else {})
            return
        jobs = self.dash.get(name, {})
        end_ms = int(at(self.now).timestamp() * 1000)
        self.observation = ClusterObservation(
            namespace=NS, cluster=name, reachable=True,
            jobs={j: JobObservation(job_id=j, status=jobs[j],
                                    end_time_ms=end_ms if jobs[j] in ("SUCCEEDED", "FAILED", "STOPPED") else None)
                  for j in self.interest.jobs if j in jobs},
            jobs_missing=[j for j in self.interest.jobs if j not in jobs])

    def current(self) -> str:
        return self.status.get("rayClusterName", "")

    def event(self, name: str, arg: int) -> None:
        getattr(self, f"ev_{name}")(arg)

    def ev_tick(self, arg: int) -> None:
        self.now += 1 + arg * arg

    def ev_requeue(self, arg: int) -> None:
        if self.last is not None and self.last.requeue_after is not None:
            self.now += self.last.requeue_after

    def ev_poll(self, arg: int) -> None:
        self.poll()

    def ev_cluster_ready(self, arg: int) -> None:
        for cluster in self.clusters.values():
            if not cluster.get("status") and not cluster["metadata"].get("deletionTimestamp"):
                cluster["status"] = ready_status()

    def ev_finish_deletions(self, arg: int) -> None:
        for name in [n for n, c in self.clusters.items() if c["metadata"].get("deletionTimestamp")]:
            del self.clusters[name]
            self.sidecar.pop(name, None)
        if self.submitter is not None and self.submitter["metadata"].get("deletionTimestamp"):
            self.submitter = None

    def _ready(self, name: str) -> bool:
        return (self.clusters.get(name, {}).get("status") or {}).get("state") == "ready"

    def ev_submitter_runs(self, arg: int) -> None:
        """The K8s submitter Job's or the sidecar's `ray job submit` (guarded: never a duplicate)."""
        name, job_id = self.current(), self.status.get("jobId", "")
        mode = self.spec.get("submissionMode", "K8sJobMode")
        runs = (mode == "K8sJobMode" and self.submitter is not None) or mode == "SidecarMode"
        if runs and job_id and self._ready(name) and name not in self.unreachable:
            self.dash.setdefault(name, {}).setdefault(job_id, "PENDING")

    def ev_job_progress(self, arg: int) -> None:
        for jobs in self.dash.values():
            for job_id, state in jobs.items():
                if state == "PENDING":
                    jobs[job_id] = "RUNNING"
                elif state == "RUNNING":
                    jobs[job_id] = "SUCCEEDED" if arg % 2 == 0 else "FAILED"

    def ev_submitter_finishes(self, arg: int) -> None:
        name, job_id = self.current(), self.status.get("jobId", "")
        state = self.dash.get(name, {}).get(job_id)
        if state not in ("SUCCEEDED", "FAILED", "STOPPED"):
            return
        code = 0 if state == "SUCCEEDED" else 1
        if self.submitter is not None and not (self.submitter.get("status") or {}).get("conditions"):
            kind = "Complete" if code == 0 else "Failed"
            self.submitter["status"] = {"conditions": [{"type": kind, "status": "True",
                                                        "lastTransitionTime": ts(self.now)}]}
        if self.spec.get("submissionMode") == "SidecarMode" and self._ready(name) and name not in self.sidecar:
            self.sidecar[name] = (code, self.now)

    def ev_submitter_crash(self, arg: int) -> None:
        if self.submitter is not None and not (self.submitter.get("status") or {}).get("conditions"):
            self.submitter["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                                        "lastTransitionTime": ts(self.now)}]}
        name = self.current()
        if self.spec.get("submissionMode") == "SidecarMode" and self._ready(name) and name not in self.sidecar:
            self.sidecar[name] = (1, self.now)

    def ev_toggle_reachable(self, arg: int) -> None:
        self.unreachable ^= {self.current()}

    def ev_head_restart(self, arg: int) -> None:
        self.dash.pop(self.current(), None)

    def ev_toggle_suspend(self, arg: int) -> None:
        if self.spec.get("shutdownAfterJobFinishes") and not self.spec.get("clusterSelector"):
            self.job["spec"]["suspend"] = not self.job["spec"].get("suspend", False)
            self.job["metadata"]["generation"] += 1  # the API server bumps it on every spec change

    def ev_delete_rayjob(self, arg: int) -> None:
        if arg % 3 == 0:
            self.job["metadata"]["deletionTimestamp"] = ts(self.now)

    def ev_user_sets_job_id(self, arg: int) -> None:
        if self.spec.get("submissionMode") == "InteractiveMode" and not self.job["spec"].get("jobId"):
            self.job["spec"]["jobId"] = "user-job"
            self.job["metadata"]["generation"] += 1
            name = self.current()
            if self._ready(name):
                self.dash.setdefault(name, {})["user-job"] = "RUNNING"


# Progress events weigh more than disturbances, so sequences reach Complete/Failed/Retrying often.
EVENTS = (["poll"] * 5 + ["cluster_ready", "submitter_runs", "job_progress", "submitter_finishes",
                          "finish_deletions"] * 3
          + ["tick", "requeue", "submitter_crash", "toggle_reachable", "head_restart", "toggle_suspend",
             "delete_rayjob", "user_sets_job_id"])
