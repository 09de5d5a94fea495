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

from typing import TypeVar

from raybus.api.raycluster import MAX_INT32, RayCluster, RayClusterSpec
from raybus.api.raycronjob import RayCronJob
from raybus.api.rayjob import JobSubmissionMode, RayJob, RayJobSpec
from raybus.api.rayservice import RayService

T = TypeVar("T", RayCluster, RayJob, RayService, RayCronJob)


def spec_with_defaults(spec: RayClusterSpec) -> RayClusterSpec:
    """Defaulted deep copy of a RayClusterSpec (also used for RayJob/RayService embedded specs)."""
    out = spec.model_copy(deep=True)
    head = out.head_group_spec
    if head.ray_start_params is None:
        head.ray_start_params = {}
    for group in out.worker_group_specs or []:
        if group.ray_start_params is None:
            group.ray_start_params = {}
        if group.replicas is None:
            group.replicas = 0
        if group.min_replicas is None:
            group.min_replicas = 0
        if group.max_replicas is None:
            group.max_replicas = MAX_INT32
        if group.priority is None:
            group.priority = 0
        # The API server defaults absent fields only: an explicit numOfHosts 0 stays 0 (and KubeRay would
        # then create replicas*0 pods; our validation rejects it).
        if group.num_of_hosts is None:
            group.num_of_hosts = 1
    return out


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
    """Return a defaulted deep copy of any ray.io object; the input is never mutated."""
    out = obj.model_copy(deep=True)
    if isinstance(out, RayCluster):
        out.spec = spec_with_defaults(out.spec)
    elif isinstance(out, RayJob):
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
