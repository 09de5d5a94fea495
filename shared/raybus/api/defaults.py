"""KubeRay defaulting as a pure function, kept apart from parsing so round trips stay exact.

Mirrors two sources:
- CRD ``+kubebuilder:default`` markers the API server applies on admission
  (raycluster_types.go: worker ``replicas`` 0, ``minReplicas`` 0, ``maxReplicas`` 2147483647,
  ``numOfHosts`` 1, ``priority`` 0; rayjob_types.go: ``backoffLimit`` 0, ``submissionMode``
  K8sJobMode, ``ttlSecondsAfterFinished`` 0, deletion rule ``ttlSeconds`` 0; rayservice_types.go:
  ``clusterUpgradeOptions.maxSurgePercent`` 100).
- ``setDefaults`` in raycluster_controller.go, which gives every group a non-nil ``rayStartParams``.
Our local API server and existing objects may lack those defaults, so controllers should reason
about ``with_defaults(obj)`` rather than the raw object. Controller-time fallbacks that KubeRay
does *not* write back (e.g. RayService deletion delay 60 s, autoscaler idle timeout 60 s) are
deliberately not injected here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from raybus.api.raycluster import MAX_INT32, RayCluster, RayClusterSpec, WorkerGroupSpec
from raybus.api.raycronjob import RayCronJob
from raybus.api.rayjob import JobSubmissionMode, RayJob, RayJobSpec
from raybus.api.rayservice import RayService

T = TypeVar("T", RayCluster, RayJob, RayService, RayCronJob)


def _group_with_defaults(group: WorkerGroupSpec) -> WorkerGroupSpec:
    update: dict[str, Any] = {}
    if group.ray_start_params is None:
        update["ray_start_params"] = {}
    if group.replicas is None:
        update["replicas"] = 0
    if group.min_replicas is None:
        update["min_replicas"] = 0
    if group.max_replicas is None:
        update["max_replicas"] = MAX_INT32
    if group.priority is None:
        update["priority"] = 0
    # The API server defaults absent fields only: an explicit numOfHosts 0 stays 0 (and KubeRay would
    # then create replicas*0 pods; our validation rejects it).
    if group.num_of_hosts is None:
        update["num_of_hosts"] = 1
    return group.model_copy(update=update) if update else group


def spec_with_defaults(spec: RayClusterSpec) -> RayClusterSpec:
    """Defaulted copy of a RayClusterSpec (also used for RayJob/RayService embedded specs).

    Copy-on-write: only the models that get a default are copied; pod templates and other
    sub-objects are shared with the input, which decision code treats as immutable. (Deep copies
    here dominated a reconcile's CPU time.)"""
    head = spec.head_group_spec
    update: dict[str, Any] = {}
    if head.ray_start_params is None:
        update["head_group_spec"] = head.model_copy(update={"ray_start_params": {}})
    if spec.worker_group_specs is not None:
        update["worker_group_specs"] = [_group_with_defaults(g) for g in spec.worker_group_specs]
    return spec.model_copy(update=update)


def job_spec_with_defaults(spec: RayJobSpec) -> RayJobSpec:
    out = spec.model_copy(deep=True)
    if out.backoff_limit is None:
        out.backoff_limit = 0
    if not out.submission_mode:
        out.submission_mode = JobSubmissionMode.K8S_JOB.value
    if out.ttl_seconds_after_finished is None:
        out.ttl_seconds_after_finished = 0
    if out.ray_cluster_spec is not None:
        out.ray_cluster_spec = spec_with_defaults(out.ray_cluster_spec)
    if out.deletion_strategy is not None:
        for rule in out.deletion_strategy.deletion_rules or []:
            if rule.condition.ttl_seconds is None:
                rule.condition.ttl_seconds = 0
    return out


def with_defaults(obj: T) -> T:
    """Return a defaulted copy of any ray.io object; the input is never mutated."""
    if isinstance(obj, RayCluster):
        # Copy-on-write (see spec_with_defaults): the hot path of every RayCluster reconcile.
        return obj.model_copy(update={"spec": spec_with_defaults(obj.spec)})
    out = obj.model_copy(deep=True)
    if isinstance(out, RayJob):
        out.spec = job_spec_with_defaults(out.spec)
    elif isinstance(out, RayService):
        out.spec.ray_cluster_config = spec_with_defaults(out.spec.ray_cluster_config)
        strategy = out.spec.upgrade_strategy
        options = strategy.cluster_upgrade_options if strategy is not None else None
        if options is not None and options.max_surge_percent is None:
            options.max_surge_percent = 100
    else:
        out.spec.job_template = job_spec_with_defaults(out.spec.job_template)
    return out
