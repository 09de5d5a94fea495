"""Incremental upgrade rollback (KubeRay v1.7, kuberay#4601/#4989; gate RayServiceIncrementalUpgrade,
Beta and on by default): rayservice_controller.go reconcileRollbackState,
shouldCompleteIncrementalRollback and the RollbackImpossible Warning.

While an incremental upgrade is in progress, a goal spec that no longer matches the pending
cluster (reverted to the active cluster's, or a third spec) sets RollbackInProgress=True
(DesiredClusterSpecChanged): traffic and target_capacity then move back to the active cluster
(incremental.py), the pending cluster gets no Serve config and is never promoted, and no new
cluster is prepared. The rollback completes when the active cluster is back at 100 % capacity and
traffic and the pending one is drained, or its head is not ready (a crashed pending head cannot
take scale-down calls); the pending cluster then becomes dangling and is deleted after the delay.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.clusters import spec_for_hashing, spec_hash
from raybus.decisions.rayservice.status import is_condition_true, remove_condition, set_condition

Json = dict[str, Any]
DESIRED_CLUSTER_SPEC_CHANGED = "DesiredClusterSpecChanged"  # RayServiceConditionReason
ROLLBACK_IMPOSSIBLE = "RollbackImpossible"  # K8sEventType
MSG_ROLLBACK_IMPOSSIBLE = "Active cluster not found, rollback cannot be initiated"
MSG_REVERTED = "Goal state reverted to original cluster, rolling back."
MSG_DIVERGED = "Goal state changed mid-upgrade, rolling back to original cluster."
MSG_ROLLBACK_COMPLETE = "Rollback complete, active Ray cluster exists and no pending Ray cluster"
HEAD_POD_READY = "HeadPodReady"  # RayCluster condition


def is_rollback_in_progress(status: Json) -> bool:
    return is_condition_true(status, c.ROLLBACK_IN_PROGRESS)


def _hash(cluster: RayCluster) -> str:
    return (cluster.metadata.annotations or {}).get(c.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY, "")


def reconcile_rollback_state(service: RayService, status: Json, active: RayCluster | None,
                             pending: RayCluster | None, *, now: datetime) -> str | None:
    """The block after reconcileRayCluster (only with UpgradeInProgress=True; the caller checks the
    incremental strategy). Mutates the conditions; returns a RollbackImpossible Warning message."""
    if not is_condition_true(status, c.UPGRADE_IN_PROGRESS):
        return None
    if active is None:
        return MSG_ROLLBACK_IMPOSSIBLE
    if pending is None:
        return None
    target = spec_hash(spec_for_hashing(service))
    in_progress = is_rollback_in_progress(status)
    if target == _hash(active):  # Case 1: the user reverted the upgrade
        if not in_progress:
            set_condition(status, c.ROLLBACK_IN_PROGRESS, "True", DESIRED_CLUSTER_SPEC_CHANGED, MSG_REVERTED, now=now)
        return None
    if target == _hash(pending):  # Case 2: the upgrade is on track again: cancel the rollback
        if in_progress:
            remove_condition(status, c.ROLLBACK_IN_PROGRESS)
        return None
    if not in_progress:  # Case 3: a third spec: roll back first, then upgrade afresh
        set_condition(status, c.ROLLBACK_IN_PROGRESS, "True", DESIRED_CLUSTER_SPEC_CHANGED, MSG_DIVERGED, now=now)
    return None


def _pending_head_ready(pending: RayCluster | None, raw: Json | None) -> bool:
    if pending is None or raw is None:
        return False
    conds = ((raw.get("status") or {}).get("conditions")) or []
    return any(isinstance(x, dict) and x.get("type") == HEAD_POD_READY and x.get("status") == "True" for x in conds)


def should_complete_incremental_rollback(status: Json, pending: RayCluster | None, pending_raw: Json | None) -> bool:
    """shouldCompleteIncrementalRollback: the active cluster is back at 100 % target_capacity and
    traffic, and the pending one is drained (0/0) or its head Pod is not ready."""
    active = status.get("activeServiceStatus") or {}
    pend = status.get("pendingServiceStatus") or {}
    healthy = _pending_head_ready(pending, pending_raw)
    return (active.get("targetCapacity", -1) == 100 and active.get("trafficRoutedPercent", -1) == 100
            and (not healthy or (pend.get("targetCapacity", -1) == 0 and pend.get("trafficRoutedPercent", -1) == 0)))


def complete_rollback_if_done(status: Json, pending: RayCluster | None, pending_raw: Json | None, *,
                              now: datetime) -> bool:
    """calculateStatus' rollback block: clear the pending status (its cluster becomes dangling),
    drop RollbackInProgress and reset UpgradeInProgress. True when it completed."""
    if not is_rollback_in_progress(status) or not should_complete_incremental_rollback(status, pending, pending_raw):
        return False
    status["pendingServiceStatus"] = {}
    remove_condition(status, c.ROLLBACK_IN_PROGRESS)
    set_condition(status, c.UPGRADE_IN_PROGRESS, "False", c.NO_PENDING_CLUSTER, MSG_ROLLBACK_COMPLETE, now=now)
    return True
