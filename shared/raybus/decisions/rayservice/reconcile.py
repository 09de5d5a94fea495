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
from datetime import datetime
from typing import Any

from raybus.api.rayservice import RayService
from raybus.decisions.commands import PatchObject, UpdateStatus
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.cleanup import (
    associated_clusters,
    clean_up_ray_cluster_instance,
    delete_cluster,
)
from raybus.decisions.rayservice.model import (
    ServiceDecision,
    ServiceSettings,
    ServiceSnapshot,
)
from raybus.decisions.rayservice.round import Round, changed
from raybus.decisions.rayservice.serve import (
    apply_dashboard_results,
    clean_up_serve_config_cache,
    service_ref,
)
from raybus.decisions.rayservice.serving import Serving, serve_clusters
from raybus.decisions.rayservice.status import (
    is_initializing_timeout,
)
from raybus.decisions.rayservice.suspend import handle_suspend, owned_resources
from raybus.decisions.rayservice.validation import rayservice_validation

Json = dict[str, Any]


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


def _finalize(service: RayService, snapshot: ServiceSnapshot, rnd: Round, *, now: datetime) -> ServiceDecision:
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


def _admitted(snapshot: ServiceSnapshot, settings: ServiceSettings, rnd: Round, *,
              now: datetime) -> ServiceDecision | None:
    """Steps 2-3: managed by another controller, the finalizer, validation. None: go on."""
    service = snapshot.service
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
    # Validation -> Ready=False/ValidationFailed + Warning event, no requeue.
    invalid = rayservice_validation(service, now=now, gates=settings.operator.feature_gates)
    if invalid is not None:
        status = next((cmd.status for cmd in invalid.commands if isinstance(cmd, UpdateStatus)), None)
        rnd.commands += [cmd for cmd in invalid.commands if not isinstance(cmd, UpdateStatus)]
        rnd.reasons += invalid.reasons
        return rnd.decision(now=now, status=status, interest=[])
    return None


def _before_serving(sv: Serving) -> ServiceDecision | None:
    """The previous round's results and failures, suspend, steps 4-6. None: go on to step 7."""
    service, snapshot, rnd, status, now = sv.service, sv.snapshot, sv.rnd, sv.status, sv.now
    # The previous round's dashboard writes land now (KubeRay: right after UpdateDeployments).
    results = apply_dashboard_results(service, snapshot.dashboard_results, status, now=now)
    rnd.commands += results.events
    rnd.cache.update(results.cache)
    sv.cache.update({k: v for k, v in results.cache.items() if v is not None})
    error = results.error or next((f.message or f.reason for f in snapshot.failed_commands), None)
    if error is not None:
        # KubeRay returned this error from the reconcile that made the call: nothing else happens.
        return rnd.decision(now=now, error=error)
    suspended = handle_suspend(
        service, status, cache=sv.cache, deadlines=snapshot.deletion_deadlines, now=now,
        resources=owned_resources(service, clusters=snapshot.clusters, services=snapshot.services,
                                  gateways=snapshot.gateways, http_routes=snapshot.http_routes))
    if suspended is not None:
        rnd.commands += suspended.commands
        rnd.cache.update(suspended.cache)
        rnd.deadlines.update(suspended.deadlines)
        rnd.reasons += suspended.reasons
        return rnd.decision(now=now, status=changed(sv.original, status, now), interest=[])
    # Step 4: forget configs of clusters that are neither active nor pending.
    for name in clean_up_serve_config_cache(sv.cache, status):
        rnd.cache[name] = None
        sv.cache.pop(name, None)
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
    return None


def reconcile_rayservice(snapshot: ServiceSnapshot, *, settings: ServiceSettings, now: datetime) -> ServiceDecision:
    rnd = Round()
    admitted = _admitted(snapshot, settings, rnd, now=now)
    if admitted is not None:
        return admitted
    service = snapshot.service
    original: Json = service.status.to_dict() if service.status is not None else {}
    sv = Serving(service=service, snapshot=snapshot, settings=settings, status=copy.deepcopy(original),
                 original=original, cache=dict(snapshot.serve_config_cache), rnd=rnd, now=now)
    return _before_serving(sv) or serve_clusters(sv)
