"""Steps 7-13 of RayServiceReconciler.Reconcile (seed 000): reconcileRayCluster, the head Pods'
ray.io/serve labels, reconcileServe, the Gateway/HTTPRoute of an incremental upgrade, the Services
pointed at the cluster ready to serve, calculateStatus. Each step may end the round with KubeRay's
error (an early return of its Reconcile)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raybus.api.predicates import is_incremental_upgrade_enabled
from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.decisions.commands import RecordEvent
from raybus.decisions.dashboard_contract import DashboardInterest
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice import incremental as inc
from raybus.decisions.rayservice.calculate import calculate_status
from raybus.decisions.rayservice.clusters import should_prepare_new_cluster
from raybus.decisions.rayservice.interest import cluster_interest
from raybus.decisions.rayservice.model import (
    ServeConfigCacheEntry,
    ServiceDecision,
    ServiceSettings,
    ServiceSnapshot,
)
from raybus.decisions.rayservice.ray_cluster import reconcile_ray_cluster
from raybus.decisions.rayservice.rollback import (
    ROLLBACK_IMPOSSIBLE,
    is_rollback_in_progress,
    reconcile_rollback_state,
)
from raybus.decisions.rayservice.round import Round, changed
from raybus.decisions.rayservice.serve import ServeResult, reconcile_serve, service_ref
from raybus.decisions.rayservice.services import (
    ServiceBuildError,
    build_head_service,
    build_serve_service,
    find_head_pods,
    head_service_name,
    reconcile_service,
    serve_service_name,
    update_head_pod_serve_label,
)
from raybus.decisions.rayservice.status import is_condition_true

Json = dict[str, Any]


@dataclass
class Serving:
    """One round's clusters (active and pending) and what steps 7-12 decided for them so far."""

    service: RayService
    snapshot: ServiceSnapshot
    settings: ServiceSettings
    status: Json
    original: Json
    cache: dict[str, ServeConfigCacheEntry]
    rnd: Round
    now: datetime
    active: RayCluster | None = None
    pending: RayCluster | None = None
    incremental: bool = False
    incr_in_progress: bool = False
    rolling_back: bool = False
    serve_active: bool = False
    heads: dict[str, list[Json]] = field(default_factory=dict)
    serve_results: dict[str, ServeResult] = field(default_factory=dict)
    route: Json | None = None
    head_svc: Json | None = None
    serve_svc: Json | None = None

    def interest(self) -> list[DashboardInterest]:
        out = []
        for cluster, serve in ((self.active, self.serve_active), (self.pending, True)):
            if cluster is None:
                continue
            res = self.serve_results.get(cluster.name)
            changing = self.incr_in_progress or self.pending is not None or res is None or not res.ready \
                or any(cmd.cluster == cluster.name for cmd in self.rnd.dashboard)
            item = cluster_interest(self.service, cluster, self.heads[cluster.name], serve=serve,
                                    expect_change=changing, cached=self.cache.get(cluster.name))
            if item is not None:
                out.append(item)
        return out

    def fail(self, error: str | None) -> ServiceDecision:
        return self.rnd.decision(now=self.now, interest=self.interest(), error=error)

    def ready(self, cluster: RayCluster | None) -> bool:
        return cluster is not None and self.serve_results.get(cluster.name, ServeResult()).ready


