"""Reading Pod dicts (as the API server returns them) the way KubeRay reads corev1.Pod.

Labels/annotation keys are KubeRay's (``utils/constant.go``). ``should_delete_pod`` mirrors
``shouldDeletePod`` and ``ray_container_terminated`` mirrors ``getRayContainerStateTerminated`` in
``raycluster_controller.go``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
HEAD_NODE = "head"
WORKER_NODE = "worker"
HEAD_GROUP_LABEL_VALUE = "headgroup"
REPLICA_NAME_LABEL = "ray.io/worker-group-replica-name"
REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"
HOST_INDEX_LABEL = "ray.io/replica-host-index"

Pod = Mapping[str, Any]


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def name(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    value = meta(obj).get("labels")
    return value if isinstance(value, Mapping) else {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, Mapping) else {}


def uid(obj: Mapping[str, Any]) -> str | None:
    value = meta(obj).get("uid")
    return str(value) if value else None


def is_terminating(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def status(pod: Pod) -> Mapping[str, Any]:
    value = pod.get("status")
    return value if isinstance(value, Mapping) else {}


def phase(pod: Pod) -> str:
    return str(status(pod).get("phase") or "")


def pod_condition(pod: Pod, cond_type: str) -> Mapping[str, Any] | None:
    for cond in status(pod).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == cond_type:
            return cond
    return None


def is_running_and_ready(pod: Pod) -> bool:
    """utils.IsRunningAndReady."""
    if phase(pod) != "Running":
        return False
    cond = pod_condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def check_all_pods_running(pods: Iterable[Pod]) -> bool:
    """utils.CheckAllPodsRunning: at least one Pod, all Running, none with PodReady=False."""
    items = list(pods)
    if not items:
        return False
    for pod in items:
        if phase(pod) != "Running":
            return False
        cond = pod_condition(pod, "Ready")
        if cond is not None and cond.get("status") == "False":
            return False
    return True


def is_head(pod: Pod) -> bool:
    return labels(pod).get(NODE_TYPE_LABEL) == HEAD_NODE


def is_worker(pod: Pod) -> bool:
    return labels(pod).get(NODE_TYPE_LABEL) == WORKER_NODE


def group_of(pod: Pod) -> str:
    return str(labels(pod).get(GROUP_LABEL) or "")


def head_pods(pods: Iterable[Pod]) -> list[Pod]:
    """RayClusterHeadPodsAssociationOptions."""
    return [p for p in pods if is_head(p)]


def group_pods(pods: Iterable[Pod], group: str) -> list[Pod]:
    """RayClusterGroupPodsAssociationOptions (cluster label is implied by the snapshot)."""
    return [p for p in pods if group_of(p) == group and not is_head(p)]


def ray_container_terminated(pod: Pod) -> Mapping[str, Any] | None:
    """getRayContainerStateTerminated: the Ray container is containers[0]; matched by name."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        return None
    ray_name = containers[0].get("name")
    for cs in status(pod).get("containerStatuses") or []:
        if cs.get("name") == ray_name:
            terminated = (cs.get("state") or {}).get("terminated")
            return terminated if isinstance(terminated, Mapping) else None
    return None


def restart_policy(pod: Pod) -> str:
    return str((pod.get("spec") or {}).get("restartPolicy") or "Always")


def should_delete_pod(pod: Pod, node_type: str) -> tuple[bool, str]:
    """shouldDeletePod: (delete?, reason)."""
    pod_phase = phase(pod)
    if pod_phase in ("Failed", "Succeeded"):
        return True, (
            f"The {node_type} Pod {name(pod)} status is {pod_phase} which is a terminal state. "
            "KubeRay will delete the Pod and create new Pods in the next reconciliation if necessary."
        )
    terminated = ray_container_terminated(pod)
    if pod_phase == "Running" and terminated is not None:
        policy = restart_policy(pod)
        if policy == "Never":
            return True, (
                f"The Pod status of the {node_type} Pod {name(pod)} is {pod_phase}, and the Ray container "
                f"terminated status is {dict(terminated)}. The container is unable to restart due to its "
                f"restart policy {policy}, so KubeRay will delete it."
            )
        return False, (
            f"The Pod status of the {node_type} Pod {name(pod)} is {pod_phase}, and the Ray container "
            f"terminated status is {dict(terminated)}. However, KubeRay will not delete the Pod because its "
            f"restartPolicy is set to {policy} and it should be able to restart automatically."
        )
    return False, (
        f"KubeRay does not need to delete the {node_type} Pod {name(pod)}. The Pod status is {pod_phase}, "
        f"and the Ray container terminated status is {terminated}."
    )


