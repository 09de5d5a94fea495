"""ray.io/v1 RayCluster (KubeRay v1.7.0 ``ray-operator/apis/ray/v1/raycluster_types.go``).

Every optional field defaults to ``None`` (not KubeRay's default) so parsing is lossless; see
:func:`raybus.api.defaults.with_defaults` for the defaulted view controllers should reason about.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from raybus.api.meta import Condition, K8sObject, Quantity, RayModel, RayObject

MAX_INT32 = 2**31 - 1


class UpscalingMode(StrEnum):
    DEFAULT = "Default"
    AGGRESSIVE = "Aggressive"
    CONSERVATIVE = "Conservative"


class AutoscalerVersion(StrEnum):
    V1 = "v1"
    V2 = "v2"


class ClusterState(StrEnum):
    # "failed" is kept by KubeRay only for compile compatibility; never written since v1.2.
    READY = "ready"
    SUSPENDED = "suspended"
    FAILED = "failed"


class ServiceType(StrEnum):
    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


class GcsBackend(StrEnum):
    REDIS = "redis"
    ROCKSDB = "rocksdb"


class RayClusterUpgradeType(StrEnum):
    RECREATE = "Recreate"
    NONE = "None"


class AuthMode(StrEnum):
    DISABLED = "disabled"
    TOKEN = "token"


class NetworkPolicyMode(StrEnum):
    DENY_ALL = "DenyAll"
    DENY_ALL_INGRESS = "DenyAllIngress"
    DENY_ALL_EGRESS = "DenyAllEgress"


class ScaleStrategy(RayModel):
    workers_to_delete: list[str] | None = None


class IngressOptions(RayModel):
    host: str | None = None
    path: str | None = None
    path_type: str | None = None
    tls: list[K8sObject] | None = None


class HeadGroupSpec(RayModel):
    template: K8sObject = Field(default_factory=dict)
    head_service: K8sObject | None = None
    enable_ingress: bool | None = None
    ingress_options: IngressOptions | None = None
    # Ray logical resources / node labels; override the matching rayStartParams in KubeRay.
    resources: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    ray_start_params: dict[str, str] | None = None
    service_type: str | None = None


class WorkerGroupSpec(RayModel):
    group_name: str = ""
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    num_of_hosts: int | None = None
    idle_timeout_seconds: int | None = None
    priority: int | None = None
    resources: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    ray_start_params: dict[str, str] | None = None
    template: K8sObject = Field(default_factory=dict)
    scale_strategy: ScaleStrategy | None = None
    # Internal: set by RayJob's DeleteWorkers deletion policy; users must not set it.
    suspend: bool | None = None


class AutoscalerOptions(RayModel):
    resources: K8sObject | None = None
    image: str | None = None
    image_pull_policy: str | None = None
    security_context: K8sObject | None = None
    idle_timeout_seconds: int | None = None
    upscaling_mode: str | None = None
    version: str | None = None
    env: list[K8sObject] | None = None
    env_from: list[K8sObject] | None = None
    volume_mounts: list[K8sObject] | None = None
    command: list[str] | None = None
    args: list[str] | None = None


class RedisCredential(RayModel):
    value_from: K8sObject | None = None
    value: str | None = None


class GcsEmbeddedStorage(RayModel):
    """RocksDB (embedded) GCS storage PVC (gate GCSFaultToleranceEmbeddedStorage)."""

    claim_name: str | None = None
    size: Quantity | None = None
    storage_class_name: str | None = None
    access_modes: list[str] | None = None
    sub_path: str | None = None
    deletion_policy: str | None = None


class GcsFaultToleranceOptions(RayModel):
    backend: str | None = None
    redis_username: RedisCredential | None = None
    redis_password: RedisCredential | None = None
    external_storage_namespace: str | None = None
    redis_address: str | None = None
    storage: GcsEmbeddedStorage | None = None


class AuthOptions(RayModel):
    mode: str | None = None
    secret_name: str | None = None
    enable_k8s_token_auth: bool | None = Field(default=None, alias="enableK8sTokenAuth")


class RayClusterUpgradeStrategy(RayModel):
    type: str | None = None


class NetworkPolicyRules(RayModel):
    """networkingv1 ingress/egress rules appended to KubeRay's base policy (gate RayClusterNetworkPolicy)."""

    ingress_rules: list[K8sObject] | None = None
    egress_rules: list[K8sObject] | None = None


class WorkerGroupNetworkPolicyRules(NetworkPolicyRules):
    group_name: str = ""


class NetworkPolicyConfig(RayModel):
    # KubeRay defaults mode to DenyAll (kubebuilder default) when unset.
    mode: str | None = None
    head: NetworkPolicyRules | None = None
    worker: NetworkPolicyRules | None = None
    worker_groups: list[WorkerGroupNetworkPolicyRules] | None = None


class TLSOptions(RayModel):
    enabled: bool | None = None


class CollectorOptions(RayModel):
    image: str | None = None
    image_pull_policy: str | None = None
    resources: K8sObject | None = None
    env: list[K8sObject] | None = None


class HistoryServerOptions(RayModel):
    collector_options: CollectorOptions | None = None


class RayClusterSpec(RayModel):
    head_group_spec: HeadGroupSpec = Field(default_factory=HeadGroupSpec)
    worker_group_specs: list[WorkerGroupSpec] | None = None
    ray_version: str | None = None
    enable_in_tree_autoscaling: bool | None = None
    autoscaler_options: AutoscalerOptions | None = None
    head_service_annotations: dict[str, str] | None = None
    suspend: bool | None = None
    managed_by: str | None = None
    upgrade_strategy: RayClusterUpgradeStrategy | None = None
    gcs_fault_tolerance_options: GcsFaultToleranceOptions | None = None
    auth_options: AuthOptions | None = None
    network_policy: NetworkPolicyConfig | None = None
    tls_options: TLSOptions | None = Field(default=None, alias="tlsOptions")
    history_server_options: HistoryServerOptions | None = None


class HeadInfo(RayModel):
    pod_ip: str | None = Field(default=None, alias="podIP")
    service_ip: str | None = Field(default=None, alias="serviceIP")
    pod_name: str | None = None
    service_name: str | None = None


class RayClusterStatus(RayModel):
    state: str | None = None
    reason: str | None = None
    desired_cpu: Quantity | None = Field(default=None, alias="desiredCPU")
    desired_memory: Quantity | None = None
    desired_gpu: Quantity | None = Field(default=None, alias="desiredGPU")
    desired_tpu: Quantity | None = Field(default=None, alias="desiredTPU")
    last_update_time: str | None = None
    state_transition_times: dict[str, str] | None = None
    endpoints: dict[str, str] | None = None
    head: HeadInfo | None = None
    conditions: list[Condition] | None = None
    ready_worker_replicas: int | None = None
    available_worker_replicas: int | None = None
    desired_worker_replicas: int | None = None
    min_worker_replicas: int | None = None
    max_worker_replicas: int | None = None
    observed_generation: int | None = None


class RayCluster(RayObject):
    kind: str | None = "RayCluster"
    spec: RayClusterSpec = Field(default_factory=RayClusterSpec)
    status: RayClusterStatus | None = None


# RayCluster.status.conditions types / reasons (raycluster_types.go, utils/constant.go).
class RayClusterConditionType(StrEnum):
    PROVISIONED = "RayClusterProvisioned"
    HEAD_POD_READY = "HeadPodReady"
    REPLICA_FAILURE = "ReplicaFailure"
    SUSPENDING = "RayClusterSuspending"
    SUSPENDED = "RayClusterSuspended"
