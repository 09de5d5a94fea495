"""GCS fault tolerance with external Redis: the cleanup finalizer and the Redis cleanup Job.

rayClusterReconcile (``raycluster_controller.go``), before anything else is reconciled, when
``ENABLE_GCS_FT_REDIS_CLEANUP`` is not "false" and GCS FT is enabled with the Redis backend:

- not being deleted, finalizer ``ray.io/gcs-ft-redis-cleanup-finalizer`` missing: add it (KubeRay's
  ``r.Update``; here a merge patch carrying ``metadata.resourceVersion``, so a concurrent change of
  the CR fails with 409 instead of being overwritten) and return: no Pod exists before the finalizer.
- being deleted: delete the head Pods, then the worker Pods; while any head Pod is still there,
  requeue after 10 s (the GCS must stop writing before its storage namespace is deleted); then look
  for the ``<cluster>-redis-cleanup`` Job (labels ray.io/cluster + ray.io/node-type=redis-cleanup):
  none -> create it (buildRedisCleanupJob) and requeue 2 s; running -> requeue 2 s; finished
  (Complete or Failed) -> remove the finalizer.
- v1.7: the finalizer is removed anyway once the deletion is older than the
  ``ray.io/gcs-ft-deletion-timeout`` annotation (default 5 min), with a ``ForceDeletedStuckCluster``
  Warning Event naming the Redis storage namespace that may need manual cleanup.

raybus differences: a cluster that is being deleted but no longer carries the finalizer is left
alone (KubeRay would start another cleanup round for it); head/worker Pods are deleted one by one
(with their uid as precondition) instead of by one DeleteAllOf call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from raybus.api.k8s_names import parse_go_duration_seconds
from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.gcs_ft import (
    external_storage_namespace,
    is_gcs_fault_tolerance_embedded,
    is_gcs_fault_tolerance_enabled,
)
from raybus.decisions.cluster.outcome import cluster_ref, pod_ref
from raybus.decisions.cluster.pod_env import env_var_exists
from raybus.decisions.cluster.pod_parts import owner_reference
from raybus.decisions.cluster.pod_template import build_head_pod
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, DeleteObject, PatchObject, RecordEvent

GCS_FT_REDIS_CLEANUP_FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"
GCS_FT_DELETION_TIMEOUT_ANNOTATION = "ray.io/gcs-ft-deletion-timeout"
DEFAULT_GCS_FT_DELETION_TIMEOUT_SECONDS = 300.0
REDIS_CLEANUP_NODE = "redis-cleanup"  # rayv1.RedisCleanupNode
CREATED_REDIS_CLEANUP_JOB = "CreatedRedisCleanupJob"
FORCE_DELETED_STUCK_CLUSTER = "ForceDeletedStuckCluster"
DEFAULT_REQUEUE_SECONDS = 2.0
HEAD_TERMINATION_REQUEUE_SECONDS = 10.0  # "much longer than DefaultRequeueDuration"

_SCRIPT_PREFIX = (
    "echo \"To get more information about manually delete the storage namespace in Redis and remove the "
    "RayCluster's finalizer, please check https://docs.ray.io/en/master/cluster/kubernetes/user-guides/"
    "kuberay-gcs-ft.html for more details.\" && "
    "python -c "
    "\"from ray._private.gcs_utils import cleanup_redis_storage; "
    "from urllib.parse import urlparse; "
    "import os; "
    "import sys; "
    "redis_address = os.getenv('RAY_REDIS_ADDRESS', '').split(',')[0]; "
    "redis_address = redis_address if '://' in redis_address else 'redis://' + redis_address; "
    "parsed = urlparse(redis_address); "
)
_CLEANUP_WITH_USERNAME = (
    "sys.exit(1) if not cleanup_redis_storage(host=parsed.hostname, port=parsed.port, "
    "username=os.getenv('REDIS_USERNAME', parsed.username), "
    "password=os.getenv('REDIS_PASSWORD', parsed.password or ''), use_ssl=parsed.scheme=='rediss', "
    "storage_namespace=os.getenv('RAY_external_storage_namespace')) else None\""
)
_CLEANUP_WITHOUT_USERNAME = (
    "sys.exit(1) if not cleanup_redis_storage(host=parsed.hostname, port=parsed.port, "
    "password=os.getenv('REDIS_PASSWORD', parsed.password or ''), use_ssl=parsed.scheme=='rediss', "
    "storage_namespace=os.getenv('RAY_external_storage_namespace')) else None\""
)
_ATOI = re.compile(r"[+-]?[0-9]+")


@dataclass
class CleanupStep:
    """The round ends here: ``commands`` go out, nothing else is reconciled."""

    commands: list[Command] = field(default_factory=list)
    requeue_after: float | None = None
    reasons: list[str] = field(default_factory=list)


def redis_cleanup_applies(cluster: RayCluster, settings: OperatorSettings) -> bool:
    """enableGCSFTRedisCleanup && IsGCSFaultToleranceEnabled, for the Redis backend only (the
    embedded RocksDB backend has no external storage to clean)."""
    return (
        settings.enable_gcs_ft_redis_cleanup
        and is_gcs_fault_tolerance_enabled(cluster)
        and not is_gcs_fault_tolerance_embedded(cluster.spec.gcs_fault_tolerance_options)
    )


def redis_cleanup_job_name(cluster: RayCluster) -> str:
    return f"{cluster.name}-redis-cleanup"


def deletion_timeout_seconds(cluster: RayCluster) -> float:
    """``ray.io/gcs-ft-deletion-timeout``: a Go duration ("10m") or integer seconds; the 5 min
    default when absent, unparseable or not positive."""
    value = (cluster.metadata.annotations or {}).get(GCS_FT_DELETION_TIMEOUT_ANNOTATION, "").strip()
    seconds: float | None = None
    if value:
        try:
            seconds = parse_go_duration_seconds(value)
        except ValueError:
            seconds = float(int(value)) if _ATOI.fullmatch(value) else None
    return seconds if seconds is not None and seconds > 0 else DEFAULT_GCS_FT_DELETION_TIMEOUT_SECONDS


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _finalizer_patch(raw: RayCluster, finalizers: list[str], reason: str) -> PatchObject:
    """KubeRay's r.Update of the finalizer list as a merge patch guarded by resourceVersion."""
    meta: dict[str, Any] = {"finalizers": finalizers}
    if raw.metadata.resource_version:
        meta["resourceVersion"] = raw.metadata.resource_version
    return PatchObject(reason=reason, target=cluster_ref(raw), merge_patch={"metadata": meta})


