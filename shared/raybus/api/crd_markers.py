"""The kubebuilder markers of KubeRay v1.7's ``*_types.go``, as data for :mod:`raybus.api.crdgen`.

Keyed by (model, python field name). Kept beside the models rather than inside them so the models
stay plain and the CRD-only facts (defaults the API server applies, enums, CEL rules) read as one
list that can be checked against KubeRay's markers line by line.
"""

from __future__ import annotations

from typing import Any

from raybus.api.crd_core import CORE, META, NETWORKING
from raybus.api.meta import Condition, RayModel
from raybus.api.raycluster import (
    AuthOptions,
    AutoscalerOptions,
    CollectorOptions,
    GcsEmbeddedStorage,
    GcsFaultToleranceOptions,
    HeadGroupSpec,
    IngressOptions,
    NetworkPolicyConfig,
    NetworkPolicyRules,
    RayClusterSpec,
    RayClusterStatus,
    RayClusterUpgradeStrategy,
    RedisCredential,
    WorkerGroupNetworkPolicyRules,
    WorkerGroupSpec,
)
from raybus.api.raycronjob import RayCronJobSpec, RayCronJobStatus
from raybus.api.rayjob import (
    DeletionCondition,
    DeletionPolicy,
    DeletionRule,
    DeletionStrategy,
    RayJobSpec,
    RayJobStatus,
    RayJobStatusInfo,
)
from raybus.api.rayservice import ClusterUpgradeOptions, RayServiceSpec, RayServiceStatus, RayServiceStatuses

Markers = dict[str, Any]

# Fields the models keep as raw Kubernetes objects (dicts) -> the Go type of KubeRay's field, whose
# full schema crd_core inlines (for a list field: the type of its items). Looked up along the
# model's bases, so WorkerGroupNetworkPolicyRules has NetworkPolicyRules' entries.
EMBEDDED: dict[tuple[type[RayModel], str], str] = {
    (HeadGroupSpec, "template"): CORE + "PodTemplateSpec",
    (HeadGroupSpec, "head_service"): CORE + "Service",
    (WorkerGroupSpec, "template"): CORE + "PodTemplateSpec",
    (IngressOptions, "tls"): NETWORKING + "IngressTLS",
    (AutoscalerOptions, "resources"): CORE + "ResourceRequirements",
    (AutoscalerOptions, "security_context"): CORE + "SecurityContext",
    (AutoscalerOptions, "env"): CORE + "EnvVar",
    (AutoscalerOptions, "env_from"): CORE + "EnvFromSource",
    (AutoscalerOptions, "volume_mounts"): CORE + "VolumeMount",
    (RedisCredential, "value_from"): CORE + "EnvVarSource",
    (NetworkPolicyRules, "ingress_rules"): NETWORKING + "NetworkPolicyIngressRule",
    (NetworkPolicyRules, "egress_rules"): NETWORKING + "NetworkPolicyEgressRule",
    (CollectorOptions, "resources"): CORE + "ResourceRequirements",
    (CollectorOptions, "env"): CORE + "EnvVar",
    (RayJobSpec, "submitter_pod_template"): CORE + "PodTemplateSpec",
    (RayServiceSpec, "serve_service"): CORE + "Service",
}

# Models that are a Kubernetes type as they stand (metav1.Condition, with its kubebuilder markers).
AS_CORE: dict[type[RayModel], str] = {Condition: META + "Condition"}

_DELETION_POLICIES = ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"]
_MANAGED_BY: Markers = {
    "x-kubernetes-validations": [
        {"message": "the managedBy field is immutable", "rule": "self == oldSelf"},
        {
            "message": "the managedBy field value must be either 'ray.io/kuberay-operator' or "
            "'kueue.x-k8s.io/multikueue'",
            "rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
        },
    ]
}
_CONDITIONS: Markers = {"x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"}
_TIME: Markers = {"format": "date-time"}  # metav1.Time: the models keep the RFC 3339 string

