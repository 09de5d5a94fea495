"""The Pod manifests of a RayCluster under a chosen name: what reconcilePods creates (pods.py) and
what the command-executor's admission rebuilds a created Pod from to check it (decisions/admission),
so both run the very same code."""

from __future__ import annotations

from typing import Any

from raybus.api.raycluster import RayCluster, WorkerGroupSpec
from raybus.decisions.cluster.hashing import (
    KUBERAY_VERSION_KEY,
    UPGRADE_STRATEGY_RECREATE_HASH_KEY,
    generate_hash_without_replicas_and_workers_to_delete,
)
from raybus.decisions.cluster.pod_template import build_head_pod, build_worker_pod
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.memo import LastPerObject

# The spec hash of each RayCluster, while its defaulted spec is the same object (decisions/memo.py).
_HASHES: LastPerObject[str] = LastPerObject()


def kuberay_version(settings: OperatorSettings) -> str:
    return settings.kuberay_version


def head_pod_manifest(
    cluster: RayCluster, *, settings: OperatorSettings, name: str, cluster_hash: str
) -> dict[str, Any]:
    """createHeadPod's manifest under a chosen name, with the Recreate hash and version stamped
    (also what the command-executor's admission rebuilds a created head Pod from)."""
    pod = build_head_pod(cluster, settings=settings, name=name)
    metadata = pod.setdefault("metadata", {})
    metadata["name"] = name
    metadata.pop("generateName", None)
    metadata.setdefault("namespace", cluster.namespace)
    if cluster_hash:
        annotations = metadata.setdefault("annotations", {})
        annotations[UPGRADE_STRATEGY_RECREATE_HASH_KEY] = cluster_hash
        annotations[KUBERAY_VERSION_KEY] = kuberay_version(settings)
    return pod


def worker_pod_manifest(
    cluster: RayCluster,
    group: WorkerGroupSpec,
    *,
    settings: OperatorSettings,
    name: str,
    replica_group_name: str | None = None,
    replica_index: int | None = None,
    host_index: int | None = None,
) -> dict[str, Any]:
    """createWorkerPod / createWorkerPodWithIndex's manifest under a chosen name (also what the
    command-executor's admission rebuilds a created worker Pod from)."""
    pod = build_worker_pod(
        cluster,
        group,
        settings=settings,
        name=name,
        replica_group_name=replica_group_name,
        replica_index=replica_index,
        host_index=host_index,
    )
    metadata = pod.setdefault("metadata", {})
    metadata["name"] = name
    metadata.pop("generateName", None)
    metadata.setdefault("namespace", cluster.namespace)
    return pod


def cluster_spec_hash(cluster: RayCluster) -> str:
    """The Recreate upgrade hash of a defaulted cluster (memoised per object, decisions/memo.py)."""
    return _HASHES.get((cluster.namespace, cluster.name), (cluster.spec,),
                       lambda: generate_hash_without_replicas_and_workers_to_delete(cluster.spec))
