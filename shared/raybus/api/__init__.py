"""ray.io/v1 API models (pydantic v2), defaulting, validation and CRD generation.

Pure code: no I/O, env or clock reads (enforced by an import-linter contract).

    from raybus.api import RayCluster, parse_manifests, with_defaults
    cluster = RayCluster.model_validate(manifest_dict)
    cluster.spec.worker_group_specs[0].min_replicas
    cluster.to_manifest() == manifest_dict   # lossless
    with_defaults(cluster)                   # CRD defaults + setDefaults, as a new object

Modules: ``meta`` (RayModel, ObjectMeta, Condition), ``raycluster``/``rayjob``/``rayservice``/
``raycronjob`` (models + StrEnum constants), ``load`` (parse_manifests/parse_object), ``defaults``,
``settings`` (FeatureGates), ``predicates`` (IsAutoscalingEnabled & co.), ``validation``
(validate_raycluster/validate_rayjob/validate_rayservice/validate_raycronjob/validate),
``crdgen`` (``python -m raybus.api.crdgen deploy/crds``).
"""

from raybus.api.defaults import spec_with_defaults, with_defaults
from raybus.api.load import RayAny, parse_manifests, parse_object
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
from raybus.api.raycronjob import RayCronJob, RayCronJobSpec, RayCronJobStatus
from raybus.api.rayjob import (
    DeletionCondition,
    DeletionPolicy,
    DeletionRule,
    DeletionStrategy,
    RayJob,
    RayJobSpec,
    RayJobStatus,
    RayJobStatusInfo,
    SubmitterConfig,
)
from raybus.api.rayservice import (
    AppStatus,
    ClusterUpgradeOptions,
    RayService,
    RayServiceSpec,
    RayServiceStatus,
    RayServiceStatuses,
    RayServiceUpgradeStrategy,
    ServeDeploymentStatus,
)

__all__ = [
    "API_VERSION",
    "AppStatus",
    "AuthOptions",
    "AutoscalerOptions",
    "ClusterUpgradeOptions",
    "Condition",
    "DeletionCondition",
    "DeletionPolicy",
    "DeletionRule",
    "DeletionStrategy",
    "GcsFaultToleranceOptions",
    "HeadGroupSpec",
    "HeadInfo",
    "K8sObject",
    "ObjectMeta",
    "RayAny",
    "RayCluster",
    "RayClusterSpec",
    "RayClusterStatus",
    "RayCronJob",
    "RayCronJobSpec",
    "RayCronJobStatus",
    "RayJob",
    "RayJobSpec",
    "RayJobStatus",
    "RayJobStatusInfo",
    "RayModel",
    "RayObject",
    "RayService",
    "RayServiceSpec",
    "RayServiceStatus",
    "RayServiceStatuses",
    "RayServiceUpgradeStrategy",
    "RedisCredential",
    "ScaleStrategy",
    "ServeDeploymentStatus",
    "SubmitterConfig",
    "WorkerGroupSpec",
    "parse_manifests",
    "parse_object",
    "spec_with_defaults",
    "with_defaults",
]
