"""KubeRay defaulting as a pure function, kept apart from parsing so round trips stay exact.

Mirrors two sources:
- CRD ``+kubebuilder:default`` markers the API server applies on admission (raycluster_types.go:
  ``replicas`` 0, ``minReplicas`` 0, ``maxReplicas`` 2147483647, ``numOfHosts`` 1).
- ``setDefaults`` in raycluster_controller.go, which gives every group a non-nil ``rayStartParams``.
Our local API server and existing clusters may hold objects created without those defaults, so
controllers must reason about ``with_defaults(obj)`` rather than the raw object.
"""

from __future__ import annotations

from raybus.api.raycluster import MAX_INT32, RayCluster, RayClusterSpec


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
        # NumOfHosts is a non-pointer int32 with omitempty: 0 and absent both mean "default 1".
        if not group.num_of_hosts:
            group.num_of_hosts = 1
    return out


def with_defaults(cluster: RayCluster) -> RayCluster:
    """Return a defaulted deep copy; the input is never mutated."""
    out = cluster.model_copy(deep=True)
    out.spec = spec_with_defaults(cluster.spec)
    return out
