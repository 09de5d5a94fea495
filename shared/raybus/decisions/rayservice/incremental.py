"""NewClusterWithIncrementalUpgrade (gate RayServiceIncrementalUpgrade): Gateway + HTTPRoute traffic
shifting and Serve ``target_capacity`` steps (rayservice_controller.go: reconcileGateway,
calculateTrafficRoutedPercent, createHTTPRoute, reconcileHTTPRoute, checkIfNeedTargetCapacityUpdate,
reconcileServeTargetCapacity, applyServeTargetCapacity; utils: GetWeightsFromHTTPRoute,
IsGatewayReady, IsHTTPRouteReady, IsIncrementalUpgradeComplete).

Time-based: a traffic step waits ``intervalSeconds`` after ``pendingServiceStatus.lastTrafficMigratedTime``
(in the status, so it survives restarts); the decision returns the exact time of the next step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import ClusterUpgradeOptions, RayService
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.k8s_services import service_ports
from raybus.decisions.commands import Command, CreateObject, ObjectRef, PatchObject
from raybus.decisions.dashboard_contract import PutServeConfig
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.clusters import owner_reference
from raybus.decisions.rayservice.model import ServeConfigCacheEntry
from raybus.decisions.rayservice.serve import TARGET_CAPACITY_REASON, parse_serve_config, serve_config_hash
from raybus.decisions.rayservice.status import is_condition_true, parse_time

Json = dict[str, Any]


def gateway_name(service: RayService) -> str:
    return f"{service.name}-gateway"


def http_route_name(service: RayService) -> str:
    return f"{service.name}-httproute"


def upgrade_options(service: RayService) -> ClusterUpgradeOptions | None:
    strategy = service.spec.upgrade_strategy
    return strategy.cluster_upgrade_options if strategy is not None else None


def _gw_ref(obj: Json, kind: str) -> ObjectRef:
    return ObjectRef.of(obj, api_version=c.GATEWAY_API_VERSION, kind=kind)


def _find(items: list[Json], name: str) -> Json | None:
    return next((x for x in items if (x.get("metadata") or {}).get("name") == name), None)


@dataclass
class Reconciled:
    obj: Json | None
    command: Command | None = None
    error: str | None = None


def build_gateway(service: RayService) -> Json:
    """createGateway: one HTTP listener on port 80 of the configured GatewayClass."""
    options = upgrade_options(service)
    return {
        "apiVersion": c.GATEWAY_API_VERSION, "kind": "Gateway",
        "metadata": {"name": gateway_name(service), "namespace": service.namespace,
                     "ownerReferences": [owner_reference(service)]},
        "spec": {"gatewayClassName": options.gateway_class_name if options else "",
                 "listeners": [{"name": c.GATEWAY_LISTENER_PORT_NAME, "protocol": "HTTP",
                                "port": c.DEFAULT_GATEWAY_LISTENER_PORT}]},
    }


def _spec_covers(existing: object, desired: object) -> bool:
    """Does the live spec already hold every field we set? (The API server adds defaults such as
    listeners[].allowedRoutes; comparing whole specs, as KubeRay's DeepEqual does, would update forever.)"""
    if isinstance(desired, dict):
        return isinstance(existing, dict) and all(_spec_covers(existing.get(key), value) for key, value in desired.items())
    if isinstance(desired, list):
        return isinstance(existing, list) and len(existing) == len(desired) and all(
            _spec_covers(a, b) for a, b in zip(existing, desired, strict=True))
    return bool(existing == desired)


def reconcile_object(desired: Json, existing: Json | None, *, kind: str, created: str, updated: str) -> Reconciled:
    ns, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    if existing is None:
        return Reconciled(desired, CreateObject(reason=f"Created {kind} for RayService {ns}/{name}", object=desired,
                                                event_reason=created))
    if _spec_covers(existing.get("spec") or {}, desired["spec"]):
        return Reconciled(existing)
    merged = {**existing, "spec": {**(existing.get("spec") or {}), **desired["spec"]}}
    return Reconciled(merged, PatchObject(reason=f"Updated the {kind} {ns}/{name}", target=_gw_ref(existing, kind),
                                          merge_patch={"spec": desired["spec"]}, event_reason=updated))


def reconcile_gateway(service: RayService, gateways: list[Json]) -> Reconciled:
    if upgrade_options(service) is None:
        return Reconciled(None, error="Missing RayService ClusterUpgradeOptions during upgrade.")
    return reconcile_object(build_gateway(service), _find(gateways, gateway_name(service)), kind="Gateway",
                            created=c.CREATED_GATEWAY, updated=c.UPDATED_GATEWAY)


@dataclass
class TrafficStep:
    active: int
    pending: int
    next_step_at: datetime | None = None  # a later step is due then (requeue)
    error: str | None = None


def calculate_traffic_routed_percent(service: RayService, status: Json, *, is_pending_ready: bool,
                                     now: datetime) -> TrafficStep:
    """calculateTrafficRoutedPercent: move stepSizePercent to the pending cluster once per
    intervalSeconds, never beyond its target_capacity. During a rollback (v1.7) the other way: back
    to the active cluster up to its target_capacity, timed from the active cluster's
    lastTrafficMigratedTime, whether or not the pending cluster is ready."""
    active = status.get("activeServiceStatus") or {}
    pending = status.get("pendingServiceStatus") or {}
    step = TrafficStep(int(active.get("trafficRoutedPercent", 100)), int(pending.get("trafficRoutedPercent", 0)))
    rollback = is_condition_true(status, c.ROLLBACK_IN_PROGRESS)
    if not is_pending_ready and not rollback:
        return step
    options = upgrade_options(service)
    if options is None:
        return TrafficStep(0, 0, error="ClusterUpgradeOptions are not set during upgrade.")
    pending_capacity = int(pending.get("targetCapacity") or 0)
    active_capacity = int(active.get("targetCapacity", 100))
    if (not rollback and step.pending == pending_capacity) or (rollback and step.active == active_capacity):
        return step
    interval = timedelta(seconds=options.interval_seconds or 0)
    last = parse_time((active if rollback else pending).get("lastTrafficMigratedTime"))
    if last is None or now - last >= interval:
        if rollback:
            step.active = min(100, step.active + (options.step_size_percent or 0), active_capacity)
            step.pending = 100 - step.active
            more = step.active < active_capacity
        else:
            step.pending = min(100, step.pending + (options.step_size_percent or 0), pending_capacity)
            step.active = 100 - step.pending
            more = step.pending < pending_capacity
        if more:
            step.next_step_at = now + interval
    else:
        step.next_step_at = last + interval
    return step


def build_http_route(service: RayService, gateway: Json, active: RayCluster, pending: RayCluster | None,
                     step: TrafficStep) -> Json:
    """createHTTPRoute: "/" prefix -> weighted per-cluster serve Services."""
    ns = (gateway.get("metadata") or {}).get("namespace") or service.namespace

    def backend(cluster: RayCluster, weight: int) -> Json:
        port = service_ports(cluster).get(k.SERVING_PORT_NAME, k.DEFAULT_SERVING_PORT)
        return {"name": f"{cluster.name}-serve-svc", "namespace": ns, "port": port, "weight": weight}

    backends = [backend(active, step.active)]
    if pending is not None:
        backends.append(backend(pending, step.pending))
    return {
        "apiVersion": c.GATEWAY_API_VERSION, "kind": "HTTPRoute",
        "metadata": {"name": http_route_name(service), "namespace": ns, "ownerReferences": [owner_reference(service)]},
        "spec": {"parentRefs": [{"name": (gateway.get("metadata") or {}).get("name"), "namespace": ns}],
                 "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": backends}]},
    }


