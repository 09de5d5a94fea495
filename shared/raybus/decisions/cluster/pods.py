"""reconcilePods (``ray-operator/controllers/ray/raycluster_controller.go``) as a pure planner.

Order and early returns follow KubeRay: suspend -> Recreate upgrade -> head Pod -> worker groups
(expectations, group suspend, multi-host, unhealthy deletion, workersToDelete, diff). Every Pod
create/delete is paired with an ExpectScalePod on the returned expectations.

Deliberate differences (all documented in the report):
- more than one head Pod is an error without deleting any (v1.7 behaviour, not the v1.2 cleanup);
- "random" scale-down deletion picks Pods in an order derived from the entropy, so reruns agree;
- workersToDelete is cleared with a merge patch of the CR (returned as group names; the patch itself
  is built by ``reconcile.py``) instead of KubeRay's in-memory reset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from raybus.api.raycluster import RayCluster, RayClusterConditionType, RayClusterUpgradeType, WorkerGroupSpec
from raybus.decisions.batches import BatchState
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.expectations import HEAD_GROUP, ScaleExpectations, clear_expectations
from raybus.decisions.cluster.hashing import KUBERAY_VERSION_KEY, UPGRADE_STRATEGY_RECREATE_HASH_KEY
from raybus.decisions.cluster.multihost import next_free_index, reconcile_multi_host_worker_group
from raybus.decisions.cluster.naming import NameAllocator, random_suffix
from raybus.decisions.cluster.outcome import (
    CREATED_HEAD_POD,
    CREATED_WORKER_POD,
    DELETED_HEAD_POD,
    DELETED_POD,
    DELETED_WORKER_POD,
    PodPlan,
    ReconcileError,
    pod_ref,
)
from raybus.decisions.cluster.pod_manifest import (
    cluster_spec_hash,
    head_pod_manifest,
    kuberay_version,
    worker_pod_manifest,
)
from raybus.decisions.cluster.pod_template import head_pod_name_prefix, worker_pod_name_prefix
from raybus.decisions.cluster.replicas import worker_group_desired_pods
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, PatchObject

# utils.DisableProvisionedHeadRestartAnnotationKey
DISABLE_PROVISIONED_HEAD_RESTART = "ray.io/disable-provisioned-head-restart"


@dataclass(frozen=True)
class PodsOutcome:
    commands: list[Command]
    expectations: ScaleExpectations
    reasons: list[str]
    error: ReconcileError | None
    cleared_workers_to_delete: list[str]


def _condition_true(cluster: RayCluster, cond_type: str) -> bool:
    for cond in (cluster.status.conditions if cluster.status else None) or []:
        if cond.type == cond_type and cond.status == "True":
            return True
    return False


def find_suspend_status(cluster: RayCluster) -> str:
    """utils.FindRayClusterSuspendStatus: "RayClusterSuspending" / "RayClusterSuspended" / ""."""
    for cond in (cluster.status.conditions if cluster.status else None) or []:
        if cond.type in (RayClusterConditionType.SUSPENDING, RayClusterConditionType.SUSPENDED) and (
            cond.status == "True"
        ):
            return cond.type
    return ""


def _suspend_stop(cluster: RayCluster, settings: OperatorSettings) -> str | None:
    """reconcilePods' suspend checks: why it stops ("delete": delete every Pod first), or None."""
    suspend_status = find_suspend_status(cluster)
    gate = settings.feature_gates.ray_cluster_status_conditions
    if suspend_status == RayClusterConditionType.SUSPENDING or (not gate and cluster.spec.suspend):
        return "delete"
    if gate and suspend_status == RayClusterConditionType.SUSPENDED:
        return "cluster is suspended; stop reconcilePods"
    if gate and cluster.spec.suspend:
        return "cluster is going to suspend; stop reconcilePods"
    return None


def pods_may_be_reconciled(cluster: RayCluster, settings: OperatorSettings) -> bool:
    """Whether reconcilePods gets past its suspend checks (where KubeRay calls the batch scheduler)."""
    return _suspend_stop(cluster, settings) is None


