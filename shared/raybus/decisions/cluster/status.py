"""calculateStatus / InconsistentRayClusterStatus of ``raycluster_controller.go`` + ``utils/consistency.go``.

Input is the defaulted cluster (its current ``.status`` is the "old" status), the Pods and head
Services of the snapshot (plus the head Service this round is creating, so a fresh cluster's
status names it), and the round's ReconcileError. Output is the new status as the camelCase dict
KubeRay would serialise (int32 ``omitempty`` fields dropped when zero, Quantities always present).

KubeRay lists Pods *after* reconcilePods ran; here the snapshot is the Pod list before this round's
commands, so a change shows up one round later (the adapter re-runs on every Pod event anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from raybus.api.raycluster import ClusterState, RayCluster, RayClusterConditionType
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.outcome import ReconcileError
from raybus.decisions.cluster.pods import find_suspend_status
from raybus.decisions.cluster.quantity import format_quantity
from raybus.decisions.cluster.replicas import (
    TPU_RESOURCE,
    calculate_available_replicas,
    calculate_desired_replicas,
    calculate_desired_resources,
    calculate_max_replicas,
    calculate_min_replicas,
    calculate_ready_replicas,
    sum_gpus,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.memo import LastPerObject

# rayv1 condition reasons (raycluster_types.go).
ALL_POD_RUNNING_AND_READY_FIRST_TIME = "AllPodRunningAndReadyFirstTime"
RAY_CLUSTER_PODS_PROVISIONING = "RayClusterPodsProvisioning"
HEAD_POD_NOT_FOUND = "HeadPodNotFound"
HEAD_POD_RUNNING_AND_READY = "HeadPodRunningAndReady"
UNKNOWN_REASON = "Unknown"

_INT_FIELDS = (
    "readyWorkerReplicas",
    "availableWorkerReplicas",
    "desiredWorkerReplicas",
    "minWorkerReplicas",
    "maxWorkerReplicas",
)


class StatusError(Exception):
    """calculateStatus returned an error: the status is not written, requeue after 2 s."""


def format_time(now: datetime) -> str:
    """metav1.Time JSON: RFC3339, second precision, UTC."""
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    return now.replace(microsecond=0, tzinfo=None).isoformat() + "Z"


# --- metav1 condition helpers (k8s.io/apimachinery/pkg/api/meta) -----------------------------------


def find_condition(conditions: list[dict[str, Any]], cond_type: str) -> dict[str, Any] | None:
    for cond in conditions:
        if cond.get("type") == cond_type:
            return cond
    return None


def is_condition_true(conditions: list[dict[str, Any]], cond_type: str) -> bool:
    cond = find_condition(conditions, cond_type)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    conditions: list[dict[str, Any]], *, cond_type: str, status: str, reason: str, message: str, now: str
) -> None:
    """meta.SetStatusCondition: lastTransitionTime changes only when status changes."""
    existing = find_condition(conditions, cond_type)
    if existing is None:
        conditions.append(
            {
                "type": cond_type,
                "status": status,
                "lastTransitionTime": now,
                "reason": reason,
                "message": message,
            }
        )
        return
    if existing.get("status") != status:
        existing["status"] = status
        existing["lastTransitionTime"] = now
    existing["reason"] = reason
    existing["message"] = message
    existing.pop("observedGeneration", None)


def remove_condition(conditions: list[dict[str, Any]], cond_type: str) -> None:
    """meta.RemoveStatusCondition."""
    conditions[:] = [c for c in conditions if c.get("type") != cond_type]


def head_pod_ready_condition(head: Mapping[str, Any]) -> tuple[str, str, str]:
    """utils.FindHeadPodReadyCondition -> (status, reason, message).

    For ContainersNotReady, the first not-ready container with a waiting/terminated state supplies
    the reason, and its message is appended to the Pod condition's as ``"<cond>; <container>: <msg>"``
    (KubeRay's TestFindHeadPodReadyMessage: ``containers not ready; ray: Back-off pulling image ...``,
    or ``my-image: bash not found`` when the Pod condition has no message)."""
    cond = podutil.pod_condition(head, "Ready")
    if cond is None:
        return "False", UNKNOWN_REASON, ""
    status = str(cond.get("status") or "False")
    reason = str(cond.get("reason") or "")
    message = str(cond.get("message") or "")
    if status == "True" and not reason:
        reason = HEAD_POD_RUNNING_AND_READY
    if reason == "ContainersNotReady":
        for cs in podutil.status(head).get("containerStatuses") or []:
            if cs.get("ready"):
                continue
            state = cs.get("state") or {}
            detail = state.get("waiting") or state.get("terminated")
            if not isinstance(detail, Mapping):
                continue
            if detail.get("reason"):
                reason = str(detail["reason"])
            if detail.get("message"):
                parts = [message] if message else []
                parts.append(f"{cs.get('name', '')}: {detail['message']}")
                message = "; ".join(parts)
            break
    return status, reason or UNKNOWN_REASON, message


# --- head info / endpoints --------------------------------------------------------------------------


def _head_pod(pods: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """common.GetRayClusterHeadPod: nil when none, error when more than one."""
    heads = podutil.head_pods(pods)
    if len(heads) > 1:
        raise StatusError(f"multiple head Pods found: {sorted(podutil.name(p) for p in heads)}")
    return heads[0] if heads else None


def _endpoints(
    existing: Mapping[str, str] | None, services: list[Mapping[str, Any]]
) -> dict[str, str] | None:
    """updateEndpoints: merge the first head Service's named ports into status.endpoints."""
    if not services:
        return dict(existing) if existing is not None else None
    endpoints = dict(existing or {})
    for port in (services[0].get("spec") or {}).get("ports") or []:
        port_name = port.get("name")
        if not port_name:
            continue
        # The API server defaults targetPort to port; a Service this round is creating lacks it.
        target = port.get("targetPort", port.get("port"))
        if port.get("nodePort"):
            endpoints[port_name] = str(port["nodePort"])
        elif isinstance(target, int) and not isinstance(target, bool) and target != 0:
            endpoints[port_name] = str(target)
        elif isinstance(target, str) and target:
            endpoints[port_name] = target
    return endpoints