def weights_from_http_route(route: Json | None, status: Json) -> tuple[int, int]:
    """GetWeightsFromHTTPRoute: (active, pending) weights of the first rule; -1 when absent."""
    active_svc = f"{(status.get('activeServiceStatus') or {}).get('rayClusterName') or ''}-serve-svc"
    pending_svc = f"{(status.get('pendingServiceStatus') or {}).get('rayClusterName') or ''}-serve-svc"
    active_w, pending_w = -1, -1
    rules = ((route or {}).get("spec") or {}).get("rules") or []
    for ref in (rules[0].get("backendRefs") or []) if rules else []:
        weight = int(ref.get("weight", 1))
        if ref.get("name") == active_svc:
            active_w = weight
        elif ref.get("name") == pending_svc:
            pending_w = weight
    return active_w, pending_w


def is_gateway_ready(gateway: Json | None) -> bool:
    """utils.IsGatewayReady: Accepted and Programmed."""
    conds = ((gateway or {}).get("status") or {}).get("conditions") or []
    true = {x.get("type") for x in conds if x.get("status") == "True"}
    return gateway is not None and {"Accepted", "Programmed"} <= true


def is_http_route_ready(gateway: Json | None, route: Json | None) -> bool:
    """utils.IsHTTPRouteReady: the parent entry for our Gateway is Accepted and ResolvedRefs."""
    if gateway is None or route is None:
        return False
    gw_meta = gateway.get("metadata") or {}
    for parent in ((route.get("status") or {}).get("parents") or []):
        ref = parent.get("parentRef") or {}
        if ref.get("name") != gw_meta.get("name") or ref.get("namespace", gw_meta.get("namespace")) != gw_meta.get("namespace"):
            continue
        true = {x.get("type") for x in parent.get("conditions") or [] if x.get("status") == "True"}
        if {"Accepted", "ResolvedRefs"} <= true:
            return True
    return False


