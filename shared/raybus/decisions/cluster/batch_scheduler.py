"""KubeRay's batch scheduler plugins (``controllers/ray/batchscheduler``), chosen by the operator's
``--batch-scheduler`` flag (``OperatorSettings.batch_scheduler``).

Every plugin has two hooks KubeRay calls from reconcilePods / createHeadPod / createWorkerPod:

- ``DoBatchSchedulingOnSubmission`` (before any Pod is reconciled; an error stops reconcilePods):
  volcano keeps a PodGroup ``ray-<cluster>-pg`` in sync (created, or updated when minMember /
  minResources / subGroupPolicy changed); scheduler-plugins creates a PodGroup ``<cluster>`` once when
  the cluster has the ``ray.io/gang-scheduling-enabled`` label; yunikorn needs nothing up front.
- ``AddMetadataToChildResource`` on every Pod it creates: labels, annotations and schedulerName.

KubeRay creates the PodGroup synchronously and only then the Pods; raybus's create is asynchronous,
so a round that has to create the PodGroup creates no Pod: they follow once the PodGroup is seen
(the watcher's PodGroup event wakes the cluster), so no gang member ever exists without its gang.
KubeRay refuses to start when the PodGroup CRD is missing (volcano, older releases) or fails every
reconcile (newer ones); raybus records a clear Warning Event naming the missing CRD and retries
with the controller's backoff, so installing the CRD later recovers.
The gang PodGroups of RayJob-created clusters belong to the RayJob controller (skipped here).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from raybus.api.raycluster import RayCluster, WorkerGroupSpec
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.outcome import cluster_ref
from raybus.decisions.cluster.pod_parts import owner_reference
from raybus.decisions.cluster.quantity import Quantity, QuantityError, format_quantity, parse_quantity, scale
from raybus.decisions.cluster.replicas import (
    calculate_desired_replicas,
    calculate_desired_resources,
    calculate_min_replicas,
    calculate_pod_resource,
    is_group_suspended,
    worker_group_desired_pods,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, ObjectRef, PatchObject, RecordEvent, merge_patch

VOLCANO = "volcano"
YUNIKORN = "yunikorn"
SCHEDULER_PLUGINS = "scheduler-plugins"

# volcano_scheduler.go
VOLCANO_POD_GROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"
VOLCANO_QUEUE_NAME_LABEL_KEY = "volcano.sh/queue-name"
VOLCANO_NETWORK_TOPOLOGY_MODE_LABEL_KEY = "volcano.sh/network-topology-mode"
VOLCANO_NETWORK_TOPOLOGY_HIGHEST_TIER_LABEL_KEY = "volcano.sh/network-topology-highest-tier-allowed"
VOLCANO_GROUP_NAME_ANNOTATION_KEY = "scheduling.k8s.io/group-name"  # v1beta1.KubeGroupNameAnnotationKey
VOLCANO_TASK_SPEC_ANNOTATION_KEY = "volcano.sh/task-spec"  # batch/v1alpha1.TaskSpecKey
RAY_PRIORITY_CLASS_NAME_LABEL_KEY = "ray.io/priority-class-name"  # utils.RayPriorityClassName
# scheduler_plugins.go
SCHEDULER_PLUGINS_POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
SCHEDULER_PLUGINS_SCHEDULER_NAME = "scheduler-plugins-scheduler"
SCHEDULER_PLUGINS_POD_GROUP_LABEL_KEY = "scheduling.x-k8s.io/pod-group"
# yunikorn_scheduler.go
YUNIKORN_POD_APPLICATION_ID_LABEL = "applicationId"
YUNIKORN_POD_QUEUE_LABEL = "queue"
YUNIKORN_APP_ID_LABEL = "yunikorn.apache.org/app-id"
YUNIKORN_QUEUE_LABEL = "yunikorn.apache.org/queue"
YUNIKORN_TASK_GROUP_NAME_ANNOTATION = "yunikorn.apache.org/task-group-name"
YUNIKORN_TASK_GROUPS_ANNOTATION = "yunikorn.apache.org/task-groups"
# utils.RayClusterGangSchedulingEnabled
GANG_SCHEDULING_ENABLED_LABEL = "ray.io/gang-scheduling-enabled"
FAILED_TO_CREATE_POD_GROUP = "FailedToCreatePodGroup"

_POD_GROUP_CRDS = {
    VOLCANO: "podgroups.scheduling.volcano.sh",
    SCHEDULER_PLUGINS: "podgroups.scheduling.x-k8s.io",
}
_POD_GROUP_API_VERSIONS = {
    VOLCANO: VOLCANO_POD_GROUP_API_VERSION,
    SCHEDULER_PLUGINS: SCHEDULER_PLUGINS_POD_GROUP_API_VERSION,
}


def pod_group_api_version(scheduler: str) -> str | None:
    """The PodGroup apiVersion a scheduler keeps (None: it needs none)."""
    return _POD_GROUP_API_VERSIONS.get(scheduler)


def pod_group_crd(scheduler: str) -> str | None:
    return _POD_GROUP_CRDS.get(scheduler)


def _labels(cluster: RayCluster) -> dict[str, str]:
    return dict(cluster.metadata.labels or {})


def gang_scheduling_enabled(cluster: RayCluster) -> bool:
    """isGangSchedulingEnabled: the label is present (any value)."""
    return GANG_SCHEDULING_ENABLED_LABEL in _labels(cluster)


def _originated_from_ray_job(cluster: RayCluster) -> bool:
    return _labels(cluster).get(k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY) == k.RAY_JOB_CRD


def volcano_pod_group_name(cluster: RayCluster) -> str:
    """getAppPodGroupName: ``ray-<name>-pg``, the RayJob's name for a RayJob-created cluster."""
    name = cluster.name
    labels = _labels(cluster)
    if _originated_from_ray_job(cluster) and labels.get(k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY):
        name = labels[k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY]
    return f"ray-{name}-pg"


