"""Replica and resource arithmetic of ``ray-operator/controllers/ray/utils/util.go``.

Every function tolerates a non-defaulted spec (``None`` min/max/replicas/numOfHosts take the CRD
defaults) so it is safe on raw input too, but callers normally pass ``with_defaults(cluster)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from raybus.api.raycluster import MAX_INT32, RayCluster, WorkerGroupSpec
from raybus.decisions.cluster.podutil import NODE_TYPE_LABEL, WORKER_NODE, is_running_and_ready, phase
from raybus.decisions.cluster.quantity import Quantity, QuantityError, parse_quantity, scale

TPU_RESOURCE = "google.com/tpu"


def _num_of_hosts(group: WorkerGroupSpec) -> int:
    return group.num_of_hosts if group.num_of_hosts and group.num_of_hosts > 0 else 1


def _min(group: WorkerGroupSpec) -> int:
    return group.min_replicas if group.min_replicas is not None else 0


def _max(group: WorkerGroupSpec) -> int:
    return group.max_replicas if group.max_replicas is not None else MAX_INT32


def is_group_suspended(group: WorkerGroupSpec) -> bool:
    return bool(group.suspend)


def clamped_replicas(group: WorkerGroupSpec) -> int:
    """The replica count (not Pods) GetWorkerGroupDesiredReplicas clamps to [min, max]."""
    if is_group_suspended(group):
        return 0
    lo, hi = _min(group), _max(group)
    if lo > hi:  # "minReplicas is greater than maxReplicas, using maxReplicas"
        return hi
    if group.replicas is None or group.replicas < lo:
        return lo
    if group.replicas > hi:
        return hi
    return group.replicas


def worker_group_desired_pods(group: WorkerGroupSpec) -> int:
    """GetWorkerGroupDesiredReplicas: clamp(replicas, min, max) * numOfHosts; 0 when suspended."""
    return clamped_replicas(group) * _num_of_hosts(group)


def _saturate(value: int) -> int:
    return min(value, MAX_INT32)


def calculate_desired_replicas(cluster: RayCluster) -> int:
    """CalculateDesiredReplicas."""
    return _saturate(sum(worker_group_desired_pods(g) for g in cluster.spec.worker_group_specs or []))


def calculate_min_replicas(cluster: RayCluster) -> int:
    """CalculateMinReplicas (suspended groups skipped)."""
    groups = [g for g in cluster.spec.worker_group_specs or [] if not is_group_suspended(g)]
    return _saturate(sum(_min(g) * _num_of_hosts(g) for g in groups))


def calculate_max_replicas(cluster: RayCluster) -> int:
    """CalculateMaxReplicas (suspended groups skipped; saturates at int32 max)."""
    groups = [g for g in cluster.spec.worker_group_specs or [] if not is_group_suspended(g)]
    return _saturate(sum(_max(g) * _num_of_hosts(g) for g in groups))


def _is_worker(pod: Mapping[str, Any]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(NODE_TYPE_LABEL) == WORKER_NODE)


def calculate_ready_replicas(pods: Iterable[Mapping[str, Any]]) -> int:
    """CalculateReadyReplicas: worker Pods Running with PodReady=True."""
    return sum(1 for p in pods if _is_worker(p) and is_running_and_ready(p))


def calculate_available_replicas(pods: Iterable[Mapping[str, Any]]) -> int:
    """CalculateAvailableReplicas: worker Pods in phase Running."""
    return sum(1 for p in pods if _is_worker(p) and phase(p) == "Running")


def _safe_parse(raw: Any) -> Quantity | None:
    try:
        return parse_quantity(raw)
    except (QuantityError, TypeError):
        return None


def calculate_pod_resource(pod_spec: Mapping[str, Any]) -> dict[str, Quantity]:
    """CalculatePodResource: per container requests win, limits fill missing keys; summed."""
    total: dict[str, Quantity] = {}
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        merged: dict[str, Any] = dict(resources.get("requests") or {})
        for name, value in (resources.get("limits") or {}).items():
            merged.setdefault(name, value)
        for name, value in merged.items():
            quantity = _safe_parse(value)
            if quantity is None:
                continue
            total[name] = total[name].add(quantity) if name in total else quantity
    return total


def _add_into(total: dict[str, Quantity], resources: Mapping[str, Quantity]) -> None:
    for name, quantity in resources.items():
        total[name] = total.get(name, Quantity()).add(quantity)


def calculate_desired_resources(cluster: RayCluster) -> dict[str, Quantity]:
    """CalculateDesiredResources: head + sum(pod resources * replicas * numOfHosts), raw replicas,
    suspended groups skipped."""
    total: dict[str, Quantity] = {}
    head_spec = (cluster.spec.head_group_spec.template or {}).get("spec") or {}
    _add_into(total, calculate_pod_resource(head_spec))
    for group in cluster.spec.worker_group_specs or []:
        if is_group_suspended(group):
            continue
        count = max(group.replicas or 0, 0) * _num_of_hosts(group)
        pod_resource = calculate_pod_resource((group.template or {}).get("spec") or {})
        _add_into(total, {name: scale(q, count) for name, q in pod_resource.items()})
    return total


MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def is_gpu_resource_key(name: str) -> bool:
    """utils.IsGPUResourceKey: any name ending in "gpu" (nvidia.com/gpu, amd.com/gpu, ...) and the
    NVIDIA MIG profiles (nvidia.com/mig-1g.5gb, nvidia.com/mig-2g.32gb, ...)."""
    return name.endswith("gpu") or name.startswith(MIG_RESOURCE_PREFIX)


def sum_gpus(resources: Mapping[str, Quantity]) -> Quantity:
    """sumGPUs: every non-zero GPU resource (is_gpu_resource_key)."""
    total = Quantity()
    for name in sorted(resources):
        if is_gpu_resource_key(name) and not resources[name].is_zero():
            total = total.add(resources[name])
    return total