def is_incremental_upgrade_complete(status: Json, pending: RayCluster | None) -> bool:
    active, pend = status.get("activeServiceStatus") or {}, status.get("pendingServiceStatus") or {}
    return pending is not None and active.get("targetCapacity", -1) == 0 and pend.get("trafficRoutedPercent", -1) == 100


def check_if_need_target_capacity_update(status: Json, gateway: Json | None, route: Json | None) -> tuple[bool, str]:
    active, pending = status.get("activeServiceStatus") or {}, status.get("pendingServiceStatus") or {}
    if not active.get("rayClusterName") or not pending.get("rayClusterName"):
        return False, "Both active and pending RayCluster instances are required for NewClusterWithIncrementalUpgrade."
    if not is_gateway_ready(gateway):
        return False, "Gateway for RayService NewClusterWithIncrementalUpgrade is not ready."
    if not is_http_route_ready(gateway, route):
        return False, "HTTPRoute for RayService NewClusterWithIncrementalUpgrade is not ready."
    if active.get("targetCapacity") is None or active.get("trafficRoutedPercent") is None:
        return True, "Active RayServiceStatus missing TargetCapacity or TrafficRoutedPercent."
    if pending.get("targetCapacity") is None or pending.get("trafficRoutedPercent") is None:
        return True, "Pending RayServiceStatus missing TargetCapacity or TrafficRoutedPercent."
    if is_condition_true(status, c.ROLLBACK_IN_PROGRESS):
        # v1.7: during a rollback the goal is active 100 / pending 0.
        if active["targetCapacity"] == 100 and pending["targetCapacity"] == 0:
            return False, "Rollback complete: all traffic has been restored to the active cluster."
        return True, "Rollback in progress: traffic is being restored to the active cluster."
    if active["targetCapacity"] == 0 and pending["targetCapacity"] == 100:
        return False, ("All traffic has migrated to the upgraded cluster and NewClusterWithIncrementalUpgrade "
                       "is complete.")
    if pending["targetCapacity"] < 100 or pending["trafficRoutedPercent"] < 100:
        return True, "Pending RayCluster has not finished scaling up."
    return True, "Active RayCluster TargetCapacity has not finished scaling down."