def _hosts(group: WorkerGroupSpec) -> int:
    return group.num_of_hosts if group.num_of_hosts and group.num_of_hosts > 0 else 1


def calculate_min_resources(cluster: RayCluster) -> dict[str, Quantity]:
    """utils.CalculateMinResources: head + sum(pod resources * minReplicas * numOfHosts), suspended
    groups skipped."""
    total: dict[str, Quantity] = {}

    def add(resources: dict[str, Quantity]) -> None:
        for name, quantity in resources.items():
            total[name] = total.get(name, Quantity()).add(quantity)

    add(calculate_pod_resource((cluster.spec.head_group_spec.template or {}).get("spec") or {}))
    for group in cluster.spec.worker_group_specs or []:
        if is_group_suspended(group):
            continue
        count = max(group.min_replicas or 0, 0) * _hosts(group)
        pod = calculate_pod_resource((group.template or {}).get("spec") or {})
        add({name: scale(q, count) for name, q in pod.items()})
    return total


def _resource_list(resources: dict[str, Quantity]) -> dict[str, str]:
    return {name: format_quantity(q) for name, q in sorted(resources.items())}


def _volcano_params(cluster: RayCluster) -> tuple[int, dict[str, str]]:
    """calculatePodGroupParams: desired (no autoscaler) or minimum (autoscaler) members/resources."""
    if not cluster.spec.enable_in_tree_autoscaling:
        return calculate_desired_replicas(cluster) + 1, _resource_list(calculate_desired_resources(cluster))
    return calculate_min_replicas(cluster) + 1, _resource_list(calculate_min_resources(cluster))


def volcano_sub_group_policy(cluster: RayCluster, settings: OperatorSettings) -> list[dict[str, Any]] | None:
    """calculateSubGroupPolicy: one subgroup per logical replica (gate RayMultiHostIndexing), unless
    the cluster configures a whole-PodGroup network topology."""
    if not settings.feature_gates.ray_multi_host_indexing:
        return None
    if VOLCANO_NETWORK_TOPOLOGY_MODE_LABEL_KEY in _labels(cluster):
        return None
    policy: list[dict[str, Any]] = [
        {
            "name": k.RAY_NODE_HEAD_GROUP_LABEL_VALUE,
            "subGroupSize": 1,
            "minSubGroups": 1,
            "labelSelector": {"matchLabels": {k.RAY_NODE_GROUP_LABEL_KEY: k.RAY_NODE_HEAD_GROUP_LABEL_VALUE}},
            "matchLabelKeys": [k.RAY_NODE_GROUP_LABEL_KEY],
        }
    ]
    for group in cluster.spec.worker_group_specs or []:
        if is_group_suspended(group):
            continue
        hosts = _hosts(group)
        if cluster.spec.enable_in_tree_autoscaling:
            min_sub_groups = group.min_replicas or 0
        else:
            min_sub_groups = worker_group_desired_pods(group) // hosts
        key = k.RAY_WORKER_REPLICA_NAME_KEY if hosts > 1 else k.RAY_WORKER_REPLICA_INDEX_KEY
        policy.append(
            {
                "name": group.group_name,
                "subGroupSize": hosts,
                "minSubGroups": min_sub_groups,
                "labelSelector": {"matchLabels": {k.RAY_NODE_GROUP_LABEL_KEY: group.group_name}},
                "matchLabelKeys": [key],
            }
        )
    return policy