# Pod fields no RayCluster decision reads (KubeRay's reconcilePods and calculateStatus read a
# Pod's metadata, spec, phase, Ready condition, container statuses and the head's podIP): the
# scheduler's binding (spec.nodeName, PodScheduled), the kubelet's bookkeeping (startTime,
# hostIP(s), podIPs, qosClass, init container statuses, the conditions other than Ready) and
# a worker's podIP. An update that changes only these cannot change a decision.
_UNREAD_SPEC = ("nodeName",)
_UNREAD_STATUS = ("startTime", "hostIP", "hostIPs", "podIPs", "qosClass", "nominatedNodeName",
                  "initContainerStatuses")
_READ_CONDITIONS = frozenset({"Ready"})


def decision_view(pod: Pod) -> dict[str, Any]:
    """The part of a Pod the RayCluster decisions read (see _UNREAD_*): two versions with equal
    views lead to the same decision, so the watcher need not wake the RayCluster for the newer
    one (tests/unit/decisions/cluster/test_pod_decision_view.py checks it on reconcile_cluster)."""
    m = {k: v for k, v in meta(pod).items() if k not in ("resourceVersion", "managedFields")}
    spec_value = pod.get("spec")
    spec = {k: v for k, v in spec_value.items() if k not in _UNREAD_SPEC} \
        if isinstance(spec_value, Mapping) else spec_value
    st: dict[str, Any] = {k: v for k, v in status(pod).items() if k not in _UNREAD_STATUS}
    if is_worker(pod):
        _worker_status_view(pod, st)
    elif isinstance(st.get("conditions"), list):
        st["conditions"] = [c for c in st["conditions"]
                            if not isinstance(c, Mapping) or c.get("type") in _READ_CONDITIONS]
    if not is_head(pod):
        st.pop("podIP", None)
    return {**pod, "metadata": m, "spec": spec, "status": st}


def _worker_status_view(pod: Pod, st: dict[str, Any]) -> None:
    """A worker's status as its decisions read it. Its Ready condition only by status and only
    while Running (is_running_and_ready, check_all_pods_running: both return on the phase
    first), and its containers only by the Ray container's terminated state (shouldDeletePod's
    getRayContainerStateTerminated). The head keeps them whole: calculateStatus reads its
    waiting reasons and messages. So the kubelet's first status (ContainerCreating, Ready=False
    while Pending) changes nothing a decision reads of a worker (a quarter of the worker
    updates on the bus)."""
    ready = pod_condition(pod, "Ready") if phase(pod) == "Running" else None
    st["conditions"] = ready.get("status") if ready is not None else None
    st["containerStatuses"] = ray_container_terminated(pod)


def clusters_to_wake(old: Pod | None, new: Pod | None) -> tuple[str, ...]:
    """The RayClusters (by the ray.io/cluster label, as KubeRay maps its Pods) that must look
    again after a Pod event: created or deleted, or updated in what a decision reads
    (decision_view; KubeRay's Owns(&corev1.Pod{}) reconciles on every update, and one with an
    equal view decides what the previous one did). A relabelled Pod wakes both clusters."""
    def cluster(pod: Pod | None) -> str:
        return str(labels(pod).get(CLUSTER_LABEL) or "") if pod is not None else ""
    if old is not None and new is not None and decision_view(old) == decision_view(new):
        return ()
    return tuple(dict.fromkeys(c for c in (cluster(new), cluster(old)) if c))