def _head_service_ip_and_name(
    services: list[Mapping[str, Any]], head: Mapping[str, Any] | None, *, planned: bool
) -> tuple[str, str]:
    """getHeadServiceIPAndName (headless head Service -> the head Pod IP)."""
    if not services:
        raise StatusError("unable to find head service")
    if len(services) > 1:
        raise StatusError(f"found multiple head services: {sorted(podutil.name(s) for s in services)}")
    svc = services[0]
    cluster_ip = str((svc.get("spec") or {}).get("clusterIP") or "")
    if cluster_ip == "None":
        return (str(podutil.status(head).get("podIP") or "") if head is not None else ""), podutil.name(svc)
    if not cluster_ip and not planned:
        raise StatusError("head service IP is empty")
    return cluster_ip, podutil.name(svc)


# --- calculateStatus --------------------------------------------------------------------------------


# The desired* status fields of each RayCluster while its defaulted spec is the same object
# (decisions/memo.py): they depend on the spec only, and summing every group's Quantities on
# every reconcile was ~3% of the cluster-reconciler's CPU (bench_clusters --profile).
_DESIRED: LastPerObject[dict[str, str]] = LastPerObject()


def _desired_resources(cluster: RayCluster) -> dict[str, str]:
    resources = calculate_desired_resources(cluster)
    return {
        "desiredCPU": format_quantity(resources["cpu"]) if "cpu" in resources else "0",
        "desiredMemory": format_quantity(resources["memory"]) if "memory" in resources else "0",
        "desiredGPU": format_quantity(sum_gpus(resources)),
        "desiredTPU": format_quantity(resources[TPU_RESOURCE]) if TPU_RESOURCE in resources else "0",
    }