def is_autoscaling_enabled(cluster: RayCluster) -> bool:
    """utils.IsAutoscalingEnabled."""
    return bool(cluster.spec.enable_in_tree_autoscaling)


def random_delete_enabled(cluster: RayCluster, settings: OperatorSettings) -> bool:
    """Scale-down without WorkersToDelete: always without autoscaler, else ENABLE_RANDOM_POD_DELETE."""
    if not is_autoscaling_enabled(cluster):
        return True
    return settings.enable_random_pod_delete


def entropy_order(items: list[Mapping[str, Any]], entropy: str) -> list[Mapping[str, Any]]:
    """Stable pseudo-random order (stands in for the informer's arbitrary list order)."""
    return sorted(
        items, key=lambda p: (random_suffix(entropy, "delete/" + podutil.name(p), 8), podutil.name(p))
    )


def _should_recreate_pods_for_upgrade(plan: PodPlan, cluster_hash: str) -> bool:
    """shouldRecreatePodsForUpgrade (the version-skip annotation Update becomes a Pod merge patch)."""
    strategy = plan.cluster.spec.upgrade_strategy
    if strategy is None or strategy.type != RayClusterUpgradeType.RECREATE:
        return False
    heads = podutil.head_pods(plan.pods)
    if not heads:
        return False
    head = heads[0]
    ours = kuberay_version(plan.settings)
    pod_version = podutil.annotations_of(head).get(KUBERAY_VERSION_KEY, "")
    if pod_version and pod_version != ours:
        plan.commands.append(
            PatchObject(
                reason=f"KubeRay version changed ({pod_version} -> {ours}); re-stamp the head Pod hash "
                "instead of recreating Pods",
                target=pod_ref(head, plan.namespace),
                merge_patch={
                    "metadata": {
                        "annotations": {
                            UPGRADE_STRATEGY_RECREATE_HASH_KEY: cluster_hash,
                            KUBERAY_VERSION_KEY: ours,
                        }
                    }
                },
            )
        )
        return False
    actual = podutil.annotations_of(head).get(UPGRADE_STRATEGY_RECREATE_HASH_KEY, "")
    return bool(actual) and actual != cluster_hash


def _build_head(plan: PodPlan, cluster_hash: str) -> dict[str, Any]:
    """createHeadPod: a name chosen (reused after a create that did not happen), then the manifest."""
    prefix = head_pod_name_prefix(plan.cluster, settings=plan.settings)
    if plan.settings.enable_deterministic_head_pod_name:
        name = prefix  # ENABLE_DETERMINISTIC_HEAD_POD_NAME: "<cluster>-head", no suffix
        plan.names.reserve(name)
    else:
        name = plan.reuse_name(HEAD_GROUP) or plan.names.allocate(prefix, "head")
    return head_pod_manifest(plan.cluster, settings=plan.settings, name=name, cluster_hash=cluster_hash)


def build_worker(
    plan: PodPlan,
    group: WorkerGroupSpec,
    *,
    key: str,
    replica_group_name: str | None = None,
    replica_index: int | None = None,
    host_index: int | None = None,
) -> dict[str, Any]:
    """createWorkerPod / createWorkerPodWithIndex: build the manifest with a chosen name (one whose
    earlier create did not happen first, so a retried or uncertain create cannot duplicate)."""
    name = plan.reuse_name(group.group_name) or plan.names.allocate(
        worker_pod_name_prefix(plan.cluster, group), key
    )
    return worker_pod_manifest(plan.cluster, group, settings=plan.settings, name=name,
                               replica_group_name=replica_group_name, replica_index=replica_index,
                               host_index=host_index)


