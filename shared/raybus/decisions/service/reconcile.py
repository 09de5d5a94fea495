"""RayServiceReconciler.Reconcile (rayservice_controller.go, seed 000 steps 1-14) as one pure function.

``reconcile_rayservice(snapshot, settings=..., now=...)``: managedBy external -> skip; deletion ->
delete the RayClusters, then drop ``ray.io/rayservice-finalizer``; no finalizer -> add it; validation (Ready=False/ValidationFailed); previous round's failures -> KubeRay's error;
suspend; serve-config cache cleanup; dangling-cluster cleanup; the terminal initializing timeout;
reconcileRayCluster; head Pods' ray.io/serve labels; reconcileServe; Gateway/HTTPRoute (incremental
upgrade); Services to the ready cluster; calculateStatus; status written only when it changed.

KubeRay requeues every 2 s to poll the dashboard and the clock. Here observations and object
changes trigger reconciles, so ``requeue_after`` is only set for time-based transitions: the
earliest dangling-cluster deletion deadline, the initializing timeout, the next incremental traffic
step, and the short wait after a submit (see serve.RESUBMIT_GRACE).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raybus.api.predicates import is_incremental_upgrade_enabled
from raybus.api.rayservice import RayService
from raybus.decisions.commands import Command, PatchObject, RecordEvent, UpdateStatus
from raybus.decisions.dashboard_contract import DashboardCommand, DashboardInterest
from raybus.decisions.service import constants as c
from raybus.decisions.service import incremental as inc
from raybus.decisions.service.calculate import calculate_status
from raybus.decisions.service.cleanup import (
    associated_clusters,
    clean_up_ray_cluster_instance,
    delete_cluster,
)
from raybus.decisions.service.clusters import should_prepare_new_cluster
from raybus.decisions.service.interest import cluster_interest
from raybus.decisions.service.model import (
    ServeConfigCacheEntry,
    ServiceDecision,
    ServiceSettings,
    ServiceSnapshot,
)
from raybus.decisions.service.ray_cluster import reconcile_ray_cluster
from raybus.decisions.service.rollback import (
    ROLLBACK_IMPOSSIBLE,
    is_rollback_in_progress,
    reconcile_rollback_state,
)
from raybus.decisions.service.serve import (
    ServeResult,
    apply_dashboard_results,
    clean_up_serve_config_cache,
    reconcile_serve,
    service_ref,
)
from raybus.decisions.service.services import (
    ServiceBuildError,
    build_head_service,
    build_serve_service,
    find_head_pods,
    head_service_name,
    reconcile_service,
    serve_service_name,
    update_head_pod_serve_label,
)
from raybus.decisions.service.status import (
    inconsistent_statuses,
    is_condition_true,
    is_initializing_timeout,
    rfc3339,
)
from raybus.decisions.service.suspend import handle_suspend, owned_resources
from raybus.decisions.service.validation import rayservice_validation

Json = dict[str, Any]


@dataclass
class _Round:
    """What one reconcile accumulates (KubeRay's side effects, in order)."""

    commands: list[Command] = field(default_factory=list)
    dashboard: list[DashboardCommand] = field(default_factory=list)
    cache: dict[str, ServeConfigCacheEntry | None] = field(default_factory=dict)
    deadlines: dict[str, datetime | None] = field(default_factory=dict)
    wake: list[datetime] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def decision(self, *, now: datetime, status: Json | None = None, interest: list[DashboardInterest] | None = None,
                 error: str | None = None) -> ServiceDecision:
        requeue = max(0.0, (min(self.wake) - now).total_seconds()) if self.wake and error is None else None
        return ServiceDecision(commands=self.commands, dashboard_commands=self.dashboard, status=status,
                               interest=interest, serve_config_cache=self.cache, deletion_deadlines=self.deadlines,
                               requeue_after=requeue, error=error, reasons=self.reasons + ([error] if error else []))


def _changed(original: Json, status: Json, now: datetime) -> Json | None:
    """Step 13: write only when InconsistentRayServiceStatuses says so (then lastUpdateTime=now)."""
    if not inconsistent_statuses(original, status):
        return None
    return {**status, "lastUpdateTime": rfc3339(now)}


def _managed_by_external(snapshot: ServiceSnapshot) -> str | None:
    managed_by = snapshot.service.spec.managed_by
    return managed_by if managed_by and managed_by != c.KUBERAY_OPERATOR else None


def finalizer_patch(service: RayService, finalizers: list[str]) -> PatchObject:
    """KubeRay Updates the RayService: the resourceVersion makes the merge patch just as optimistic."""
    meta: Json = {"finalizers": finalizers}
    if service.metadata.resource_version:
        meta["resourceVersion"] = service.metadata.resource_version
    added = c.RAY_SERVICE_FINALIZER in finalizers
    return PatchObject(reason=f"{'Add' if added else 'Remove'} the finalizer {c.RAY_SERVICE_FINALIZER}",
                       target=service_ref(service), merge_patch={"metadata": meta})


def _finalize(service: RayService, snapshot: ServiceSnapshot, rnd: _Round, *, now: datetime) -> ServiceDecision:
    """The deletion branch of Reconcile: cleanUpRayClusterInstance with a zero delay, then
    RemoveFinalizer once no associated RayCluster is listed. Clusters already being deleted are not
    deleted again (KubeRay re-issues the Delete, and its Event, on every 2 s requeue); the watcher
    wakes this RayService when each one is gone. The Redis state goes with the RayService."""
    finalizers = list(service.metadata.finalizers or [])
    clusters = associated_clusters(service, snapshot.clusters)
    if not clusters:
        if c.RAY_SERVICE_FINALIZER in finalizers:
            rnd.commands.append(finalizer_patch(service, [f for f in finalizers if f != c.RAY_SERVICE_FINALIZER]))
            rnd.reasons.append("No RayClusters exist, removing finalizer")
        return rnd.decision(now=now, interest=[])
    for cluster in clusters:
        if not (cluster.get("metadata") or {}).get("deletionTimestamp"):
            rnd.commands.append(delete_cluster(service, cluster))
    rnd.reasons.append("RayService is being deleted. Deleting RayCluster(s): "
                       + ", ".join(str((x.get("metadata") or {}).get("name")) for x in clusters))
    return rnd.decision(now=now, interest=[])


def reconcile_rayservice(snapshot: ServiceSnapshot, *, settings: ServiceSettings, now: datetime) -> ServiceDecision:
    service = snapshot.service
    gates = settings.operator.feature_gates
    rnd = _Round()
    # Step 2: another controller owns this RayService.
    manager = _managed_by_external(snapshot)
    if manager is not None:
        rnd.reasons.append(f"Skipping RayService managed by a custom controller (managed-by {manager})")
        return rnd.decision(now=now, interest=[])
    # v1.7 (kuberay#4807): ray.io/rayservice-finalizer. A RayService being deleted deletes its
    # RayClusters at once (no deletion delay) and loses the finalizer when none is left; one without
    # it gets it before anything else happens.
    if service.metadata.deletion_timestamp:
        return _finalize(service, snapshot, rnd, now=now)
    if c.RAY_SERVICE_FINALIZER not in (service.metadata.finalizers or []):
        rnd.commands.append(finalizer_patch(service, [*(service.metadata.finalizers or []), c.RAY_SERVICE_FINALIZER]))
        rnd.reasons.append(f"Adding finalizer to RayService ({c.RAY_SERVICE_FINALIZER})")
        return rnd.decision(now=now, interest=[])
    # Step 3: validation -> Ready=False/ValidationFailed + Warning event, no requeue.
    invalid = rayservice_validation(service, now=now, gates=gates)
    if invalid is not None:
        status = next((cmd.status for cmd in invalid.commands if isinstance(cmd, UpdateStatus)), None)
        rnd.commands += [cmd for cmd in invalid.commands if not isinstance(cmd, UpdateStatus)]
        rnd.reasons += invalid.reasons
        return rnd.decision(now=now, status=status, interest=[])

    original: Json = service.status.to_dict() if service.status is not None else {}
    status = copy.deepcopy(original)
    # The previous round's dashboard writes land now (KubeRay: right after UpdateDeployments).
    results = apply_dashboard_results(service, snapshot.dashboard_results, status, now=now)
    rnd.commands += results.events
    rnd.cache.update(results.cache)
    cache = {**snapshot.serve_config_cache, **{k: v for k, v in results.cache.items() if v is not None}}
    error = results.error or next((f.message or f.reason for f in snapshot.failed_commands), None)
    if error is not None:
        # KubeRay returned this error from the reconcile that made the call: nothing else happens.
        return rnd.decision(now=now, error=error)

    suspended = handle_suspend(
        service, status, cache=cache, deadlines=snapshot.deletion_deadlines, now=now,
        resources=owned_resources(service, clusters=snapshot.clusters, services=snapshot.services,
                                  gateways=snapshot.gateways, http_routes=snapshot.http_routes))
    if suspended is not None:
        rnd.commands += suspended.commands
        rnd.cache.update(suspended.cache)
        rnd.deadlines.update(suspended.deadlines)
        rnd.reasons += suspended.reasons
        return rnd.decision(now=now, status=_changed(original, status, now), interest=[])

    # Step 4: forget configs of clusters that are neither active nor pending.
    for name in clean_up_serve_config_cache(cache, status):
        rnd.cache[name] = None
        cache.pop(name, None)
    # Step 5: dangling clusters, deleted after their deadline.
    cleanup = clean_up_ray_cluster_instance(service, snapshot.clusters, status, snapshot.deletion_deadlines, now=now)
    rnd.commands += cleanup.commands
    rnd.deadlines.update(cleanup.deadlines)
    rnd.reasons += cleanup.reasons
    if cleanup.next_deadline is not None:
        rnd.wake.append(cleanup.next_deadline)
    # Step 6: terminal initializing timeout: only the cleanup above keeps running.
    if is_initializing_timeout(status):
        rnd.reasons.append("RayService in terminal failure state (InitializingTimeout)"
                           + ("" if cleanup.has_clusters_to_clean else ", all RayClusters cleaned up"))
        return rnd.decision(now=now, interest=[])

    # Step 7: reconcileRayCluster.
    by_name = {str((x.get("metadata") or {}).get("name")): x for x in snapshot.clusters
               if (x.get("metadata") or {}).get("namespace", service.namespace) == service.namespace}
    pair = reconcile_ray_cluster(service, status, by_name, gates=gates, kuberay_version=settings.operator.kuberay_version)
    rnd.commands += pair.commands
    rnd.reasons += pair.reasons
    active, pending = pair.active, pair.pending
    incremental = is_incremental_upgrade_enabled(service.spec, gates)
    if incremental:
        # v1.7: decide the rollback state right before the serving decisions.
        impossible = reconcile_rollback_state(service, status, active, pending, now=now)
        if impossible is not None:
            rnd.commands.append(RecordEvent(reason=impossible, target=service_ref(service), type="Warning",
                                            event_reason=ROLLBACK_IMPOSSIBLE, message=impossible))
    incr_in_progress = incremental and is_condition_true(status, c.UPGRADE_IN_PROGRESS)
    rolling_back = incremental and is_rollback_in_progress(status)
    serve_active = active is not None and (
        (pending is None and not should_prepare_new_cluster(
            service, active, None, is_pending_cluster_serving=False, gates=gates,
            enable_zero_downtime=settings.enable_zero_downtime))
        or (pending is not None and incremental))
    heads = {x.name: find_head_pods(snapshot.pods, x.name) for x in (active, pending) if x is not None}

    def interest(results: dict[str, ServeResult]) -> list[DashboardInterest]:
        out = []
        for cluster, serve in ((active, serve_active), (pending, True)):
            if cluster is None:
                continue
            res = results.get(cluster.name)
            changing = incr_in_progress or pending is not None or res is None or not res.ready \
                or any(cmd.cluster == cluster.name for cmd in rnd.dashboard)
            item = cluster_interest(service, cluster, heads[cluster.name], serve=serve, expect_change=changing,
                                    cached=cache.get(cluster.name))
            if item is not None:
                out.append(item)
        return out

    # Step 8: the head Pods' ray.io/serve label from their Serve proxy health.
    for cluster in (active, pending):
        if cluster is None:
            continue
        found = heads[cluster.name]
        if len(found) != 1:
            msg = (f"found 0 head. cluster name {cluster.name}, namespace {service.namespace}" if not found else
                   f"found multiple heads. cluster name {cluster.name}, namespace {service.namespace}")
            return rnd.decision(now=now, interest=interest({}), error=msg)
        obs = snapshot.observations.get(cluster.name)
        label = update_head_pod_serve_label(service, found[0], obs.observation if obs else None)
        if label is not None:
            rnd.commands.append(label)

    # Step 9: reconcileServe (pending always; active unless a blue/green upgrade is under way).
    serve_results: dict[str, ServeResult] = {}
    for cluster, is_active in ((pending, False), (active if serve_active else None, True)):
        if cluster is None:
            continue
        res = reconcile_serve(service, cluster, heads[cluster.name][0], status=status,
                              observation=snapshot.observations.get(cluster.name), cached=cache.get(cluster.name),
                              gates=gates, incremental=incremental,
                              # v1.7: the active cluster keeps its config during an upgrade, the
                              # pending one gets none during a rollback (it only drains).
                              skip_config_update=(is_active and incr_in_progress and not rolling_back)
                              or (not is_active and rolling_back),
                              now=now)
        rnd.reasons += res.reasons
        rnd.dashboard += res.dashboard_commands
        if res.requeue_at is not None:
            rnd.wake.append(res.requeue_at)
        if res.dashboard_unavailable:
            # KubeRay: GetMultiApplicationStatus failed -> return before the status write.
            return rnd.decision(now=now, interest=interest(serve_results))
        serve_results[cluster.name] = res
        if incr_in_progress and res.apps is not None:
            live_gw = next((x for x in snapshot.gateways
                            if (x.get("metadata") or {}).get("name") == inc.gateway_name(service)), None)
            live_route = next((x for x in snapshot.http_routes
                               if (x.get("metadata") or {}).get("name") == inc.http_route_name(service)), None)
            needed, why = inc.check_if_need_target_capacity_update(status, live_gw, live_route)
            rnd.reasons.append(f"checkIfNeedTargetCapacityUpdate={needed}: {why}")
            if needed:
                capacity = inc.reconcile_serve_target_capacity(service, cluster.name, status, cache.get(cluster.name))
                if capacity is not None:
                    rnd.dashboard.append(capacity)
    pending_ready = pending is not None and serve_results.get(pending.name, ServeResult()).ready
    active_ready = active is not None and serve_results.get(active.name, ServeResult()).ready

    # Step 10: Gateway, HTTPRoute and per-cluster Serve Services (incremental upgrade only).
    route: Json | None = None
    if incremental:
        try:
            for cluster in (active, pending):
                if cluster is not None:
                    cmd = inc.per_cluster_serve_service(build_serve_service(service, cluster, per_cluster=True),
                                                        snapshot.services)
                    if cmd is not None:
                        rnd.commands.append(cmd)
        except ServiceBuildError as exc:
            return rnd.decision(now=now, interest=interest(serve_results), error=str(exc))
        gw = inc.reconcile_gateway(service, snapshot.gateways)
        if gw.error or gw.obj is None:
            return rnd.decision(now=now, interest=interest(serve_results), error=gw.error)
        if gw.command is not None:
            rnd.commands.append(gw.command)
        reconciled, step = inc.reconcile_http_route(service, gw.obj, snapshot.http_routes, active=active, pending=pending,
                                                    status=status, is_pending_ready=pending_ready, now=now)
        if reconciled.error:
            return rnd.decision(now=now, interest=interest(serve_results), error=reconciled.error)
        if reconciled.command is not None:
            rnd.commands.append(reconciled.command)
        route = reconciled.obj
        if step is not None and step.next_step_at is not None:
            rnd.wake.append(step.next_step_at)

    # Step 11: point <name>-head-svc and the serve Service at the cluster that is ready to serve.
    head_svc: Json | None = None
    serve_svc: Json | None = None
    if pending_ready or active_ready:
        target = pending if pending_ready and not incr_in_progress else active
        if target is not None:
            by_svc = {str((x.get("metadata") or {}).get("name")): x for x in snapshot.services}
            try:
                head = reconcile_service(build_head_service(service, target, settings.operator),
                                         by_svc.get(head_service_name(service)))
                serve = reconcile_service(build_serve_service(service, target), by_svc.get(serve_service_name(service)))
            except ServiceBuildError as exc:
                return rnd.decision(now=now, interest=interest(serve_results), error=str(exc))
            rnd.commands += [x.command for x in (head, serve) if x.command is not None]
            head_svc, serve_svc = head.service, serve.service

    # Step 12: calculateStatus.
    calc = calculate_status(
        service, status, snapshot=snapshot, settings=settings, head_svc=head_svc, serve_svc=serve_svc,
        active=active, pending=pending, active_apps=serve_results[active.name].apps if active and active.name in serve_results else None,
        pending_apps=serve_results[pending.name].apps if pending and pending.name in serve_results else None,
        http_route=route, cache=cache, now=now)
    rnd.reasons += calc.reasons
    if calc.error:
        return rnd.decision(now=now, interest=interest(serve_results), error=calc.error)
    if calc.timeout_event:
        rnd.commands.append(RecordEvent(reason=calc.timeout_event, target=service_ref(service), type="Warning",
                                        event_reason=c.RAY_SERVICE_INITIALIZING_TIMEOUT_EVENT, message=calc.timeout_event))
    if calc.wake is not None:
        rnd.wake.append(calc.wake)
    # Step 13 (write only on change); step 14 (requeue only for time-based transitions).
    return rnd.decision(now=now, status=_changed(original, status, now), interest=interest(serve_results))