def calculate_status(
    cluster: RayCluster,
    *,
    pods: list[Mapping[str, Any]],
    head_services: list[Mapping[str, Any]],
    planned_head_service: bool,
    reconcile_error: ReconcileError | None,
    settings: OperatorSettings,
    now: datetime,
) -> dict[str, Any]:
    """calculateStatus -> the new status dict (raises StatusError like its error return)."""
    stamp = format_time(now)
    old: dict[str, Any] = cluster.status.to_dict() if cluster.status is not None else {}
    new: dict[str, Any] = {k: v for k, v in old.items()}
    conditions: list[dict[str, Any]] = [dict(c) for c in old.get("conditions") or []]
    gate = settings.feature_gates.ray_cluster_status_conditions
    if gate:
        _replica_failure(conditions, reconcile_error, now=stamp)
    if cluster.metadata.generation:
        new["observedGeneration"] = cluster.metadata.generation
    desired = _replica_counts(cluster, new, pods)
    new.update(_DESIRED.get((cluster.namespace, cluster.name), (cluster.spec,),
                            lambda: _desired_resources(cluster)))
    if reconcile_error is None and len(pods) == desired + 1 and podutil.check_all_pods_running(pods):
        new["state"] = ClusterState.READY.value
        new.pop("reason", None)
    head = _head_pod(pods)
    if gate:
        _head_pod_ready(conditions, head, now=stamp)
        _suspend_and_provisioned(cluster, conditions, pods=pods, now=stamp)
    if cluster.spec.suspend and not pods:
        new["state"] = ClusterState.SUSPENDED.value
    endpoints = _endpoints(old.get("endpoints"), head_services)
    if endpoints is not None:
        new["endpoints"] = endpoints
    new["head"] = _head_info(head, head_services, planned=planned_head_service)
    if conditions:
        new["conditions"] = conditions
    else:
        new.pop("conditions", None)
    new["lastUpdateTime"] = stamp
    if old.get("state") != new.get("state"):
        transitions = dict(old.get("stateTransitionTimes") or {})
        transitions[str(new.get("state") or "")] = stamp
        new["stateTransitionTimes"] = transitions
    return new


def _replica_failure(conditions: list[dict[str, Any]], error: ReconcileError | None, *, now: str) -> None:
    """ReplicaFailure: set from the reconcile error that names a reason, removed without an error."""
    if error is None:
        remove_condition(conditions, RayClusterConditionType.REPLICA_FAILURE)
    elif error.replica_failure_reason:
        set_condition(
            conditions,
            cond_type=RayClusterConditionType.REPLICA_FAILURE,
            status="True",
            reason=error.replica_failure_reason,
            message=error.message,
            now=now,
        )


def _replica_counts(cluster: RayCluster, new: dict[str, Any], pods: list[Mapping[str, Any]]) -> int:
    """The worker replica counts (int32 omitempty); returns the desired worker replicas."""
    desired = calculate_desired_replicas(cluster)
    counts = {
        "readyWorkerReplicas": calculate_ready_replicas(pods),
        "availableWorkerReplicas": calculate_available_replicas(pods),
        "desiredWorkerReplicas": desired,
        "minWorkerReplicas": calculate_min_replicas(cluster),
        "maxWorkerReplicas": calculate_max_replicas(cluster),
    }
    for key, value in counts.items():
        if value:
            new[key] = value
        else:
            new.pop(key, None)
    return desired


def _head_pod_ready(conditions: list[dict[str, Any]], head: Mapping[str, Any] | None, *, now: str) -> None:
    if head is None:
        set_condition(
            conditions,
            cond_type=RayClusterConditionType.HEAD_POD_READY,
            status="False",
            reason=HEAD_POD_NOT_FOUND,
            message="Head Pod not found",
            now=now,
        )
        return
    status, reason, message = head_pod_ready_condition(head)
    set_condition(
        conditions,
        cond_type=RayClusterConditionType.HEAD_POD_READY,
        status=status,
        reason=reason,
        message=message,
        now=now,
    )


