"""The RayService's RayClusters: spec hashes, shouldPrepareNewCluster, shouldUpdateCluster, the goal
cluster manifest, the in-place update patch and deterministic pending-cluster names
(rayservice_controller.go: isClusterSpecHashEqual, shouldUpdateCluster, shouldPrepareNewCluster,
isZeroDowntimeUpgradeEnabled, constructRayClusterForRayService, modifyRayCluster)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from raybus.api.predicates import is_incremental_upgrade_enabled
from raybus.api.raycluster import RayCluster, RayClusterSpec
from raybus.api.rayservice import RayService, RayServiceUpgradeType
from raybus.api.settings import FeatureGates
from raybus.decisions.cluster.hashing import generate_hash_without_replicas_and_workers_to_delete
from raybus.decisions.cluster.naming import NameAllocator
from raybus.decisions.commands import merge_patch
from raybus.decisions.rayservice import constants as c

Json = dict[str, Any]
ORIGINATED_FROM_CR_NAME = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
_ATOI = re.compile(r"[+-]?[0-9]+")


def spec_hash(spec: RayClusterSpec) -> str:
    """generateHashWithoutReplicasAndWorkersToDelete: replicas/min/max/workersToDelete muted, so the
    autoscaler's scaling never looks like a spec change."""
    return generate_hash_without_replicas_and_workers_to_delete(spec)


def spec_for_hashing(service: RayService) -> RayClusterSpec:
    """rayClusterSpecForHashing (v1.7): the RayService's cluster spec with ``suspend`` muted. Suspend
    reaches the RayCluster only when it is created; afterwards Kueue (or whoever queues it) owns it,
    so toggling it in the RayService is neither an in-place update nor a new cluster."""
    return service.spec.ray_cluster_config.model_copy(update={"suspend": None})


def _annotations(cluster: RayCluster) -> dict[str, str]:
    return cluster.metadata.annotations or {}


def is_cluster_spec_hash_equal(service: RayService, cluster: RayCluster, *, partial: bool) -> bool:
    """isClusterSpecHashEqual. ``partial``: compare only the cluster's first N worker groups (N =
    its ray.io/num-worker-groups), i.e. "identical except groups appended at the end".

    Mirrors KubeRay's quirk: an unparsable/missing num-worker-groups annotation counts as equal
    (clusters created without the annotations are updated in place, never replaced)."""
    cluster_hash = _annotations(cluster).get(c.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY, "")
    goal = spec_for_hashing(service)
    if not partial:
        return cluster_hash == spec_hash(goal)
    raw = _annotations(cluster).get(c.NUM_WORKER_GROUPS_KEY, "")
    if not _ATOI.fullmatch(raw):  # strconv.Atoi failed
        return True
    cluster_groups = int(raw)
    goal_groups = goal.worker_group_specs or []
    goal_hash = ""
    if len(goal_groups) >= cluster_groups >= 0:
        goal_hash = spec_hash(goal.model_copy(update={"worker_group_specs": goal_groups[:cluster_groups]}))
    return cluster_hash == goal_hash


def is_zero_downtime_upgrade_enabled(service: RayService, *, gates: FeatureGates,
                                     enable_zero_downtime: bool) -> bool:
    """isZeroDowntimeUpgradeEnabled: spec.upgradeStrategy.type wins over ENABLE_ZERO_DOWNTIME.

    With the RayServiceIncrementalUpgrade gate on, NewCluster and NewClusterWithIncrementalUpgrade
    enable it; with the gate off only NewCluster does (KubeRay's code; not a fallback to NewCluster)."""
    strategy = service.spec.upgrade_strategy
    if strategy is not None and strategy.type is not None:
        allowed = {RayServiceUpgradeType.NEW_CLUSTER.value}
        if gates.ray_service_incremental_upgrade:
            allowed.add(RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE.value)
        return strategy.type in allowed
    return enable_zero_downtime


def should_prepare_new_cluster(service: RayService, active: RayCluster | None, pending: RayCluster | None, *,
                               is_pending_cluster_serving: bool, gates: FeatureGates,
                               enable_zero_downtime: bool) -> bool:
    """shouldPrepareNewCluster: a (new) pending cluster is needed.

    Never while the pending cluster already serves; always when there is no cluster at all;
    otherwise only for a spec change that is neither identical (hash) nor "groups appended"
    (in-place update), and only if zero-downtime upgrades are enabled."""
    if is_pending_cluster_serving:
        return False
    if active is None and pending is None:
        return True
    cluster = pending if pending is not None else active
    assert cluster is not None
    if is_cluster_spec_hash_equal(service, cluster, partial=False):
        return False
    if is_cluster_spec_hash_equal(service, cluster, partial=True):
        return False
    return is_zero_downtime_upgrade_enabled(service, gates=gates, enable_zero_downtime=enable_zero_downtime)


