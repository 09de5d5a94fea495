"""Dangling RayClusters and their deletion deadlines (rayservice_controller.go: cleanUpRayClusterInstance).

KubeRay keeps the deadlines in a process-local map (lost on restart: an old cluster then lives
another full delay, or forever if the operator keeps restarting). Here they live in Redis: a
deadline is set once, when the cluster is first seen dangling, and never moved; it is forgotten
only when its cluster no longer exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from raybus.api.rayservice import RayService
from raybus.decisions.commands import Command, DeleteObject, ObjectRef
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.clusters import ORIGINATED_FROM_CR_NAME, ORIGINATED_FROM_CRD

Json = dict[str, Any]


def associated_clusters(service: RayService, clusters: list[Json]) -> list[Json]:
    """RayServiceRayClustersAssociationOptions: same namespace, originated-from labels."""
    out = []
    for cluster in clusters:
        meta = cluster.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (meta.get("namespace") or service.namespace) == service.namespace \
                and labels.get(ORIGINATED_FROM_CR_NAME) == service.name \
                and labels.get(ORIGINATED_FROM_CRD) == "RayService":
            out.append(cluster)
    return out


def deletion_delay_seconds(service: RayService) -> int:
    """spec.rayClusterDeletionDelaySeconds, default RayClusterDeletionDelayDuration (60 s)."""
    delay = service.spec.ray_cluster_deletion_delay_seconds
    return c.RAY_CLUSTER_DELETION_DELAY_SECONDS if delay is None else delay


def cluster_ref(cluster: Json) -> ObjectRef:
    return ObjectRef.of(cluster, api_version="ray.io/v1", kind="RayCluster")


def delete_cluster(service: RayService, cluster: Json) -> DeleteObject:
    name = (cluster.get("metadata") or {}).get("name")
    return DeleteObject(reason=f"Deleted the RayCluster {service.namespace}/{name}", target=cluster_ref(cluster),
                        propagation="Background", event_reason=c.DELETED_RAY_CLUSTER)


@dataclass
class CleanupResult:
    commands: list[Command] = field(default_factory=list)
    deadlines: dict[str, datetime | None] = field(default_factory=dict)  # Redis updates
    has_clusters_to_clean: bool = False
    next_deadline: datetime | None = None  # earliest deadline still in the future
    reasons: list[str] = field(default_factory=list)


def clean_up_ray_cluster_instance(service: RayService, clusters: list[Json], status: Json,
                                  deadlines: dict[str, datetime], *, now: datetime) -> CleanupResult:
    """Every associated cluster that is neither active nor pending is dangling: first seen -> a
    deadline now + delay; deadline reached -> background delete. (KubeRay deletes once
    ``time.Now().After(deadline)``; here at the deadline itself, so the requeue lands on it.)"""
    out = CleanupResult()
    active = (status.get("activeServiceStatus") or {}).get("rayClusterName") or ""
    pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
    delay = timedelta(seconds=deletion_delay_seconds(service))
    existing: set[str] = set()
    for cluster in associated_clusters(service, clusters):
        meta = cluster.get("metadata") or {}
        name = str(meta.get("name") or "")
        existing.add(name)
        if name in (active, pending):
            continue
        out.has_clusters_to_clean = True
        deadline = deadlines.get(name)
        if deadline is None:
            # First sighting only schedules (as KubeRay): the deadline is persisted before any delete.
            deadline = now + delay
            out.deadlines[name] = deadline
            out.next_deadline = deadline if out.next_deadline is None else min(out.next_deadline, deadline)
            out.reasons.append(f"Scheduled dangling RayCluster {name} for deletion at {deadline.isoformat()} "
                               f"(deletionDelay {delay.total_seconds():g}s)")
        elif now < deadline:
            out.next_deadline = deadline if out.next_deadline is None else min(out.next_deadline, deadline)
        elif not meta.get("deletionTimestamp"):
            out.commands.append(delete_cluster(service, cluster))
            out.reasons.append(f"Deletion timestamp {deadline.isoformat()} for RayCluster {name} has passed. "
                               "Deleting cluster immediately.")
    for name in deadlines:
        if name not in existing:
            out.deadlines[name] = None  # its cluster is gone: nothing left to schedule
    return out