def build_volcano_pod_group(cluster: RayCluster, *, settings: OperatorSettings) -> dict[str, Any]:
    """createPodGroup (volcano): owned by the RayCluster, the cluster's annotations copied, queue /
    priority class / network topology from its labels."""
    labels = _labels(cluster)
    min_member, min_resources = _volcano_params(cluster)
    spec: dict[str, Any] = {"minMember": min_member, "minResources": min_resources}
    sub_groups = volcano_sub_group_policy(cluster, settings)
    if sub_groups is not None:
        spec["subGroupPolicy"] = sub_groups
    if VOLCANO_NETWORK_TOPOLOGY_MODE_LABEL_KEY in labels:
        topology: dict[str, Any] = {"mode": labels[VOLCANO_NETWORK_TOPOLOGY_MODE_LABEL_KEY]}
        tier = labels.get(VOLCANO_NETWORK_TOPOLOGY_HIGHEST_TIER_LABEL_KEY)
        if tier is not None:
            try:
                topology["highestTierAllowed"] = int(tier)
            except ValueError:
                raise ValueError(
                    f"failed to convert {VOLCANO_NETWORK_TOPOLOGY_HIGHEST_TIER_LABEL_KEY} label to int: {tier!r} "
                    f"for podgroup {volcano_pod_group_name(cluster)} in namespace {cluster.namespace}"
                ) from None
        spec["networkTopology"] = topology
    if VOLCANO_QUEUE_NAME_LABEL_KEY in labels:
        spec["queue"] = labels[VOLCANO_QUEUE_NAME_LABEL_KEY]
    if RAY_PRIORITY_CLASS_NAME_LABEL_KEY in labels:
        spec["priorityClassName"] = labels[RAY_PRIORITY_CLASS_NAME_LABEL_KEY]
    return {
        "apiVersion": VOLCANO_POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": volcano_pod_group_name(cluster),
            "namespace": cluster.namespace,
            "ownerReferences": [owner_reference(cluster)],
            "annotations": dict(cluster.metadata.annotations or {}),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def build_scheduler_plugins_pod_group(cluster: RayCluster) -> dict[str, Any]:
    """createPodGroup (scheduler-plugins): ``<cluster>``, desired members + resources, a plain owner
    reference (not a controller one, as KubeRay writes it)."""
    return {
        "apiVersion": SCHEDULER_PLUGINS_POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": cluster.name,
            "namespace": cluster.namespace,
            "ownerReferences": [
                {
                    "apiVersion": k.RAY_API_VERSION,
                    "kind": k.RAY_CLUSTER_KIND,
                    "name": cluster.name,
                    "uid": cluster.metadata.uid or "",
                }
            ],
        },
        "spec": {
            "minMember": calculate_desired_replicas(cluster) + 1,  # + the head Pod
            "minResources": _resource_list(calculate_desired_resources(cluster)),
        },
    }