FIELD_MARKERS: dict[tuple[type[RayModel], str], Markers] = {
    # raycluster_types.go
    (RayClusterSpec, "managed_by"): _MANAGED_BY,
    (WorkerGroupSpec, "replicas"): {"default": 0},
    (WorkerGroupSpec, "min_replicas"): {"default": 0},
    (WorkerGroupSpec, "max_replicas"): {"default": 2147483647},
    (WorkerGroupSpec, "num_of_hosts"): {"default": 1},
    (WorkerGroupSpec, "priority"): {"default": 0},
    (AutoscalerOptions, "upscaling_mode"): {"enum": ["Default", "Aggressive", "Conservative"]},
    (AutoscalerOptions, "version"): {"enum": ["v1", "v2"]},
    (RayClusterUpgradeStrategy, "type"): {"enum": ["Recreate", "None"]},
    (AuthOptions, "mode"): {"enum": ["disabled", "token"]},
    (GcsFaultToleranceOptions, "backend"): {
        "enum": ["redis", "rocksdb"],
        "x-kubernetes-validations": [
            {"message": "gcsFaultToleranceOptions.backend is immutable", "rule": "self == oldSelf"}
        ],
    },
    (GcsEmbeddedStorage, "deletion_policy"): {"enum": ["DeleteWithCluster", "Retain"]},
    (NetworkPolicyConfig, "mode"): {"default": "DenyAll", "enum": ["DenyAll", "DenyAllIngress", "DenyAllEgress"]},
    (NetworkPolicyConfig, "worker_groups"): {
        "x-kubernetes-list-map-keys": ["groupName"],
        "x-kubernetes-list-type": "map",
    },
    (IngressOptions, "path_type"): {"enum": ["Exact", "Prefix", "ImplementationSpecific"]},
    (RayClusterStatus, "conditions"): _CONDITIONS,
    (RayClusterStatus, "last_update_time"): {**_TIME, "nullable": True},
    (RayClusterStatus, "state_transition_times"): {"additionalProperties": {**_TIME, "type": "string"}},
    (RayClusterStatus, "observed_generation"): {"format": "int64"},
    # rayjob_types.go
    (RayJobSpec, "managed_by"): _MANAGED_BY,
    (RayJobSpec, "backoff_limit"): {"default": 0},
    (RayJobSpec, "submission_mode"): {"default": "K8sJobMode"},
    (RayJobSpec, "ttl_seconds_after_finished"): {"default": 0},
    (RayJobSpec, "pre_running_deadline_seconds"): {"minimum": 1},
    (DeletionStrategy, "deletion_rules"): {"minItems": 1, "x-kubernetes-list-type": "atomic"},
    (DeletionRule, "policy"): {"enum": _DELETION_POLICIES},
    (DeletionPolicy, "policy"): {"enum": _DELETION_POLICIES},
    (DeletionCondition, "job_status"): {"enum": ["SUCCEEDED", "FAILED"]},
    (DeletionCondition, "job_deployment_status"): {"enum": ["Failed"]},
    (DeletionCondition, "ttl_seconds"): {"default": 0, "minimum": 0},
    (RayJobStatus, "succeeded"): {"default": 0},
    (RayJobStatus, "failed"): {"default": 0},
    (RayJobStatus, "observed_generation"): {"format": "int64"},
    (RayJobStatus, "start_time"): _TIME,
    (RayJobStatus, "end_time"): _TIME,
    (RayJobStatus, "job_status_check_failure_start_time"): _TIME,
    (RayJobStatusInfo, "start_time"): _TIME,
    (RayJobStatusInfo, "end_time"): _TIME,
    # rayservice_types.go
    (RayServiceSpec, "managed_by"): _MANAGED_BY,
    (RayServiceSpec, "ray_cluster_deletion_delay_seconds"): {"minimum": 0},
    (ClusterUpgradeOptions, "max_surge_percent"): {"default": 100},
    (RayServiceStatuses, "conditions"): _CONDITIONS,
    (RayServiceStatuses, "observed_generation"): {"format": "int64"},
    (RayServiceStatuses, "last_update_time"): _TIME,
    (RayServiceStatus, "last_traffic_migrated_time"): _TIME,
    # raycronjob_types.go
    (RayCronJobSpec, "time_zone"): {"minLength": 1},
    (RayCronJobStatus, "last_schedule_time"): _TIME,
}

OBJECT_MARKERS: dict[type[RayModel], Markers] = {
    DeletionStrategy: {
        "x-kubernetes-validations": [
            {
                "message": "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together within "
                "the same deletionStrategy",
                "rule": "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",
            },
            {
                "message": "deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules "
                "field (cannot be empty)",
                "rule": "((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))",
            },
        ]
    },
    DeletionCondition: {
        "x-kubernetes-validations": [
            {
                "message": "JobStatus and JobDeploymentStatus cannot be used together within the same deletion "
                "condition.",
                "rule": "!(has(self.jobStatus) && has(self.jobDeploymentStatus))",
            },
            {
                "message": "the deletion condition requires either the JobStatus or the JobDeploymentStatus field.",
                "rule": "has(self.jobStatus) || has(self.jobDeploymentStatus)",
            },
        ]
    },
}

# json tags without omitempty / +optional. minReplicas/maxReplicas are required with a default: the
# API server defaults before it validates, so a manifest may omit them.
REQUIRED: dict[type[RayModel], list[str]] = {
    RayClusterSpec: ["headGroupSpec"],
    HeadGroupSpec: ["template"],
    WorkerGroupSpec: ["groupName", "maxReplicas", "minReplicas", "template"],
    WorkerGroupNetworkPolicyRules: ["groupName"],
    DeletionRule: ["condition", "policy"],
    RayServiceSpec: ["rayClusterConfig"],
    ClusterUpgradeOptions: ["gatewayClassName", "intervalSeconds", "stepSizePercent"],
    RayCronJobSpec: ["jobTemplate", "schedule"],
}