def _reconcile_head(plan: PodPlan, cluster_hash: str) -> ReconcileError | None | bool:
    """Head Pod part. Returns an error, True to stop reconcilePods without error, or None."""
    heads = podutil.head_pods(plan.pods)
    if not plan.satisfied(HEAD_GROUP):
        plan.log("NotSatisfiedHeadExpectations, reconcile head later")
        return None
    if len(heads) == 1:
        head = heads[0]
        should_delete, reason = podutil.should_delete_pod(head, podutil.HEAD_NODE)
        plan.log(f"head Pod {podutil.name(head)} shouldDelete={should_delete}: {reason}")
        if should_delete:
            plan.delete_pod(head, group=HEAD_GROUP, reason=reason, event_reason=DELETED_HEAD_POD)
            return ReconcileError(reason)
        return None
    if not heads:
        if _condition_true(plan.cluster, RayClusterConditionType.PROVISIONED) and (
            (plan.cluster.metadata.annotations or {}).get(DISABLE_PROVISIONED_HEAD_RESTART) == "true"
        ):
            plan.log("head Pod is gone but the cluster is provisioned and head restart is disabled; skipping")
            return True
        pod = _build_head(plan, cluster_hash)
        plan.create_pod(
            pod,
            group=HEAD_GROUP,
            reason=f"Found 0 head Pods; creating head Pod {pod['metadata']['name']}",
            event_reason=CREATED_HEAD_POD,
        )
        return None
    names = sorted(podutil.name(p) for p in heads)
    return ReconcileError(f"{len(heads)} head pods found {names}. Please delete extra head pods")


def _reconcile_worker_group(plan: PodPlan, group: WorkerGroupSpec) -> ReconcileError | None:
    """reconcilePods' loop body for one worker group: expectations, suspend, multi-host, unhealthy
    Pods, workersToDelete, then scale to the desired replicas."""
    name = group.group_name
    if not plan.satisfied(name):
        plan.log(f"worker group {name}: NotSatisfiedGroupExpectations, reconcile the group later")
        return None
    desired = worker_group_desired_pods(group)
    worker_pods = podutil.group_pods(plan.pods, name)
    if group.suspend:
        deleted = plan.delete_all(
            worker_pods,
            reason=f"Deleted all Pods of suspended worker group {name}",
            event_reason=DELETED_WORKER_POD,
        )
        plan.log(f"worker group {name} is suspended; deleting {deleted} Pods")
        return None
    hosts = group.num_of_hosts or 1
    if hosts > 1 and plan.settings.feature_gates.ray_multi_host_indexing:
        return reconcile_multi_host_worker_group(
            plan,
            group,
            worker_pods,
            desired=desired,
            random_delete=random_delete_enabled(plan.cluster, plan.settings),
        )
    deleted_workers: set[str] = set()
    unhealthy = 0
    for pod in worker_pods:
        should_delete, reason = podutil.should_delete_pod(pod, podutil.WORKER_NODE)
        if should_delete:
            unhealthy += 1
            deleted_workers.add(podutil.name(pod))
            plan.delete_pod(pod, group=name, reason=reason, event_reason=DELETED_WORKER_POD)
    if unhealthy:
        return ReconcileError(f"delete {unhealthy} unhealthy worker Pods")
    deleted_workers |= _delete_workers_to_delete(plan, group)
    running = [p for p in worker_pods if podutil.name(p) not in deleted_workers]
    diff = desired - len(running)
    plan.log(f"worker group {name}: desired={desired} running={len(running)} diff={diff}")
    if diff > 0:
        _scale_up(plan, group, running, diff)
    elif diff < 0:
        _scale_down(plan, group, running, -diff)
    return None


def _delete_workers_to_delete(plan: PodPlan, group: WorkerGroupSpec) -> set[str]:
    """Always remove the specified WorkersToDelete - regardless of the value of Replicas."""
    name = group.group_name
    to_delete = list((group.scale_strategy.workers_to_delete if group.scale_strategy else None) or [])
    by_name = {podutil.name(p): p for p in plan.pods if not podutil.is_head(p)}
    deleted: set[str] = set()
    for victim in to_delete:
        target = by_name.get(victim)
        if target is None:
            plan.log(f"worker group {name}: workersToDelete Pod {victim} has already been deleted")
            continue
        deleted.add(victim)
        plan.delete_pod(
            target,
            group=name,
            reason=f"Deleted Pod {victim} listed in workersToDelete",
            event_reason=DELETED_WORKER_POD,
        )
    if to_delete:
        plan.cleared_workers_to_delete.append(name)
    return deleted


