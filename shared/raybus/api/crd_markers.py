"""The kubebuilder markers of KubeRay v1.7's ``*_types.go``, as data for :mod:`raybus.api.crdgen`.

Keyed by (model, python field name). Kept beside the models rather than inside them so the models
stay plain and the CRD-only facts (defaults the API server applies, enums, CEL rules) read as one
list that can be checked against KubeRay's markers line by line.
"""

from __future__ import annotations

from typing import Any

from raybus.api.meta import Condition, RayModel
from raybus.api.raycluster import (
    AuthOptions,
    AutoscalerOptions,
    GcsEmbeddedStorage,
    GcsFaultToleranceOptions,
    HeadGroupSpec,
    IngressOptions,
    NetworkPolicyConfig,
    RayClusterSpec,
    RayClusterStatus,
    RayClusterUpgradeStrategy,
    WorkerGroupNetworkPolicyRules,
    WorkerGroupSpec,
)
from raybus.api.raycronjob import RayCronJobSpec
from raybus.api.rayjob import (
    DeletionCondition,
    DeletionPolicy,
    DeletionRule,
    DeletionStrategy,
    RayJobSpec,
    RayJobStatus,
)
from raybus.api.rayservice import ClusterUpgradeOptions, RayServiceSpec, RayServiceStatuses

Markers = dict[str, Any]

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
    (RayClusterStatus, "last_update_time"): {"format": "date-time", "nullable": True},
    (RayClusterStatus, "observed_generation"): {"format": "int64"},
    (Condition, "observed_generation"): {"format": "int64"},
    (Condition, "last_transition_time"): {"format": "date-time"},
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
    # rayservice_types.go
    (RayServiceSpec, "managed_by"): _MANAGED_BY,
    (RayServiceSpec, "ray_cluster_deletion_delay_seconds"): {"minimum": 0},
    (ClusterUpgradeOptions, "max_surge_percent"): {"default": 100},
    (RayServiceStatuses, "conditions"): _CONDITIONS,
    (RayServiceStatuses, "observed_generation"): {"format": "int64"},
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

# json tags without omitempty / +optional. minReplicas/maxReplicas are deliberately left out: they
# carry CRD defaults, and an API server that does not default must still accept samples omitting them.
REQUIRED: dict[type[RayModel], list[str]] = {
    RayClusterSpec: ["headGroupSpec"],
    HeadGroupSpec: ["template"],
    WorkerGroupSpec: ["groupName"],
    WorkerGroupNetworkPolicyRules: ["groupName"],
    Condition: ["status", "type"],
    DeletionRule: ["condition", "policy"],
    RayServiceSpec: ["rayClusterConfig"],
    ClusterUpgradeOptions: ["gatewayClassName", "intervalSeconds", "stepSizePercent"],
    RayCronJobSpec: ["jobTemplate", "schedule"],
}