def build_redis_cleanup_job(cluster: RayCluster, *, settings: OperatorSettings) -> dict[str, Any]:
    """buildRedisCleanupJob: the head Pod reduced to its Ray container running cleanup_redis_storage."""
    pod = build_head_pod(cluster, settings=settings, name=f"{cluster.name}-head")
    meta = pod["metadata"]
    labels = dict(meta.get("labels") or {})
    labels[k.RAY_NODE_TYPE_LABEL_KEY] = REDIS_CLEANUP_NODE
    annotations = dict(meta.get("annotations") or {})
    spec = dict(pod["spec"])
    ray = dict(spec["containers"][k.RAY_CONTAINER_INDEX])
    env = list(ray.get("env") or [])
    script = _SCRIPT_PREFIX + (
        _CLEANUP_WITH_USERNAME if env_var_exists(k.REDIS_USERNAME, env) else _CLEANUP_WITHOUT_USERNAME
    )
    ray["command"] = ["/bin/bash", "-lc", "--"]
    ray["args"] = [script]
    # The Job never starts Raylet or GCS: no probes.
    ray.pop("livenessProbe", None)
    ray.pop("readinessProbe", None)
    # At least 60 s of Redis connection retries.
    env += [
        {"name": "RAY_redis_db_connect_retries", "value": "120"},
        {"name": "RAY_redis_db_connect_wait_milliseconds", "value": "500"},
    ]
    ray["env"] = env
    # Constant footprint, and never a GPU.
    ray["resources"] = {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    }
    spec["containers"] = [ray]
    spec["restartPolicy"] = "Never"  # a Job's Pods may only use Never or OnFailure
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": redis_cleanup_job_name(cluster),
            "namespace": cluster.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": spec},
            "activeDeadlineSeconds": 300,  # best effort for 5 minutes
        },
    }


