"""spec.suspend: Suspending -> Suspended -> resume (KubeRay v1.7 handleSuspend, PR #4841 + #4894).

Atomic, like RayCluster/RayJob suspension: the Suspending=True condition is written first (the
commit point); from then on teardown runs to completion even if spec.suspend flips back. Teardown
deletes everything the RayService owns (its RayClusters, its head/serve Services, the incremental
upgrade's Gateway/HTTPRoute) and forgets the Redis state; when all of it is gone the RayService is
Suspended (Ready=False/SuspendComplete). Resuming flips Suspended=False/RayServiceResumed and resets
Ready to a fresh Initializing (so the initializing timeout is re-armed) and the reconcile goes on,
creating a new cluster as for a new RayService.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raybus.api.rayservice import RayService
from raybus.decisions.commands import Command, DeleteObject, ObjectRef
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.cleanup import associated_clusters, delete_cluster
from raybus.decisions.rayservice.incremental import gateway_name, http_route_name
from raybus.decisions.rayservice.model import ServeConfigCacheEntry
from raybus.decisions.rayservice.services import head_service_name, serve_service_name
from raybus.decisions.rayservice.status import is_condition_true, remove_condition, set_condition

Json = dict[str, Any]
# handleSuspend's condition messages (v1.7, verbatim).
MSG_SUSPEND_REQUESTED = "Spec.Suspend is true; will delete all Kubernetes resources owned by this RayService."
MSG_SUSPEND_WAITING = "Waiting for all Kubernetes resources owned by this RayService to be deleted."
MSG_SUSPENDED = "All owned resources have been deleted."
MSG_READY_SUSPENDED = "RayService is suspended."
MSG_READY_SUSPENDING = "RayService is suspending."
MSG_RESUMED = "Spec.Suspend is false; RayService has resumed."
MSG_RESUMED_INITIALIZING = "RayService is initializing after resuming from suspend."
MSG_NO_UPGRADE = "No upgrade in progress."
MSG_NO_ROLLBACK = "No rollback in progress."
# deleteRayServiceOwnedResources' Events: kind -> K8sEventType.
_DELETED_EVENT = {"RayCluster": "DeletedRayCluster", "Service": "DeletedService", "Gateway": "DeletedGateway",
                  "HTTPRoute": "DeletedHTTPRoute"}


@dataclass
class SuspendResult:
    done: bool  # the rest of the reconcile must not run this round
    commands: list[Command] = field(default_factory=list)
    cache: dict[str, ServeConfigCacheEntry | None] = field(default_factory=dict)
    deadlines: dict[str, datetime | None] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)


def _observe(status: Json, generation: int | None) -> None:
    if generation:
        status["observedGeneration"] = generation


def _owned_by(obj: Json, service: RayService) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "RayService" and r.get("name") == service.name
               and (not service.metadata.uid or not r.get("uid") or r.get("uid") == service.metadata.uid)
               for r in refs if isinstance(r, dict))


def _ref(obj: Json, api_version: str, kind: str) -> ObjectRef:
    return ObjectRef.of(obj, api_version=api_version, kind=kind)


def owned_resources(service: RayService, *, clusters: list[Json], services: list[Json], gateways: list[Json],
                    http_routes: list[Json]) -> list[tuple[str, Json, ObjectRef | None]]:
    """(label, object, ref) of everything suspension must delete; ref None for clusters."""
    out: list[tuple[str, Json, ObjectRef | None]] = [
        (f"RayCluster/{(x.get('metadata') or {}).get('name')}", x, None) for x in associated_clusters(service, clusters)]
    names = {head_service_name(service), serve_service_name(service)}
    for svc in services:
        name = (svc.get("metadata") or {}).get("name")
        if name in names and _owned_by(svc, service):
            out.append((f"Service/{name}", svc, _ref(svc, "v1", "Service")))
    for items, name, kind in ((gateways, gateway_name(service), "Gateway"), (http_routes, http_route_name(service), "HTTPRoute")):
        for obj in items:
            if (obj.get("metadata") or {}).get("name") == name and _owned_by(obj, service):
                out.append((f"{kind}/{name}", obj, _ref(obj, c.GATEWAY_API_VERSION, kind)))
    return out


def _not_ready(status: Json, reason: str, ready_message: str, *, now: datetime) -> None:
    """Ready, UpgradeInProgress and RollbackInProgress all False with the suspend reason."""
    set_condition(status, c.READY, "False", reason, ready_message, now=now)
    set_condition(status, c.UPGRADE_IN_PROGRESS, "False", reason, MSG_NO_UPGRADE, now=now)
    set_condition(status, c.ROLLBACK_IN_PROGRESS, "False", reason, MSG_NO_ROLLBACK, now=now)


def _reset_serving(status: Json) -> None:
    """ActiveServiceStatus, PendingServiceStatus, NumServeEndpoints=0, ServiceStatus=NotRunning."""
    status["activeServiceStatus"] = {}
    status["pendingServiceStatus"] = {}
    status["numServeEndpoints"] = 0
    status.pop("serviceStatus", None)  # NotRunning is ""


def handle_suspend(service: RayService, status: Json, *, resources: list[tuple[str, Json, ObjectRef | None]],
                   cache: dict[str, ServeConfigCacheEntry], deadlines: dict[str, datetime],
                   now: datetime) -> SuspendResult | None:
    """None: not suspended (or just resumed): the normal reconcile runs. Mutates ``status``."""
    generation = service.metadata.generation
    suspending = is_condition_true(status, c.SUSPENDING)
    suspended = is_condition_true(status, c.SUSPENDED)
    want = bool(service.spec.suspend)
    if not suspending and not suspended:
        if not want:
            return None
        _observe(status, generation)  # a spec transition is being acted on (kuberay#4897)
        set_condition(status, c.SUSPENDING, "True", c.SUSPEND_REQUESTED, MSG_SUSPEND_REQUESTED, now=now)
        _not_ready(status, c.SUSPEND_IN_PROGRESS, MSG_READY_SUSPENDING, now=now)
        # v1.7 resets the serving status with the commit point, not at the end.
        _reset_serving(status)
        # The commit point is persisted before anything is deleted (the status write re-triggers us).
        return SuspendResult(done=True, reasons=["Suspend requested: Suspending=True is written before teardown"])
    if suspending:
        out = SuspendResult(done=True)
        if resources:
            for label, obj, ref in resources:
                if (obj.get("metadata") or {}).get("deletionTimestamp"):
                    continue
                kind, _, name = label.partition("/")
                message = f"Deleted the {kind} {service.namespace}/{name} during suspend"
                out.commands.append(
                    delete_cluster(service, obj).model_copy(update={"reason": message}) if ref is None else
                    DeleteObject(reason=message, target=ref, propagation="Background",
                                 event_reason=_DELETED_EVENT.get(kind)))
            waiting = ", ".join(label for label, _, _ in resources)
            set_condition(status, c.SUSPENDING, "True", c.SUSPEND_IN_PROGRESS, MSG_SUSPEND_WAITING, now=now)
            out.reasons.append(f"Suspending: waiting for {waiting}")
            return out
        _observe(status, generation)
        set_condition(status, c.SUSPENDING, "False", c.SUSPEND_COMPLETE, MSG_SUSPENDED, now=now)
        set_condition(status, c.SUSPENDED, "True", c.SUSPEND_COMPLETE, MSG_SUSPENDED, now=now)
        _not_ready(status, c.SUSPEND_COMPLETE, MSG_READY_SUSPENDED, now=now)
        _reset_serving(status)  # already reset by the commit point; kept for objects suspended before
        out.cache = {name: None for name in cache}
        out.deadlines = {name: None for name in deadlines}
        out.reasons.append("All RayService-owned resources deleted; Suspended")
        return out
    if want:
        return SuspendResult(done=True, reasons=["Suspended"])
    _observe(status, generation)
    set_condition(status, c.SUSPENDED, "False", c.RESUMED, MSG_RESUMED, now=now)
    # Resumed == initializing again (kuberay#4894): fresh Ready/UpgradeInProgress with a new
    # lastTransitionTime, so ray.io/initializing-timeout applies to the resumed attempt.
    for type_ in (c.READY, c.UPGRADE_IN_PROGRESS):
        remove_condition(status, type_)
        set_condition(status, type_, "False", c.INITIALIZING, MSG_RESUMED_INITIALIZING, now=now)
    return None
