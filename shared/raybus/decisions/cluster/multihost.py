"""reconcileMultiHostWorkerGroup (raycluster_controller.go, gate RayMultiHostIndexing).

A replica of a group with ``numOfHosts > 1`` is ``numOfHosts`` Pods sharing the label
``ray.io/worker-group-replica-name``; it is created, deleted and scaled as one unit:
1. an incomplete replica group (fewer Pods than hosts) is deleted entirely, then requeue;
2. an unhealthy Pod (shouldDeletePod) takes its whole replica group down, then requeue;
3. a Pod named in workersToDelete expands to its whole replica group, then requeue;
4. scale by whole replicas: new replicas get the lowest free ``ray.io/worker-group-replica-index``
   and hosts ``ray.io/replica-host-index`` 0..numOfHosts-1; scale-down removes whole replicas
   (only without autoscaler or with ENABLE_RANDOM_POD_DELETE).
Go iterates maps in random order; here iteration is sorted (or entropy-ordered for deletion).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from raybus.api.raycluster import WorkerGroupSpec
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.naming import random_suffix
from raybus.decisions.cluster.outcome import CREATED_WORKER_POD, DELETED_WORKER_POD, PodPlan, ReconcileError

if TYPE_CHECKING:
    Pod = Mapping[str, Any]


def next_free_index(used: set[int]) -> int:
    """Lowest replica index not in use (the "greedy fill" of createWorkerPodWithIndex)."""
    index = 0
    while index in used:
        index += 1
    return index


def replica_map(worker_pods: list[Pod]) -> dict[str, list[Pod]]:
    """Pods grouped by ray.io/worker-group-replica-name (unlabelled Pods are left out, as in Go)."""
    out: dict[str, list[Pod]] = {}
    for pod in worker_pods:
        replica = podutil.labels(pod).get(podutil.REPLICA_NAME_LABEL)
        if replica is not None:
            out.setdefault(replica, []).append(pod)
    return out


def _delete_pods(plan: PodPlan, pods: list[Pod], *, group: str, why: str) -> None:
    """deletePods helper: delete + ExpectScalePod(Delete) + event for each Pod."""
    for pod in pods:
        plan.delete_pod(
            pod,
            group=group,
            reason=f"Deleted Pod {podutil.name(pod)}: {why}",
            event_reason=DELETED_WORKER_POD,
        )


def reconcile_multi_host_worker_group(
    plan: PodPlan,
    group: WorkerGroupSpec,
    worker_pods: list[Pod],
    *,
    desired: int,
    random_delete: bool,
) -> ReconcileError | None:
    """reconcileMultiHostWorkerGroup: its four steps in order; the first that acts ends the round."""
    hosts = group.num_of_hosts or 1
    replicas = replica_map(worker_pods)
    return (_clean_up_incomplete(plan, group, replicas, hosts)
            or _delete_unhealthy(plan, group, worker_pods, replicas)
            or _workers_to_delete(plan, group, worker_pods, replicas)
            or _scale(plan, group, worker_pods, replicas, hosts=hosts, desired=desired, random_delete=random_delete))


def _clean_up_incomplete(plan: PodPlan, group: WorkerGroupSpec, replicas: dict[str, list[Pod]],
                         hosts: int) -> ReconcileError | None:
    """1. Clean up incomplete replica groups (atomicity: all hosts or none)."""
    for replica_name in sorted(replicas):
        pods = replicas[replica_name]
        if len(pods) < hosts:
            _delete_pods(plan, pods, group=group.group_name, why="cleanup of incomplete multi-host group")
            return ReconcileError(f"cleaned up incomplete replica group {replica_name}, requeueing")
    return None


def _delete_unhealthy(plan: PodPlan, group: WorkerGroupSpec, worker_pods: list[Pod],
                      replicas: dict[str, list[Pod]]) -> ReconcileError | None:
    """2. Unhealthy Pods take their whole replica group down."""
    name = group.group_name
    deleted: set[str] = set()
    deleted_groups = 0
    for pod in worker_pods:
        if podutil.name(pod) in deleted:
            continue
        should_delete, reason = podutil.should_delete_pod(pod, podutil.WORKER_NODE)
        if should_delete:
            label = podutil.labels(pod).get(podutil.REPLICA_NAME_LABEL)
            members = replicas.get(label, [pod]) if label is not None else [pod]
            _delete_pods(plan, members, group=name, why=reason)
            deleted.update(podutil.name(p) for p in members)
            deleted_groups += 1
    if deleted_groups:
        return ReconcileError(f"deleted {deleted_groups} unhealthy multi-host replica groups in {name}")
    return None


def _workers_to_delete(plan: PodPlan, group: WorkerGroupSpec, worker_pods: list[Pod],
                       replicas: dict[str, list[Pod]]) -> ReconcileError | None:
    """3. workersToDelete expands to whole replica groups."""
    name = group.group_name
    to_delete = list((group.scale_strategy.workers_to_delete if group.scale_strategy else None) or [])
    if not to_delete:
        return None
    by_name = {podutil.name(p): p for p in worker_pods}
    victims: dict[str, Pod] = {}
    for pod_name in to_delete:
        target = by_name.get(pod_name)
        if target is None:
            continue
        target_replica = podutil.labels(target).get(podutil.REPLICA_NAME_LABEL)
        for member in replicas.get(target_replica, [target]) if target_replica is not None else [target]:
            victims[podutil.name(member)] = member
    plan.cleared_workers_to_delete.append(name)
    if not victims:
        return None
    _delete_pods(plan, [victims[k] for k in sorted(victims)], group=name, why="autoscaler scale-down request")
    return ReconcileError(f"deleted {len(victims)} Pods of worker group {name} requested by workersToDelete")


def _scale(plan: PodPlan, group: WorkerGroupSpec, worker_pods: list[Pod], replicas: dict[str, list[Pod]], *,
           hosts: int, desired: int, random_delete: bool) -> ReconcileError | None:
    """4. Scale by whole replica groups."""
    name = group.group_name
    valid = {r: pods for r, pods in replicas.items() if len(pods) >= hosts}
    if desired % hosts != 0:
        return ReconcileError(
            f"desired worker pods ({desired}) is not a multiple of NumOfHosts ({hosts}) for group {name}"
        )
    to_create = desired // hosts - len(valid)
    # Deviation: Pods without a replica-name label (created before RayMultiHostIndexing was on) are
    # ignored by KubeRay here, which can then overshoot the desired Pod count; they still use budget.
    budget = max(0, desired - len(worker_pods)) // hosts
    to_create = min(to_create, budget) if to_create > 0 else to_create
    plan.log(f"multi-host worker group {name}: desired replicas={desired // hosts} running={len(valid)}")
    if to_create > 0:
        _create_replicas(plan, group, valid, hosts=hosts, count=to_create)
    elif to_create < 0:
        if random_delete:
            order = sorted(valid, key=lambda r: (random_suffix(plan.entropy, "delete-replica/" + r, 8), r))
            for replica_name in order[:-to_create]:
                _delete_pods(plan, valid[replica_name], group=name, why="scaling down")
        else:
            plan.log(
                "Random Pod deletion is disabled for the cluster. The only decision-maker for Pod deletions "
                "is Autoscaler."
            )
    return None


def _create_replicas(plan: PodPlan, group: WorkerGroupSpec, valid: dict[str, list[Pod]], *, hosts: int,
                     count: int) -> None:
    from raybus.decisions.cluster.pods import build_worker  # cycle: pods imports this module

    name = group.group_name
    used: set[int] = set()
    for pods in valid.values():
        for pod in pods:
            raw = podutil.labels(pod).get(podutil.REPLICA_INDEX_LABEL)
            if raw is not None and raw.isdigit():
                used.add(int(raw))
    for i in range(count):
        index = next_free_index(used)
        used.add(index)
        replica_name = plan.names.allocate(f"{name}-", f"replica/{name}/{i}")
        for host in range(hosts):
            pod = build_worker(
                plan,
                group,
                key=f"{name}/{i}/{host}",
                replica_group_name=replica_name,
                replica_index=index,
                host_index=host,
            )
            plan.create_pod(
                pod,
                group=name,
                event_reason=CREATED_WORKER_POD,
                reason=f"Scaling up multi-host group {name}: replica {replica_name} host {host}",
            )
