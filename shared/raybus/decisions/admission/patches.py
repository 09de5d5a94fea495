"""Deletes and patches: whose object, and what a patch may change.

A delete or patch targets only an object whose ownerReference in the API server (the executor's own
informers) is the batch's Ray object, or a RayCluster that object owns, or the Ray object itself.
A patch changes only what the decision code changes: its own finalizer, workersToDelete cleared,
a worker group suspended (RayJob DeleteWorkers), a RayService's clusters rebuilt from its spec, a
Pod's serve label or Recreate hash, and owned objects brought back to what their builder gives.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService
from raybus.decisions.admission.cluster_builds import cluster_builds
from raybus.decisions.admission.owner_builds import http_route
from raybus.decisions.admission.verdict import (
    FOREIGN_TARGET,
    MALFORMED,
    OBJECT_NOT_LIVE,
    PATCH_CONTENT,
    Refused,
    meta,
    older,
    owned_by,
    uid_of,
    where,
)
from raybus.decisions.cluster.hashing import KUBERAY_VERSION_KEY, UPGRADE_STRATEGY_RECREATE_HASH_KEY
from raybus.decisions.cluster.redis_cleanup import GCS_FT_REDIS_CLEANUP_FINALIZER
from raybus.decisions.commands import DeleteObject, ObjectRef, PatchObject, apply_merge_patch
from raybus.decisions.job import constants as job_c
from raybus.decisions.job.cluster import build_head_service_for_rayjob
from raybus.decisions.rayservice import constants as service_c
from raybus.decisions.rayservice import incremental as inc
from raybus.decisions.rayservice.clusters import apply_modification
from raybus.decisions.rayservice.clusters import construct_ray_cluster as construct_service_cluster
from raybus.decisions.rayservice.services import (
    build_head_service,
    build_serve_service,
    head_service_name,
)
from raybus.decisions.settings import DecisionSettings

Json = Mapping[str, Any]
RAY_KINDS = frozenset({"RayCluster", "RayJob", "RayService"})
SELF_FINALIZER = {"RayCluster": GCS_FT_REDIS_CLEANUP_FINALIZER, "RayJob": job_c.RAY_JOB_STOP_JOB_FINALIZER,
                  "RayService": service_c.RAY_SERVICE_FINALIZER}
# Preconditions a patch may carry in metadata besides what it changes.
_PRECONDITIONS = frozenset({"uid", "resourceVersion"})
# Pod metadata each controller patches: the RayService the head's serve label, the RayCluster the
# Recreate upgrade's hash and version annotations (shouldRecreatePodsForUpgrade).
_POD_PATCH = {"cluster": ("annotations", {UPGRADE_STRATEGY_RECREATE_HASH_KEY, KUBERAY_VERSION_KEY}),
              "service": ("labels", {service_c.SERVE_LABEL})}


class Owner:
    """The batch as the patch rules see it: its controller, its live Ray object and the view."""

    def __init__(self, *, controller: str, kind: str, live: Json, settings: DecisionSettings,
                 lookup: Callable[[str, str, str], Json | None], owned_cluster: Callable[[str], Json]) -> None:
        self.controller, self.kind, self.live, self.settings = controller, kind, live, settings
        self.namespace = str(meta(live).get("namespace") or "")
        self.name = str(meta(live).get("name") or "")
        self.uid = uid_of(live)
        self.lookup, self.owned_cluster = lookup, owned_cluster


def check_owned_target(o: Owner, cmd: DeleteObject | PatchObject) -> Json | None:
    """The target as the API server holds it, if it belongs to the batch's Ray object; None for a
    delete or patch whose uid precondition names an incarnation that is gone (a no-op)."""
    ref = cmd.target
    what = where(ref.kind, ref.namespace, ref.name)
    live = o.lookup(ref.kind, ref.namespace, ref.name)
    if live is None or (ref.uid and uid_of(live) != ref.uid):
        if ref.uid and live is not None:
            return None  # another incarnation: the precondition fails on the API server
        raise Refused(OBJECT_NOT_LIVE, f"{what} not seen", retry=True)
    if owned_by(live, o.kind, o.name, o.uid):
        return live
    if o.controller in ("job", "service"):
        for ref_owner in meta(live).get("ownerReferences") or []:
            if isinstance(ref_owner, Mapping) and ref_owner.get("kind") == "RayCluster":
                cluster = o.owned_cluster(str(ref_owner.get("name") or ""))
                if uid_of(cluster) == ref_owner.get("uid"):
                    return live
    raise Refused(FOREIGN_TARGET, f"{cmd.op} of {what}, which {o.kind} {o.namespace}/{o.name} does not own")


def _metadata_only(patch: Json, allowed: set[str], what: str) -> Json:
    if set(patch) - {"metadata"}:
        raise Refused(PATCH_CONTENT, f"patch of {what} touches more than its metadata")
    m = patch.get("metadata") or {}
    if not isinstance(m, Mapping) or set(m) - _PRECONDITIONS - allowed:
        raise Refused(PATCH_CONTENT, f"patch of {what} touches metadata other than {sorted(allowed)}")
    return m


def check_pod_patch(o: Owner, cmd: PatchObject) -> None:
    field, keys = _POD_PATCH.get(o.controller, ("", set()))
    what = where("Pod", cmd.target.namespace, cmd.target.name)
    m = _metadata_only(cmd.merge_patch, {field} if field else set(), what)
    values = m.get(field) or {}
    if not isinstance(values, Mapping) or set(values) - keys:
        raise Refused(PATCH_CONTENT, f"patch of {what} changes {field} other than {sorted(keys)}")
    if field == "labels" and any(v not in ("true", "false") for v in values.values()):
        raise Refused(PATCH_CONTENT, f"patch of {what} sets the serve label to other than true/false")


def _model(cls: Any, raw: Json) -> Any:
    try:
        return cls.model_validate(dict(raw))
    except ValidationError:
        raise Refused(MALFORMED, f"the live {raw.get('kind')} does not parse") from None


def _as_model(raw: Json) -> Json:
    """A Ray object as its model writes it (so equal content compares equal however it was spelled),
    without what the API server owns."""
    cls = {"RayCluster": RayCluster, "RayJob": RayJob, "RayService": RayService}[str(raw.get("kind"))]
    out = dict(_model(cls, raw).to_manifest())
    m = dict(out.get("metadata") or {})
    for key in ("resourceVersion", "managedFields", "generation"):
        m.pop(key, None)
    out["metadata"] = m
    out.pop("status", None)
    return out


def _without_finalizer(obj: Json, finalizer: str) -> Json:
    out = copy.deepcopy(dict(obj))
    m = out.get("metadata") or {}
    m["finalizers"] = [f for f in m.get("finalizers") or [] if f != finalizer] or None
    if m["finalizers"] is None:
        m.pop("finalizers")
    return out


def _groups_without(obj: Json, strip: Callable[[dict[str, Any]], None]) -> Json:
    out = copy.deepcopy(dict(obj))
    for group in (out.get("spec") or {}).get("workerGroupSpecs") or []:
        strip(group)
    return out


def _clear_workers_to_delete(group: dict[str, Any]) -> None:
    strategy = group.get("scaleStrategy") or {}
    strategy.pop("workersToDelete", None)
    group["scaleStrategy"] = strategy


def stale_precondition(patch: Json, live: Json) -> bool:
    """The patch carries a resourceVersion older than the live object's: the API server refuses it
    (409) whatever it says, so it can change nothing. (A reconciler's patch computed before an
    autoscaler's write is routine; refusing it as forged would only be noise.)"""
    meta_patch = patch.get("metadata")
    precondition = meta_patch.get("resourceVersion") if isinstance(meta_patch, Mapping) else None
    return bool(precondition) and older(str(precondition), str(meta(live).get("resourceVersion") or ""))


def check_ray_patch(o: Owner, cmd: PatchObject, live: Json) -> None:
    """The patched Ray object differs from the live one only where the decision code changes it."""
    ref = cmd.target
    what = where(ref.kind, ref.namespace, ref.name)
    if stale_precondition(cmd.merge_patch, live):
        return
    before, after = _as_model(live), _as_model(apply_merge_patch(live, cmd.merge_patch))
    if ref.kind == o.kind and ref.name == o.name:  # its own object: its finalizer (+ workersToDelete)
        finalizer = SELF_FINALIZER[ref.kind]
        before, after = _without_finalizer(before, finalizer), _without_finalizer(after, finalizer)
        if ref.kind == "RayCluster":
            before = _groups_without(before, _clear_workers_to_delete)
            after_cleared = _groups_without(after, _clear_workers_to_delete)
            if after_cleared == before and _workers_to_delete_only_shrank(live, after):
                return
    elif o.controller == "job":  # deletionRules DeleteWorkers: every worker group suspended
        before = _groups_without(before, lambda g: g.update(suspend=True))
    else:  # a RayService's active or pending cluster, rebuilt from the RayService's spec
        before = _as_model(_service_goal(o, live))
    if after != before:
        raise Refused(PATCH_CONTENT, f"patch of {what} changes what the {o.controller} controller never changes")


def _workers_to_delete_only_shrank(live: Json, after: Json) -> bool:
    def lists(obj: Json) -> dict[str, set[str]]:
        return {str(g.get("groupName")): set((g.get("scaleStrategy") or {}).get("workersToDelete") or [])
                for g in (obj.get("spec") or {}).get("workerGroupSpecs") or []}
    was, now = lists(live), lists(after)
    return all(now[name] <= was.get(name, set()) for name in now)


def _service_goal(o: Owner, cluster: Json) -> Json:
    service: RayService = _model(RayService, o.live)
    status = dict(o.live.get("status") or {})
    name = str(meta(cluster).get("name") or "")
    named = {str((status.get(key) or {}).get("rayClusterName") or "")
             for key in ("activeServiceStatus", "pendingServiceStatus")}
    if name not in named:
        raise Refused(PATCH_CONTENT, f"RayCluster {name} is neither the RayService's active nor pending cluster")
    gates, version = o.settings.operator.feature_gates, o.settings.operator.kuberay_version
    return apply_modification(dict(cluster), construct_service_cluster(service, name, status=status, gates=gates,
                                                                      kuberay_version=version))


def _within(patch: Any, desired: Any) -> bool:
    """Every value a merge patch sets is the desired one, and it removes only what is not desired."""
    if isinstance(patch, Mapping):
        return isinstance(desired, Mapping) and all(
            (desired.get(key) is None) if value is None else _within(value, desired.get(key))
            for key, value in patch.items())
    return bool(patch == desired)


def check_owned_patch(o: Owner, cmd: PatchObject, live: Json) -> None:
    """An owned object (Ingress, NetworkPolicy, PodGroup, Service, Gateway, HTTPRoute) is only
    brought back to what its builder gives for the live owner."""
    if stale_precondition(cmd.merge_patch, live):
        return
    ref = cmd.target
    what = where(ref.kind, ref.namespace, ref.name)
    patch = dict(cmd.merge_patch)
    m = patch.get("metadata") or {}
    if not isinstance(m, Mapping) or set(m) - _PRECONDITIONS - {"labels", "annotations"}:
        raise Refused(PATCH_CONTENT, f"patch of {what} touches metadata other than labels and annotations")
    spec = dict(patch.get("spec") or {})
    if ref.kind == "Service":
        spec.pop("clusterIP", None)  # immutable: the API server refuses any change of it
    desired = _desired(o, ref, spec)
    labels = {key: m[key] for key in ("labels", "annotations") if key in m}
    if not (_within(spec, desired.get("spec")) and _within(labels, desired.get("metadata"))):
        raise Refused(PATCH_CONTENT, f"patch of {what} is not what its builder gives")


def _desired(o: Owner, ref: ObjectRef, spec: Json) -> Json:
    if o.controller == "cluster":
        builds = cluster_builds(o.live, o.settings.operator)
        for (_, kind, name), obj in builds.owned().items():
            if (kind, name) == (ref.kind, ref.name):
                return dict(obj)
        raise Refused(PATCH_CONTENT, f"the RayCluster controller builds no {ref.kind} {ref.name}")
    selected = str((spec.get("selector") or {}).get("ray.io/cluster") or "")
    if o.controller == "job" and ref.kind == "Service":
        cluster = _model(RayCluster, o.owned_cluster(selected))
        return build_head_service_for_rayjob(_model(RayJob, o.live), cluster, settings=o.settings.operator)
    service: RayService = _model(RayService, o.live)
    if ref.kind == "Service":
        cluster = _model(RayCluster, o.owned_cluster(selected))
        if ref.name == head_service_name(service):
            return build_head_service(service, cluster, o.settings.operator)
        return build_serve_service(service, cluster)
    if ref.kind == "Gateway":
        return inc.build_gateway(service)
    if ref.kind == "HTTPRoute":
        return dict(http_route(service, {"spec": spec}, o.owned_cluster))
    raise Refused(PATCH_CONTENT, f"the {o.controller} controller never patches {ref.kind}")