def _head_info(head: Mapping[str, Any] | None, head_services: list[Mapping[str, Any]], *,
               planned: bool) -> dict[str, Any]:
    service_ip, service_name = _head_service_ip_and_name(head_services, head, planned=planned)
    head_info = {
        "podIP": str(podutil.status(head).get("podIP") or "") if head is not None else "",
        "podName": podutil.name(head) if head is not None else "",
        "serviceIP": service_ip,
        "serviceName": service_name,
    }
    return {k: v for k, v in head_info.items() if v}  # all HeadInfo fields are omitempty


def _suspend_and_provisioned(
    cluster: RayCluster, conditions: list[dict[str, Any]], *, pods: list[Mapping[str, Any]], now: str
) -> None:
    """The RayClusterProvisioned first-time rule and the Suspending/Suspended state machine."""
    suspend_status = find_suspend_status(cluster)
    provisioned = RayClusterConditionType.PROVISIONED
    if not is_condition_true(conditions, provisioned) and suspend_status != RayClusterConditionType.SUSPENDED:
        if podutil.check_all_pods_running(pods):
            set_condition(
                conditions,
                cond_type=provisioned,
                status="True",
                reason=ALL_POD_RUNNING_AND_READY_FIRST_TIME,
                message="All Ray Pods are ready for the first time",
                now=now,
            )
        else:
            set_condition(
                conditions,
                cond_type=provisioned,
                status="False",
                reason=RAY_CLUSTER_PODS_PROVISIONING,
                message="RayCluster Pods are being provisioned for first time",
                now=now,
            )
    suspending, suspended = RayClusterConditionType.SUSPENDING, RayClusterConditionType.SUSPENDED
    if suspend_status == suspending:
        if not pods:
            set_condition(
                conditions,
                cond_type=provisioned,
                status="False",
                reason=RAY_CLUSTER_PODS_PROVISIONING,
                message="RayCluster has been suspended",
                now=now,
            )
            set_condition(
                conditions, cond_type=suspending, status="False", reason=suspending, message="", now=now
            )
            set_condition(
                conditions, cond_type=suspended, status="True", reason=suspended, message="", now=now
            )
    elif suspend_status == suspended:
        if cluster.spec.suspend is not None and not cluster.spec.suspend:
            set_condition(
                conditions, cond_type=suspended, status="False", reason=suspended, message="", now=now
            )
    else:
        set_condition(conditions, cond_type=suspended, status="False", reason=suspended, message="", now=now)
        set_condition(
            conditions,
            cond_type=suspending,
            status="True" if cluster.spec.suspend else "False",
            reason=suspending,
            message="",
            now=now,
        )


def _norm(status: Mapping[str, Any] | None, *, transition_times: bool = True) -> dict[str, Any]:
    status = status or {}
    out: dict[str, Any] = {key: int(status.get(key) or 0) for key in _INT_FIELDS}
    out["state"] = status.get("state") or ""
    out["reason"] = status.get("reason") or ""
    out["endpoints"] = dict(status.get("endpoints") or {})
    out["head"] = {k: v for k, v in (status.get("head") or {}).items() if v}
    out["conditions"] = [
        {k: v for k, v in c.items() if (v not in (None, "") or k == "message")
         and (transition_times or k != "lastTransitionTime")}
        for c in status.get("conditions") or []
    ]
    for cond in out["conditions"]:
        cond.setdefault("message", "")
    return out


def inconsistent_status(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """utils.InconsistentRayClusterStatus: ignores lastUpdateTime, observedGeneration, desired* and
    stateTransitionTimes; compares state, reason, replica counts, endpoints, head and conditions."""
    return _norm(old) != _norm(new)


def differs_beyond_transition_times(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """inconsistent_status without the conditions' lastTransitionTime: what a status just written
    is compared with. A round that runs before the cache shows that write computes the same
    transition again, stamped later; it is the same status (KubeRay's write of it would be refused
    with a 409 Conflict, its update carrying the cached resourceVersion), and writing it would
    only move the transition time later."""
    return _norm(old, transition_times=False) != _norm(new, transition_times=False)