def reconcile_serve_target_capacity(service: RayService, cluster_name: str, status: Json,
                                    cached: ServeConfigCacheEntry | None) -> PutServeConfig | None:
    """reconcileServeTargetCapacity + applyServeTargetCapacity for one cluster. Mutates the status
    defaults (active 100, pending 0); the new value is written to the status once the dashboard
    accepted it (serve.apply_dashboard_results)."""
    active = dict(status.get("activeServiceStatus") or {})
    pending = dict(status.get("pendingServiceStatus") or {})
    active.setdefault("targetCapacity", 100)
    pending.setdefault("targetCapacity", 0)
    status["activeServiceStatus"], status["pendingServiceStatus"] = active, pending
    options = upgrade_options(service)
    if options is None:
        return None
    max_surge = 100 if options.max_surge_percent is None else options.max_surge_percent
    active_tc, pending_tc = int(active["targetCapacity"]), int(pending["targetCapacity"])
    goal: int | None = None
    if is_condition_true(status, c.ROLLBACK_IN_PROGRESS):
        # v1.7 rollback, the inverse of the upgrade: once traffic is back on the active cluster up
        # to its capacity, scale the pending one down, then the active one up, by maxSurgePercent.
        if active_tc != int(active.get("trafficRoutedPercent") or 0):
            return None  # traffic is still rolling back to the active cluster
        if active_tc + pending_tc > 100:
            if cluster_name == pending.get("rayClusterName"):
                goal = max(0, pending_tc - max_surge)
        elif cluster_name == active.get("rayClusterName"):
            goal = min(100, active_tc + max_surge)
    elif pending_tc != int(pending.get("trafficRoutedPercent") or 0):
        return None  # traffic is still being migrated to the pending cluster
    elif cluster_name == active.get("rayClusterName") and active_tc + pending_tc > 100:
        goal = max(0, active_tc - max_surge)
    elif cluster_name == pending.get("rayClusterName") and active_tc + pending_tc <= 100:
        goal = min(100, pending_tc + max_surge)
    if goal is None or (cached is not None and cached.target_capacity == goal):
        return None
    spec_cfg = service.spec.serve_config_v2 or ""
    config = parse_serve_config(spec_cfg)
    config["target_capacity"] = goal
    return PutServeConfig(reason=f"{TARGET_CAPACITY_REASON} {goal} to the RayCluster {service.namespace}/{cluster_name}",
                          cluster=cluster_name, config=config, config_hash=serve_config_hash(spec_cfg))


def per_cluster_serve_service(desired: Json, services: list[Json]) -> Command | None:
    """reconcilePerClusterServeService: create-only."""
    if _find(services, desired["metadata"]["name"]) is not None:
        return None
    ns, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
    return CreateObject(reason=f"Created the service {ns}/{name}", object=desired, event_reason=c.CREATED_SERVICE)


def reconcile_http_route(service: RayService, gateway: Json, http_routes: list[Json], *, active: RayCluster | None,
                         pending: RayCluster | None, status: Json, is_pending_ready: bool,
                         now: datetime) -> tuple[Reconciled, TrafficStep | None]:
    """reconcileHTTPRoute (nothing without an active cluster)."""
    if active is None:
        return Reconciled(None), None
    step = calculate_traffic_routed_percent(service, status, is_pending_ready=is_pending_ready, now=now)
    if step.error:
        return Reconciled(None, error=step.error), step
    desired = build_http_route(service, gateway, active, pending, step)
    return reconcile_object(desired, _find(http_routes, http_route_name(service)), kind="HTTPRoute",
                            created=c.CREATED_HTTP_ROUTE, updated=c.UPDATED_HTTP_ROUTE), step


def update_traffic_status(status: Json, route: Json | None, *, now: datetime) -> None:
    """calculateStatus' incremental part: trafficRoutedPercent from the HTTPRoute's weights, and
    lastTrafficMigratedTime whenever a weight changed."""
    for key, weight in zip(("activeServiceStatus", "pendingServiceStatus"), weights_from_http_route(route, status),
                           strict=True):
        if weight < 0:
            continue
        block = dict(status.get(key) or {})
        if block.get("trafficRoutedPercent", -1) != weight:
            block["lastTrafficMigratedTime"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        block["trafficRoutedPercent"] = weight
        status[key] = block
