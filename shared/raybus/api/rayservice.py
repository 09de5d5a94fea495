"""ray.io/v1 RayService (KubeRay v1.7.0 ``ray-operator/apis/ray/v1/rayservice_types.go``).

Naming follows Go: ``RayServiceStatuses`` is ``.status``; ``RayServiceStatus`` is the per-cluster
block used for ``activeServiceStatus`` / ``pendingServiceStatus``.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from raybus.api.meta import Condition, K8sObject, RayModel, RayObject
from raybus.api.raycluster import RayClusterSpec, RayClusterStatus


class RayServiceUpgradeType(StrEnum):
    NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE = "NewClusterWithIncrementalUpgrade"
    NEW_CLUSTER = "NewCluster"
    NONE = "None"


class ServiceStatus(StrEnum):
    # Deprecated in KubeRay: equivalent to the Ready condition since v1.3.
    RUNNING = "Running"
    NOT_RUNNING = ""


class ApplicationStatus(StrEnum):
    """Ray Serve application statuses (serve.proto ``ApplicationStatus``)."""

    NOT_STARTED = "NOT_STARTED"
    DEPLOYING = "DEPLOYING"
    RUNNING = "RUNNING"
    DEPLOY_FAILED = "DEPLOY_FAILED"
    DELETING = "DELETING"
    UNHEALTHY = "UNHEALTHY"


class DeploymentStatus(StrEnum):
    UPDATING = "UPDATING"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"


class RayServiceConditionType(StrEnum):
    READY = "Ready"
    UPGRADE_IN_PROGRESS = "UpgradeInProgress"
    ROLLBACK_IN_PROGRESS = "RollbackInProgress"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"


class RayServiceConditionReason(StrEnum):
    INITIALIZING = "Initializing"
    INITIALIZING_TIMEOUT = "InitializingTimeout"
    ZERO_SERVE_ENDPOINTS = "ZeroServeEndpoints"
    NON_ZERO_SERVE_ENDPOINTS = "NonZeroServeEndpoints"
    BOTH_ACTIVE_PENDING_CLUSTERS_EXIST = "BothActivePendingClustersExist"
    NO_PENDING_CLUSTER = "NoPendingCluster"
    NO_ACTIVE_CLUSTER = "NoActiveCluster"
    VALIDATION_FAILED = "ValidationFailed"
    DESIRED_CLUSTER_SPEC_CHANGED = "DesiredClusterSpecChanged"
    SUSPEND_REQUESTED = "SuspendRequested"
    SUSPEND_IN_PROGRESS = "SuspendInProgress"
    SUSPEND_COMPLETE = "SuspendComplete"
    RESUMED = "RayServiceResumed"


class ClusterUpgradeOptions(RayModel):
    """Only used by NewClusterWithIncrementalUpgrade (gate RayServiceIncrementalUpgrade)."""

    # CRD default 100 when unset.
    max_surge_percent: int | None = None
    step_size_percent: int | None = None
    interval_seconds: int | None = None
    gateway_class_name: str | None = None


class RayServiceUpgradeStrategy(RayModel):
    type: str | None = None
    cluster_upgrade_options: ClusterUpgradeOptions | None = None


class RayServiceSpec(RayModel):
    # Go field RayClusterSpec, json tag rayClusterConfig.
    ray_cluster_config: RayClusterSpec = Field(default_factory=RayClusterSpec, alias="rayClusterConfig")
    serve_config_v2: str | None = Field(default=None, alias="serveConfigV2")
    serve_service: K8sObject | None = None
    upgrade_strategy: RayServiceUpgradeStrategy | None = None
    ray_cluster_deletion_delay_seconds: int | None = None
    exclude_head_pod_from_serve_svc: bool | None = None
    suspend: bool | None = None
    managed_by: str | None = None
    # Deprecated no-ops (kuberay#1685); kept so manifests that still carry them round-trip.
    service_unhealthy_second_threshold: int | None = None
    deployment_unhealthy_second_threshold: int | None = None

    @property
    def ray_cluster_spec(self) -> RayClusterSpec:
        """Go's field name for ``rayClusterConfig``."""
        return self.ray_cluster_config


class ServeDeploymentStatus(RayModel):
    status: str | None = None
    message: str | None = None


class AppStatus(RayModel):
    serve_deployment_statuses: dict[str, ServeDeploymentStatus] | None = None
    status: str | None = None
    message: str | None = None


class RayServiceStatus(RayModel):
    """Status of one RayCluster (active or pending) backing a RayService."""

    application_statuses: dict[str, AppStatus] | None = None
    target_capacity: int | None = None
    traffic_routed_percent: int | None = None
    last_traffic_migrated_time: str | None = None
    ray_cluster_name: str | None = None
    ray_cluster_status: RayClusterStatus | None = None


class RayServiceStatuses(RayModel):
    conditions: list[Condition] | None = None
    last_update_time: str | None = None
    service_status: str | None = None
    active_service_status: RayServiceStatus | None = None
    pending_service_status: RayServiceStatus | None = None
    num_serve_endpoints: int | None = None
    observed_generation: int | None = None


class RayService(RayObject):
    kind: str | None = "RayService"
    spec: RayServiceSpec = Field(default_factory=RayServiceSpec)
    status: RayServiceStatuses | None = None