def _scale_up(plan: PodPlan, group: WorkerGroupSpec, running: list[podutil.Pod], diff: int) -> None:
    name = group.group_name
    indexing = plan.settings.feature_gates.ray_multi_host_indexing
    used: set[int] = set()
    for pod in running:
        raw = podutil.labels(pod).get(podutil.REPLICA_INDEX_LABEL)
        if raw is not None and raw.isdigit():
            used.add(int(raw))
    for i in range(diff):
        if indexing:
            # createWorkerPodWithIndex: a single-host replica only gets the lowest free index.
            index = next_free_index(used)
            used.add(index)
            pod = build_worker(plan, group, key=f"{name}/{i}", replica_index=index, host_index=0)
        else:
            pod = build_worker(plan, group, key=f"{name}/{i}")
        plan.create_pod(
            pod,
            group=name,
            reason=f"Scaling up worker group {name} ({i + 1}/{diff})",
            event_reason=CREATED_WORKER_POD,
        )


def _scale_down(plan: PodPlan, group: WorkerGroupSpec, running: list[podutil.Pod], excess: int) -> None:
    """Only with ENABLE_RANDOM_POD_DELETE; otherwise the autoscaler decides which Pods go."""
    if not random_delete_enabled(plan.cluster, plan.settings):
        plan.log(
            "Random Pod deletion is disabled for the cluster. The only decision-maker for Pod deletions "
            "is Autoscaler."
        )
        return
    name = group.group_name
    for pod in entropy_order(running, plan.entropy)[:excess]:
        plan.delete_pod(
            pod,
            group=name,
            reason=f"Scaling down worker group {name}: randomly deleting Pod {podutil.name(pod)}",
            event_reason=DELETED_WORKER_POD,
        )


def reconcile_pods(
    cluster: RayCluster,
    *,
    pods: list[Mapping[str, Any]],
    expectations: ScaleExpectations,
    settings: OperatorSettings,
    now: datetime,
    entropy: str,
    batch_id: str = "",
    batches: dict[str, BatchState] | None = None,
    pods_watermark: int | None = None,
) -> PodsOutcome:
    """reconcilePods on a defaulted cluster. Pure: returns commands + updated expectations."""
    plan = PodPlan(
        cluster=cluster,
        pods=list(pods),
        settings=settings,
        now=now,
        entropy=entropy,
        expectations=expectations,
        batch_id=batch_id,
        batches=batches,
        pods_watermark=pods_watermark,
        names=NameAllocator(
            entropy=entropy,
            taken=[podutil.name(p) for p in pods]
            + [
                podutil.labels(p)[podutil.REPLICA_NAME_LABEL]
                for p in pods
                if podutil.REPLICA_NAME_LABEL in podutil.labels(p)
            ],
        ),
    )
    error = _reconcile_pods(plan)
    return PodsOutcome(
        commands=plan.commands,
        expectations=plan.expectations,
        reasons=plan.reasons,
        error=error,
        cleared_workers_to_delete=plan.cleared_workers_to_delete,
    )


def _reconcile_pods(plan: PodPlan) -> ReconcileError | None:
    cluster = plan.cluster
    cluster_hash = cluster_spec_hash(cluster)
    stop = _suspend_stop(cluster, plan.settings)
    if stop == "delete":
        deleted = plan.delete_all(
            plan.pods,
            reason=f"Deleted Pods for RayCluster {plan.namespace}/{cluster.name} due to suspension",
            event_reason=DELETED_POD,
        )
        plan.log(f"suspending: deleting {deleted} active Pods")
        return None
    if stop is not None:
        plan.log(stop)
        return None

    if _should_recreate_pods_for_upgrade(plan, cluster_hash):
        deleted = plan.delete_all(
            plan.pods,
            reason="RayCluster spec changed with upgradeStrategy Recreate; deleting all Pods",
            event_reason=DELETED_POD,
        )
        plan.expectations = clear_expectations()
        plan.log(f"Recreate upgrade: deleting {deleted} Pods")
        return None

    head_result = _reconcile_head(plan, cluster_hash)
    if isinstance(head_result, ReconcileError):
        return head_result
    if head_result is True:
        return None

    for group in cluster.spec.worker_group_specs or []:
        error = _reconcile_worker_group(plan, group)
        if error is not None:
            return error
    return None