def _quantities_equal(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """quotav1.Equals: same keys, equal quantities."""
    a, b = a or {}, b or {}
    if set(a) != set(b):
        return False
    try:
        return all(parse_quantity(a[key]).value == parse_quantity(b[key]).value for key in a)
    except (QuantityError, TypeError):
        return a == b


def _pod_group_ref(pod_group: dict[str, Any], namespace: str) -> ObjectRef:
    return ObjectRef.of(pod_group, api_version=str(pod_group.get("apiVersion") or VOLCANO_POD_GROUP_API_VERSION),
                        kind="PodGroup", namespace=namespace)


def reconcile_pod_group(
    cluster: RayCluster, *, existing: list[dict[str, Any]], settings: OperatorSettings
) -> list[Command]:
    """DoBatchSchedulingOnSubmission for the configured scheduler (no Event: KubeRay only logs)."""
    scheduler = settings.batch_scheduler
    by_name = {podutil.name(p): p for p in existing}
    if scheduler == SCHEDULER_PLUGINS:
        if not gang_scheduling_enabled(cluster) or cluster.name in by_name:
            return []
        desired = build_scheduler_plugins_pod_group(cluster)
        return [CreateObject(reason=f"Created PodGroup {cluster.namespace}/{cluster.name}", object=desired)]
    if scheduler != VOLCANO or _originated_from_ray_job(cluster):
        return []
    desired = build_volcano_pod_group(cluster, settings=settings)
    name = podutil.name(desired)
    current = by_name.get(name)
    if current is None:
        return [CreateObject(reason=f"Created PodGroup {cluster.namespace}/{name}", object=desired)]
    have, want = current.get("spec") or {}, desired["spec"]
    if (
        have.get("minMember") == want["minMember"]
        and _quantities_equal(have.get("minResources"), want["minResources"])
        and have.get("subGroupPolicy") == want.get("subGroupPolicy")
    ):
        return []
    patch = {
        "spec": {
            "minMember": want["minMember"],
            "minResources": merge_patch(have.get("minResources") or {}, want["minResources"]),
            "subGroupPolicy": want.get("subGroupPolicy"),
        }
    }
    return [
        PatchObject(
            reason=f"Updated PodGroup {cluster.namespace}/{name}: minMember {have.get('minMember')} -> "
            f"{want['minMember']}",
            target=_pod_group_ref(current, cluster.namespace),
            merge_patch=patch,
        )
    ]


def _task_groups(cluster: RayCluster) -> str:
    """newTaskGroupsFromApp + marshal: Go's json.Marshal of []TaskGroup (field order, sorted maps)."""
    groups: list[dict[str, Any]] = []

    def group(name: str, min_member: int, spec: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"minResource": _resource_list(calculate_pod_resource(spec))}
        if spec.get("nodeSelector"):
            out["nodeSelector"] = dict(sorted(spec["nodeSelector"].items()))
        if spec.get("affinity"):
            out["affinity"] = spec["affinity"]
        out["name"] = name
        if spec.get("tolerations"):
            out["tolerations"] = spec["tolerations"]
        out["minMember"] = min_member
        return out

    head_spec = (cluster.spec.head_group_spec.template or {}).get("spec") or {}
    groups.append(group(k.RAY_NODE_HEAD_GROUP_LABEL_VALUE, 1, head_spec))
    for worker in cluster.spec.worker_group_specs or []:
        spec = (worker.template or {}).get("spec") or {}
        groups.append(group(worker.group_name, (worker.min_replicas or 0) * _hosts(worker), spec))
    return json.dumps(groups, separators=(",", ":"))


def add_scheduler_metadata(
    cluster: RayCluster, pod: dict[str, Any], *, group_name: str, settings: OperatorSettings
) -> dict[str, Any]:
    """AddMetadataToChildResource for the configured scheduler; returns a new manifest."""
    scheduler = settings.batch_scheduler
    if not scheduler:
        return pod
    out = dict(pod)
    meta = dict(out.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    spec = dict(out.get("spec") or {})
    source = _labels(cluster)
    if scheduler == VOLCANO:
        for key in (VOLCANO_QUEUE_NAME_LABEL_KEY, RAY_PRIORITY_CLASS_NAME_LABEL_KEY):
            if source.get(key):
                labels[key] = source[key]
        annotations[VOLCANO_GROUP_NAME_ANNOTATION_KEY] = volcano_pod_group_name(cluster)
        annotations[VOLCANO_TASK_SPEC_ANNOTATION_KEY] = group_name
        spec["schedulerName"] = VOLCANO
    elif scheduler == YUNIKORN:
        # The cluster's yunikorn.apache.org/{app-id,queue} labels become the legacy Pod labels.
        for source_key, target_key in (
            (YUNIKORN_APP_ID_LABEL, YUNIKORN_POD_APPLICATION_ID_LABEL),
            (YUNIKORN_QUEUE_LABEL, YUNIKORN_POD_QUEUE_LABEL),
        ):
            if source_key in source:
                labels[target_key] = source[source_key]
        spec["schedulerName"] = YUNIKORN
        if gang_scheduling_enabled(cluster):
            annotations[YUNIKORN_TASK_GROUPS_ANNOTATION] = _task_groups(cluster)
            annotations[YUNIKORN_TASK_GROUP_NAME_ANNOTATION] = group_name
    elif scheduler == SCHEDULER_PLUGINS:
        if gang_scheduling_enabled(cluster):
            labels[SCHEDULER_PLUGINS_POD_GROUP_LABEL_KEY] = cluster.name
        spec["schedulerName"] = SCHEDULER_PLUGINS_SCHEDULER_NAME
    meta["labels"] = labels
    meta["annotations"] = annotations
    out["metadata"] = meta
    out["spec"] = spec
    return out


def pod_group_failure_events(
    cluster: RayCluster, failures: Iterable[tuple[str | None, str]], *, settings: OperatorSettings
) -> list[Command]:
    """A Warning for the previous round's failed PodGroup write ((target, message) pairs), naming the
    CRD when the API server does not know the resource (404 NotFound)."""
    scheduler = settings.batch_scheduler
    crd = pod_group_crd(scheduler)
    events: list[Command] = []
    for target, message in failures:
        if not target or not target.startswith("PodGroup/"):
            continue
        where = target.split("/", 1)[1]
        text = f"Failed to create PodGroup {where} for batch scheduler {scheduler}: {message}"
        if crd and "NotFound" in message:
            text += (
                f". The {scheduler} batch scheduler needs the CustomResourceDefinition {crd}: install it "
                "(Pods of this RayCluster are not created until the PodGroup exists)"
            )
        events.append(
            RecordEvent(
                reason=text,
                target=cluster_ref(cluster),
                type="Warning",
                event_reason=FAILED_TO_CREATE_POD_GROUP,
                message=text,
            )
        )
        break
    return events
