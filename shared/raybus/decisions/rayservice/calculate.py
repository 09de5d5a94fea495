"""calculateStatus and reconcilePromotionAndServingStatus (rayservice_controller.go)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raybus.api.predicates import is_incremental_upgrade_enabled
from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice import incremental as inc
from raybus.decisions.rayservice.clusters import (
    generate_ray_cluster_name,
    should_prepare_new_cluster,
    spec_for_hashing,
    spec_hash,
)
from raybus.decisions.rayservice.model import ServeConfigCacheEntry, ServiceSettings, ServiceSnapshot
from raybus.decisions.rayservice.rollback import complete_rollback_if_done, is_rollback_in_progress
from raybus.decisions.rayservice.services import (
    cluster_name_from_service,
    num_serve_endpoints,
    serve_service_name,
)
from raybus.decisions.rayservice.status import calculate_conditions, initializing_deadline, is_condition_true

Json = dict[str, Any]
BLOCKS = ("activeServiceStatus", "pendingServiceStatus")


@dataclass
class StatusResult:
    timeout_event: str | None = None
    wake: datetime | None = None  # the initializing timeout fires then
    error: str | None = None
    reasons: list[str] = field(default_factory=list)


def promote_and_get_serving(service: RayService, status: Json, head_svc: Json, serve_svc: Json,
                            pending: RayCluster | None, *, incremental: bool) -> tuple[bool, str | None]:
    """reconcilePromotionAndServingStatus -> (isPendingClusterServing, error).

    Blue/green: promotion = the Services already select the pending cluster. Incremental: once
    the active cluster is at target_capacity 0 and the pending one receives 100 % of the traffic
    (or at once for the very first cluster). KubeRay panics on an inconsistent selector; here it
    is an error."""
    points_to = cluster_name_from_service(head_svc)
    if points_to != cluster_name_from_service(serve_svc):
        return False, "headSvc and serveSvc are not pointing to the same cluster"
    pending_name = (status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
    active_name = (status.get("activeServiceStatus") or {}).get("rayClusterName") or ""
    if points_to not in (pending_name, active_name):
        return False, "clusterName from services is not equal to pendingCluster or activeCluster"
    if incremental:
        if is_condition_true(status, c.UPGRADE_IN_PROGRESS):
            # v1.7: never promote during a rollback, whatever the weights say.
            promote = not is_rollback_in_progress(status) and inc.is_incremental_upgrade_complete(status, pending)
        else:
            promote = not active_name and bool(pending_name)
    else:
        promote = active_name != points_to
    if promote:
        status["activeServiceStatus"] = status.get("pendingServiceStatus") or {}
        status["pendingServiceStatus"] = {}
    return points_to == pending_name, None


def _set(block: Json, key: str, value: object) -> None:
    if value:
        block[key] = value
    else:
        block.pop(key, None)


def calculate_status(service: RayService, status: Json, *, snapshot: ServiceSnapshot, settings: ServiceSettings,
                     head_svc: Json | None, serve_svc: Json | None, active: RayCluster | None,
                     pending: RayCluster | None, active_apps: dict[str, Json] | None,
                     pending_apps: dict[str, Json] | None, http_route: Json | None,
                     cache: dict[str, ServeConfigCacheEntry], now: datetime) -> StatusResult:
    """Mutates ``status`` as KubeRay's calculateStatus mutates the RayService's."""
    out = StatusResult()
    gates = settings.operator.feature_gates
    incremental = is_incremental_upgrade_enabled(service.spec, gates)
    _set(status, "observedGeneration", service.metadata.generation)
    for key, cluster, apps in (("activeServiceStatus", active, active_apps), ("pendingServiceStatus", pending, pending_apps)):
        block = dict(status.get(key) or {})
        raw = next((x for x in snapshot.clusters if (x.get("metadata") or {}).get("name") == cluster.name), None) \
            if cluster is not None else None
        _set(block, "rayClusterStatus", (raw or {}).get("status"))
        _set(block, "applicationStatuses", apps)
        status[key] = block

    serving = False
    if head_svc is not None and serve_svc is not None:
        if incremental:
            inc.update_traffic_status(status, http_route, now=now)
        serving, error = promote_and_get_serving(service, status, head_svc, serve_svc, pending, incremental=incremental)
        if error:
            out.error = error
            return out

    if is_rollback_in_progress(status):
        pending_raw = next((x for x in snapshot.clusters
                            if pending is not None and (x.get("metadata") or {}).get("name") == pending.name), None)
        if complete_rollback_if_done(status, pending, pending_raw, now=now):
            pending = None
            out.reasons.append("Rollback to original cluster is complete. Cleaning up pending cluster from prior upgrade.")

    # v1.7: no new cluster is prepared while a rollback is in progress.
    if not is_rollback_in_progress(status) and should_prepare_new_cluster(
            service, active, pending, is_pending_cluster_serving=serving, gates=gates,
            enable_zero_downtime=settings.enable_zero_downtime):
        taken = {str((x.get("metadata") or {}).get("name")) for x in snapshot.clusters}
        taken |= {(status.get(k) or {}).get("rayClusterName") or "" for k in BLOCKS}
        taken |= set(snapshot.deletion_deadlines) | set(cache)
        name = generate_ray_cluster_name(service, goal_hash=spec_hash(spec_for_hashing(service)),
                                         taken=taken, entropy=snapshot.entropy)
        new_block: Json = {"rayClusterName": name}
        active_block = status.get("activeServiceStatus") or {}
        if incremental:
            if not active_block.get("rayClusterName"):
                if active_block.get("targetCapacity") is None:
                    new_block["targetCapacity"] = 100  # the first cluster starts at full capacity
            elif is_condition_true(status, c.UPGRADE_IN_PROGRESS):
                new_block["targetCapacity"] = 0  # an upgrade's cluster ramps up from 0
        status["pendingServiceStatus"] = new_block
        out.reasons.append(f"Preparing a new pending RayCluster instance by setting RayClusterName {name}")

    # numServeEndpoints: ready Pods behind the serve Service (per-cluster ones during an incremental upgrade).
    names = [serve_service_name(service)]
    if incremental and active is not None:
        names = [f"{active.name}-serve-svc"]
    if incremental and pending is not None:
        names.append(f"{pending.name}-serve-svc")
    count = sum(num_serve_endpoints(snapshot.endpoint_slices, namespace=service.namespace, service_name=n)
                for n in names)
    _set(status, "numServeEndpoints", count)

    out.timeout_event = calculate_conditions(status, service.metadata.annotations, now=now)
    if is_condition_true(status, c.READY):
        status["serviceStatus"] = c.SERVICE_STATUS_RUNNING
    else:
        status.pop("serviceStatus", None)
    out.wake = initializing_deadline(status, service.metadata.annotations)
    return out


