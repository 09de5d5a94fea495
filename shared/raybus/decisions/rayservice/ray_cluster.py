"""reconcileRayCluster (rayservice_controller.go): the active and pending RayClusters.

Four cases, at most one action per round, as in KubeRay: create the pending cluster named in the
status; else update the active cluster in place; else update the pending cluster in place; else
nothing. Returns the clusters as they are after the action, for the rest of the reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.api.settings import FeatureGates
from raybus.decisions.commands import Command, CreateObject, PatchObject
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.cleanup import cluster_ref
from raybus.decisions.rayservice.clusters import (
    apply_modification,
    construct_ray_cluster,
    modify_ray_cluster_patch,
    should_update_cluster,
)

Json = dict[str, Any]


@dataclass
class ClusterPair:
    active_raw: Json | None = None
    pending_raw: Json | None = None
    commands: list[Command] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def active(self) -> RayCluster | None:
        return RayCluster.model_validate(self.active_raw) if self.active_raw is not None else None

    @property
    def pending(self) -> RayCluster | None:
        return RayCluster.model_validate(self.pending_raw) if self.pending_raw is not None else None


def block_name(status: Json, key: str) -> str:
    return str((status.get(key) or {}).get("rayClusterName") or "")


def reconcile_ray_cluster(service: RayService, status: Json, clusters: dict[str, Json], *, gates: FeatureGates,
                          kuberay_version: str) -> ClusterPair:
    active_name = block_name(status, "activeServiceStatus")
    pending_name = block_name(status, "pendingServiceStatus")
    out = ClusterPair(clusters.get(active_name) if active_name else None,
                      clusters.get(pending_name) if pending_name else None)
    ns = service.namespace
    if pending_name and out.pending_raw is None:
        goal = construct_ray_cluster(service, pending_name, status=status, gates=gates, kuberay_version=kuberay_version)
        out.commands.append(CreateObject(reason=f"Created the RayCluster {ns}/{pending_name}", object=goal,
                                         event_reason=c.CREATED_RAY_CLUSTER))
        out.pending_raw = goal
        out.reasons.append(f"Creating a new pending RayCluster instance {pending_name}")
        return out
    for role, raw in (("active", out.active_raw), ("pending", out.pending_raw)):
        if raw is None:
            continue
        cluster = RayCluster.model_validate(raw)
        if not should_update_cluster(service, status, cluster, is_active=role == "active",
                                     kuberay_version=kuberay_version):
            continue
        # KubeRay TODO kept: rebuilding the cluster also resets replicas the autoscaler changed.
        goal = construct_ray_cluster(service, cluster.name, status=status, gates=gates, kuberay_version=kuberay_version)
        out.commands.append(PatchObject(reason=f"Updated the {role} RayCluster {ns}/{cluster.name}",
                                        target=cluster_ref(raw), merge_patch=modify_ray_cluster_patch(raw, goal),
                                        event_reason=c.UPDATED_RAY_CLUSTER))
        updated = apply_modification(raw, goal)
        if role == "active":
            out.active_raw = updated
        else:
            out.pending_raw = updated
        out.reasons.append(f"Updating the {role} RayCluster instance {cluster.name} in place")
        return out
    return out
