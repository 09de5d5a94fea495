"""ray.io/v1 API models (pydantic v2), defaulting, validation and CRD generation.

Pure code: no I/O, env or clock reads (enforced by an import-linter contract).
"""

from raybus.api.defaults import spec_with_defaults, with_defaults
from raybus.api.meta import API_VERSION, Condition, K8sObject, ObjectMeta, RayModel, RayObject
from raybus.api.raycluster import (
    AuthOptions,
    AutoscalerOptions,
    GcsFaultToleranceOptions,
    HeadGroupSpec,
    HeadInfo,
    RayCluster,
    RayClusterSpec,
    RayClusterStatus,
    RedisCredential,
    ScaleStrategy,
    WorkerGroupSpec,
)

__all__ = [
    "API_VERSION",
    "AuthOptions",
    "AutoscalerOptions",
    "Condition",
    "GcsFaultToleranceOptions",
    "HeadGroupSpec",
    "HeadInfo",
    "K8sObject",
    "ObjectMeta",
    "RayCluster",
    "RayClusterSpec",
    "RayClusterStatus",
    "RayModel",
    "RayObject",
    "RedisCredential",
    "ScaleStrategy",
    "WorkerGroupSpec",
    "spec_with_defaults",
    "with_defaults",
]