def should_update_cluster(service: RayService, status: Json, cluster: RayCluster | None, *,
                          is_active: bool, kuberay_version: str) -> bool:
    """shouldUpdateCluster: update in place (refresh the KubeRay version annotation, or append the
    new worker groups). The active cluster is frozen while an upgrade is in progress."""
    if cluster is None:
        return False
    if is_active:
        if _condition_true(status, c.UPGRADE_IN_PROGRESS):
            return False
        if _annotations(cluster).get(c.KUBERAY_VERSION_KEY, "") != kuberay_version:
            return True
    if is_cluster_spec_hash_equal(service, cluster, partial=False):
        return False
    return is_cluster_spec_hash_equal(service, cluster, partial=True)


def _condition_true(status: Json, type_: str) -> bool:
    return any(isinstance(x, dict) and x.get("type") == type_ and x.get("status") == "True"
               for x in status.get("conditions") or [])


def owner_reference(service: RayService) -> Json:
    """ctrl.SetControllerReference(rayService, ...)."""
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "name": service.name,
            "uid": service.metadata.uid or "", "controller": True, "blockOwnerDeletion": True}


def construct_ray_cluster(service: RayService, name: str, *, status: Json, gates: FeatureGates,
                          kuberay_version: str) -> Json:
    """constructRayClusterForRayService: the goal RayCluster manifest.

    Labels: the RayService's + originated-from-cr-name/crd. Annotations: the RayService's + spec
    hash, number of worker groups, KubeRay version. During an incremental upgrade the new cluster
    starts without replicas so it autoscales up from minReplicas with target_capacity."""
    spec = service.spec.ray_cluster_config
    labels = {**(service.metadata.labels or {}), ORIGINATED_FROM_CR_NAME: service.name,
              ORIGINATED_FROM_CRD: "RayService"}
    annotations = {**(service.metadata.annotations or {}),
                   c.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY: spec_hash(spec_for_hashing(service)),
                   c.NUM_WORKER_GROUPS_KEY: str(len(spec.worker_group_specs or [])),
                   c.KUBERAY_VERSION_KEY: kuberay_version}
    body = copy.deepcopy(spec.to_dict())
    active_name = (status.get("activeServiceStatus") or {}).get("rayClusterName") or ""
    if is_incremental_upgrade_enabled(service.spec, gates) and active_name:
        for group in body.get("workerGroupSpecs") or []:
            if isinstance(group, dict):
                group.pop("replicas", None)
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": service.namespace, "labels": labels,
                     "annotations": annotations, "ownerReferences": [owner_reference(service)]},
        "spec": body,
    }


def _keep_suspend(current: Json, goal: Json) -> Json:
    """updateRayClusterInstance (v1.7): the goal spec, but the existing cluster's ``suspend`` is kept
    (after creation it belongs to Kueue, not to the RayService)."""
    spec = copy.deepcopy(goal.get("spec") or {})
    existing = (current.get("spec") or {}).get("suspend")
    if existing is None:
        spec.pop("suspend", None)
    else:
        spec["suspend"] = existing
    return spec


def modify_ray_cluster_patch(current: Json, goal: Json) -> Json:
    """modifyRayCluster: spec, labels and annotations become the goal's (as KubeRay's Update)."""
    cur_meta, goal_meta = current.get("metadata") or {}, goal.get("metadata") or {}
    patch: Json = {}
    for key in ("labels", "annotations"):
        sub = merge_patch(cur_meta.get(key) or {}, goal_meta.get(key) or {})
        if sub:
            patch.setdefault("metadata", {})[key] = sub
    spec = merge_patch(current.get("spec") or {}, _keep_suspend(current, goal))
    if spec:
        patch["spec"] = spec
    if patch and cur_meta.get("resourceVersion"):
        # KubeRay's r.Update is optimistic: computed on a stale read (the autoscaler moved replicas
        # meanwhile) it fails with a conflict and the next reconcile decides again, instead of
        # writing the stale spec over the newer one.
        patch.setdefault("metadata", {})["resourceVersion"] = cur_meta["resourceVersion"]
    return patch


def apply_modification(current: Json, goal: Json) -> Json:
    """The cluster as it will be after modifyRayCluster (for the rest of this reconcile)."""
    out = copy.deepcopy(current)
    meta = dict(out.get("metadata") or {})
    meta["labels"] = dict((goal.get("metadata") or {}).get("labels") or {})
    meta["annotations"] = dict((goal.get("metadata") or {}).get("annotations") or {})
    out["metadata"] = meta
    out["spec"] = _keep_suspend(current, goal)
    return out


def generate_ray_cluster_name(service: RayService, *, goal_hash: str, taken: Iterable[str],
                              entropy: str = "") -> str:
    """utils.GenerateRayClusterName (``<rayservice>-<5 chars>``) without randomness: the 5 chars
    come from (uid, goal spec hash), skipping names still in use, so a re-decision over the same
    snapshot picks the same name and a late duplicate create collides instead of duplicating."""
    allocator = NameAllocator(entropy=f"{service.metadata.uid or ''}/{entropy}", taken=taken)
    return allocator.allocate(f"{service.name}-", goal_hash)