def ray_clusters(sv: Serving) -> None:
    """Step 7: reconcileRayCluster, the rollback state (incremental upgrade), which cluster serves."""
    service, gates, status = sv.service, sv.settings.operator.feature_gates, sv.status
    by_name = {str((x.get("metadata") or {}).get("name")): x for x in sv.snapshot.clusters
               if (x.get("metadata") or {}).get("namespace", service.namespace) == service.namespace}
    pair = reconcile_ray_cluster(service, status, by_name, gates=gates,
                                 kuberay_version=sv.settings.operator.kuberay_version)
    sv.rnd.commands += pair.commands
    sv.rnd.reasons += pair.reasons
    sv.active, sv.pending = active, pending = pair.active, pair.pending
    sv.incremental = incremental = is_incremental_upgrade_enabled(service.spec, gates)
    if incremental:
        # v1.7: decide the rollback state right before the serving decisions.
        impossible = reconcile_rollback_state(service, status, active, pending, now=sv.now)
        if impossible is not None:
            sv.rnd.commands.append(RecordEvent(reason=impossible, target=service_ref(service), type="Warning",
                                               event_reason=ROLLBACK_IMPOSSIBLE, message=impossible))
    sv.incr_in_progress = incremental and is_condition_true(status, c.UPGRADE_IN_PROGRESS)
    sv.rolling_back = incremental and is_rollback_in_progress(status)
    sv.serve_active = active is not None and (
        (pending is None and not should_prepare_new_cluster(
            service, active, None, is_pending_cluster_serving=False, gates=gates,
            enable_zero_downtime=sv.settings.enable_zero_downtime))
        or (pending is not None and incremental))
    sv.heads = {x.name: find_head_pods(sv.snapshot.pods, x.name) for x in (active, pending) if x is not None}


def head_serve_labels(sv: Serving) -> ServiceDecision | None:
    """Step 8: the head Pods' ray.io/serve label from their Serve proxy health."""
    for cluster in (sv.active, sv.pending):
        if cluster is None:
            continue
        found = sv.heads[cluster.name]
        if len(found) != 1:
            ns = sv.service.namespace
            return sv.fail(f"found 0 head. cluster name {cluster.name}, namespace {ns}" if not found else
                           f"found multiple heads. cluster name {cluster.name}, namespace {ns}")
        obs = sv.snapshot.observations.get(cluster.name)
        label = update_head_pod_serve_label(sv.service, found[0], obs.observation if obs else None)
        if label is not None:
            sv.rnd.commands.append(label)
    return None


def serve(sv: Serving) -> ServiceDecision | None:
    """Step 9: reconcileServe (pending always; active unless a blue/green upgrade is under way)."""
    for cluster, is_active in ((sv.pending, False), (sv.active if sv.serve_active else None, True)):
        if cluster is None:
            continue
        res = reconcile_serve(sv.service, cluster, sv.heads[cluster.name][0], status=sv.status,
                              observation=sv.snapshot.observations.get(cluster.name),
                              cached=sv.cache.get(cluster.name), gates=sv.settings.operator.feature_gates,
                              incremental=sv.incremental,
                              # v1.7: the active cluster keeps its config during an upgrade, the
                              # pending one gets none during a rollback (it only drains).
                              skip_config_update=(is_active and sv.incr_in_progress and not sv.rolling_back)
                              or (not is_active and sv.rolling_back),
                              now=sv.now)
        sv.rnd.reasons += res.reasons
        sv.rnd.dashboard += res.dashboard_commands
        if res.requeue_at is not None:
            sv.rnd.wake.append(res.requeue_at)
        if res.dashboard_unavailable:
            # KubeRay: GetMultiApplicationStatus failed -> return before the status write.
            return sv.rnd.decision(now=sv.now, interest=sv.interest())
        sv.serve_results[cluster.name] = res
        if sv.incr_in_progress and res.apps is not None:
            _target_capacity(sv, cluster)
    return None


def _target_capacity(sv: Serving, cluster: RayCluster) -> None:
    """checkIfNeedTargetCapacityUpdate / reconcileServeTargetCapacity (incremental upgrade)."""
    live_gw = next((x for x in sv.snapshot.gateways
                    if (x.get("metadata") or {}).get("name") == inc.gateway_name(sv.service)), None)
    live_route = next((x for x in sv.snapshot.http_routes
                       if (x.get("metadata") or {}).get("name") == inc.http_route_name(sv.service)), None)
    needed, why = inc.check_if_need_target_capacity_update(sv.status, live_gw, live_route)
    sv.rnd.reasons.append(f"checkIfNeedTargetCapacityUpdate={needed}: {why}")
    if needed:
        capacity = inc.reconcile_serve_target_capacity(sv.service, cluster.name, sv.status, sv.cache.get(cluster.name))
        if capacity is not None:
            sv.rnd.dashboard.append(capacity)