def job_finished(job: dict[str, Any]) -> str | None:
    """utils.IsJobFinished: the type of a True Complete/Failed condition, else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _cleanup_jobs(cluster: RayCluster, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        j
        for j in jobs
        if podutil.labels(j).get(k.RAY_CLUSTER_LABEL_KEY) == cluster.name
        and podutil.labels(j).get(k.RAY_NODE_TYPE_LABEL_KEY) == REDIS_CLEANUP_NODE
    ]


def _delete_all(cluster: RayCluster, pods: list[dict[str, Any]], node_type: str) -> list[Command]:
    """deleteAllPods for one node type: only Pods not already terminating."""
    return [
        DeleteObject(
            reason=f"RayCluster {cluster.namespace}/{cluster.name} with GCS FT is being deleted: deleting "
            f"{node_type} Pod {podutil.name(p)} before the Redis cleanup",
            target=pod_ref(p, cluster.namespace),
        )
        for p in pods
        if podutil.labels(p).get(k.RAY_NODE_TYPE_LABEL_KEY) == node_type and not podutil.is_terminating(p)
    ]


def reconcile_redis_cleanup(
    cluster: RayCluster,
    raw: RayCluster,
    *,
    pods: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    settings: OperatorSettings,
    now: datetime,
) -> CleanupStep | None:
    """The GCS FT finalizer block of rayClusterReconcile; None = carry on with the normal reconcile."""
    if not redis_cleanup_applies(cluster, settings):
        return None
    finalizers = list(raw.metadata.finalizers or [])
    if not raw.metadata.deletion_timestamp:
        if GCS_FT_REDIS_CLEANUP_FINALIZER in finalizers:
            return None
        reason = (
            "GCS fault tolerance has been enabled. Implementing a finalizer to ensure that Redis is properly "
            f"cleaned up once the RayCluster custom resource (CR) is deleted: {GCS_FT_REDIS_CLEANUP_FINALIZER}"
        )
        patch = _finalizer_patch(raw, [*finalizers, GCS_FT_REDIS_CLEANUP_FINALIZER], reason)
        # Only start the RayCluster reconciliation after the finalizer is added.
        return CleanupStep(commands=[patch], requeue_after=DEFAULT_REQUEUE_SECONDS, reasons=[reason])
    if GCS_FT_REDIS_CLEANUP_FINALIZER not in finalizers:
        return CleanupStep(reasons=["RayCluster is being deleted and its Redis cleanup is done, just ignore"])
    deleted_at = _parse_time(raw.metadata.deletion_timestamp)
    timeout = deletion_timeout_seconds(cluster)
    deadline = deleted_at + timedelta(seconds=timeout) if deleted_at is not None else None
    if deadline is not None and now >= deadline:
        return _stuck_in_deletion(cluster, raw, timeout)
    return _clean_up_redis(cluster, raw, pods=pods, jobs=jobs, settings=settings, now=now, deadline=deadline)


def _remaining(raw: RayCluster) -> list[str]:
    return [f for f in raw.metadata.finalizers or [] if f != GCS_FT_REDIS_CLEANUP_FINALIZER]


def _stuck_in_deletion(cluster: RayCluster, raw: RayCluster, timeout: float) -> CleanupStep:
    """The deletion timeout passed: the finalizer goes without a finished cleanup."""
    message = (
        f"RayCluster {cluster.namespace}/{cluster.name} has been stuck in deletion for more than {timeout:g}s "
        f"({GCS_FT_DELETION_TIMEOUT_ANNOTATION}); removed the finalizer {GCS_FT_REDIS_CLEANUP_FINALIZER} "
        f"without a finished Redis cleanup. The Redis storage namespace {external_storage_namespace(cluster)} "
        "may need manual cleanup"
    )
    return CleanupStep(
        commands=[
            RecordEvent(
                reason=message,
                target=cluster_ref(raw),
                type="Warning",
                event_reason=FORCE_DELETED_STUCK_CLUSTER,
                message=message,
            ),
            _finalizer_patch(raw, _remaining(raw), message),
        ],
        reasons=[message],
    )


def _clean_up_redis(cluster: RayCluster, raw: RayCluster, *, pods: list[dict[str, Any]], jobs: list[dict[str, Any]],
                    settings: OperatorSettings, now: datetime, deadline: datetime | None) -> CleanupStep:
    """Delete the Pods, wait for the head to be gone, then run the cleanup Job and drop the
    finalizer when it finished."""
    def capped(seconds: float) -> float:
        # Wake up in time for the deletion timeout too.
        if deadline is None:
            return seconds
        return max(0.0, min(seconds, (deadline - now).total_seconds()))

    storage_ns = external_storage_namespace(cluster)
    commands: list[Command] = _delete_all(cluster, pods, k.HEAD_NODE) + _delete_all(cluster, pods, k.WORKER_NODE)
    heads = [p for p in pods if podutil.labels(p).get(k.RAY_NODE_TYPE_LABEL_KEY) == k.HEAD_NODE]
    if heads:
        reason = (
            f"Wait for the head Pod {podutil.name(heads[0])} to be terminated before initiating the Redis "
            f"cleanup process. The storage namespace {storage_ns} in Redis cannot be fully deleted if the GCS "
            "process on the head Pod is still writing to it."
        )
        return CleanupStep(commands=commands, requeue_after=capped(HEAD_TERMINATION_REQUEUE_SECONDS), reasons=[reason])
    existing = _cleanup_jobs(cluster, jobs)
    if existing:
        return _cleanup_job_finished(raw, existing[0], commands, storage_ns, requeue_after=capped(DEFAULT_REQUEUE_SECONDS))
    job = build_redis_cleanup_job(cluster, settings=settings)
    commands.append(
        CreateObject(
            reason=f"Created Redis cleanup Job {cluster.namespace}/{job['metadata']['name']}",
            object=job,
            event_reason=CREATED_REDIS_CLEANUP_JOB,
        )
    )
    return CleanupStep(
        commands=commands,
        requeue_after=capped(DEFAULT_REQUEUE_SECONDS),
        reasons=[f"head Pod gone: creating Redis cleanup Job {job['metadata']['name']}"],
    )


def _cleanup_job_finished(raw: RayCluster, job: dict[str, Any], commands: list[Command], storage_ns: str, *,
                          requeue_after: float) -> CleanupStep:
    """The cleanup Job exists: wait for it, then drop the finalizer whatever its end."""
    finished = job_finished(job)
    if finished is None:
        return CleanupStep(
            commands=commands,
            requeue_after=requeue_after,
            reasons=[f"Redis cleanup Job {podutil.name(job)} is still running"],
        )
    if finished == "Complete":
        reason = (
            f"The Redis cleanup Job {podutil.name(job)} has been completed. The storage namespace "
            f"{storage_ns} in Redis has been fully deleted."
        )
    else:
        reason = (
            f"The Redis cleanup Job {podutil.name(job)} has failed. You should manually delete the storage "
            f"namespace {storage_ns} in Redis. Please check "
            "https://docs.ray.io/en/master/cluster/kubernetes/user-guides/kuberay-gcs-ft.html for more details."
        )
    return CleanupStep(commands=[*commands, _finalizer_patch(raw, _remaining(raw), reason)], reasons=[reason])
