"""What one RayJob reconcile reads, gathered from the snapshot cache (no I/O).

KubeRay's RayJob reconcile GETs its RayCluster (status.rayClusterName, or the clusterSelector's
cluster), its submitter batch Job (named after the RayJob), the head Pods of that cluster
(SidecarMode's submitter container status), its `<rayjob>-head-svc` Service, and asks the
dashboard for the job. Here all of them come from the cache; the dashboard part is the
dashboard-poller's last observation of the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.kuberay_names import owner_head_service_name
from raybus.decisions.dashboard_contract import DashboardCommandResult
from raybus.decisions.job import constants as c
from raybus.decisions.job.model import JobSnapshot, KubeCommandFailure
from raybus.runtime.cache import ObjectCache
from raybus.runtime.outcomes import OutcomeTracker, real_failures


@dataclass(frozen=True)
class PreviousStep:
    """What the previous decision of one RayJob published: its command batch (None if it had no
    Kubernetes commands) and its dashboard commands' ids. Its failures and results are the next
    decision's input (KubeRay sees them as the return values of its API/dashboard calls)."""

    batch: str | None = None
    dashboard: tuple[str, ...] = field(default_factory=tuple)


def cluster_name(job: RayJob) -> str:
    """status.rayClusterName, or before it is set the clusterSelector's cluster."""
    named = job.status.ray_cluster_name if job.status is not None else None
    return named or str((job.spec.cluster_selector or {}).get(c.RAY_JOB_CLUSTER_SELECTOR_KEY) or "")


def _cluster(cache: ObjectCache, namespace: str, name: str) -> RayCluster | None:
    raw = cache.get(s.Kind.RAYCLUSTER, namespace, name) if name else None
    if raw is None:
        return None
    try:
        return RayCluster.model_validate(raw)
    except ValidationError:
        return None  # the cluster-reconciler reports it (InvalidRayClusterSpec)


def previous_failures(outcomes: OutcomeTracker, previous: PreviousStep | None) -> list[KubeCommandFailure]:
    outcome = outcomes.by_batch.get(previous.batch) if previous is not None and previous.batch else None
    if outcome is None:
        return []
    return [KubeCommandFailure(message=r.message, target=r.target, code=r.code)
            for r in real_failures(outcome.results)]


def previous_results(cache: ObjectCache, key: ObjectKey,
                     previous: PreviousStep | None) -> list[DashboardCommandResult]:
    if previous is None:
        return []
    found = (cache.dashboard_result(key.namespace, key.name, command_id) for command_id in previous.dashboard)
    return [message.result for message in found if message is not None]


def build_snapshot(cache: ObjectCache, job: RayJob, *, failures: list[KubeCommandFailure],
                   results: list[DashboardCommandResult]) -> JobSnapshot:
    ns, name = job.namespace, job.name
    cluster = cluster_name(job)
    return JobSnapshot(
        rayjob=job,
        cluster=_cluster(cache, ns, cluster),
        submitter=cache.get(s.Kind.JOB, ns, name),
        head_pods=[p for p in cache.labelled(s.Kind.POD, ns, cluster) if podutil.is_head(p)] if cluster else [],
        head_service=cache.get(s.Kind.SERVICE, ns, owner_head_service_name(name)),
        dashboard=cache.dashboard(ns, cluster) if cluster else None,
        dashboard_results=results,
        failures=failures,
        # Names the decision invents (<rayjob>-<5 chars>) hash this with the attempt: stable
        # across restarts and replicas, so a re-decision never creates a second cluster.
        entropy=job.metadata.uid or "",
    )