def gateway_and_route(sv: Serving) -> ServiceDecision | None:
    """Step 10: Gateway, HTTPRoute and per-cluster Serve Services (incremental upgrade only)."""
    if not sv.incremental:
        return None
    service, snapshot = sv.service, sv.snapshot
    try:
        for cluster in (sv.active, sv.pending):
            if cluster is not None:
                cmd = inc.per_cluster_serve_service(build_serve_service(service, cluster, per_cluster=True),
                                                    snapshot.services)
                if cmd is not None:
                    sv.rnd.commands.append(cmd)
    except ServiceBuildError as exc:
        return sv.fail(str(exc))
    gw = inc.reconcile_gateway(service, snapshot.gateways)
    if gw.error or gw.obj is None:
        return sv.fail(gw.error)
    if gw.command is not None:
        sv.rnd.commands.append(gw.command)
    reconciled, step = inc.reconcile_http_route(service, gw.obj, snapshot.http_routes, active=sv.active,
                                                pending=sv.pending, status=sv.status,
                                                is_pending_ready=sv.ready(sv.pending), now=sv.now)
    if reconciled.error:
        return sv.fail(reconciled.error)
    if reconciled.command is not None:
        sv.rnd.commands.append(reconciled.command)
    sv.route = reconciled.obj
    if step is not None and step.next_step_at is not None:
        sv.rnd.wake.append(step.next_step_at)
    return None


def services(sv: Serving) -> ServiceDecision | None:
    """Step 11: point <name>-head-svc and the serve Service at the cluster that is ready to serve."""
    pending_ready, active_ready = sv.ready(sv.pending), sv.ready(sv.active)
    if not (pending_ready or active_ready):
        return None
    target = sv.pending if pending_ready and not sv.incr_in_progress else sv.active
    if target is None:
        return None
    service = sv.service
    by_svc = {str((x.get("metadata") or {}).get("name")): x for x in sv.snapshot.services}
    try:
        head = reconcile_service(build_head_service(service, target, sv.settings.operator),
                                 by_svc.get(head_service_name(service)))
        serve_svc = reconcile_service(build_serve_service(service, target), by_svc.get(serve_service_name(service)))
    except ServiceBuildError as exc:
        return sv.fail(str(exc))
    sv.rnd.commands += [x.command for x in (head, serve_svc) if x.command is not None]
    sv.head_svc, sv.serve_svc = head.service, serve_svc.service
    return None


def status(sv: Serving) -> ServiceDecision:
    """Step 12: calculateStatus; step 13: write it only on change; step 14: requeue only for
    time-based transitions."""
    service, active, pending, results = sv.service, sv.active, sv.pending, sv.serve_results
    calc = calculate_status(
        service, sv.status, snapshot=sv.snapshot, settings=sv.settings, head_svc=sv.head_svc,
        serve_svc=sv.serve_svc, active=active, pending=pending,
        active_apps=results[active.name].apps if active and active.name in results else None,
        pending_apps=results[pending.name].apps if pending and pending.name in results else None,
        http_route=sv.route, cache=sv.cache, now=sv.now)
    sv.rnd.reasons += calc.reasons
    if calc.error:
        return sv.fail(calc.error)
    if calc.timeout_event:
        sv.rnd.commands.append(RecordEvent(reason=calc.timeout_event, target=service_ref(service), type="Warning",
                                           event_reason=c.RAY_SERVICE_INITIALIZING_TIMEOUT_EVENT,
                                           message=calc.timeout_event))
    if calc.wake is not None:
        sv.rnd.wake.append(calc.wake)
    return sv.rnd.decision(now=sv.now, status=changed(sv.original, sv.status, sv.now), interest=sv.interest())


def serve_clusters(sv: Serving) -> ServiceDecision:
    """Steps 7-13 in KubeRay's order; the first step that returns ends the round."""
    ray_clusters(sv)
    for step in (head_serve_labels, serve, gateway_and_route, services):
        ended = step(sv)
        if ended is not None:
            return ended
    return status(sv)
