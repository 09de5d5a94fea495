"""KubeRay v1.7 constants the RayService controller uses (rayservice_controller.go, utils/constant.go,
apis/ray/v1/rayservice_types.go). Names follow KubeRay's identifiers in UPPER_SNAKE."""

from __future__ import annotations

from typing import Final

# rayservice_controller.go
SERVICE_DEFAULT_REQUEUE_SECONDS: Final = 2.0  # ServiceDefaultRequeueDuration
RAY_CLUSTER_DELETION_DELAY_SECONDS: Final = 60  # RayClusterDeletionDelayDuration

# utils.RayServiceFinalizer (v1.7, kuberay#4807)
RAY_SERVICE_FINALIZER: Final = "ray.io/rayservice-finalizer"

# Annotations / labels (utils/constant.go)
HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY: Final = "ray.io/hash-without-replicas-and-workers-to-delete"
NUM_WORKER_GROUPS_KEY: Final = "ray.io/num-worker-groups"
KUBERAY_VERSION_KEY: Final = "ray.io/kuberay-version"
INITIALIZING_TIMEOUT_ANNOTATION: Final = "ray.io/initializing-timeout"
SERVE_LABEL: Final = "ray.io/serve"  # RayClusterServingServiceLabelKey
DEFAULT_SERVE_APP_NAME: Final = "default"  # utils.DefaultServeAppName
KUBERAY_OPERATOR: Final = "ray.io/kuberay-operator"  # utils.KubeRayController
ENDPOINT_SLICE_SERVICE_NAME_LABEL: Final = "kubernetes.io/service-name"  # discoveryv1.LabelServiceName

# Condition types (RayServiceConditionType)
READY: Final = "Ready"
UPGRADE_IN_PROGRESS: Final = "UpgradeInProgress"
SUSPENDING: Final = "Suspending"
SUSPENDED: Final = "Suspended"
ROLLBACK_IN_PROGRESS: Final = "RollbackInProgress"

# Condition reasons (RayServiceConditionReason)
INITIALIZING: Final = "Initializing"
INITIALIZING_TIMEOUT: Final = "InitializingTimeout"
ZERO_SERVE_ENDPOINTS: Final = "ZeroServeEndpoints"
NON_ZERO_SERVE_ENDPOINTS: Final = "NonZeroServeEndpoints"
BOTH_ACTIVE_PENDING_CLUSTERS_EXIST: Final = "BothActivePendingClustersExist"
NO_PENDING_CLUSTER: Final = "NoPendingCluster"
NO_ACTIVE_CLUSTER: Final = "NoActiveCluster"
VALIDATION_FAILED: Final = "ValidationFailed"
SUSPEND_REQUESTED: Final = "SuspendRequested"
SUSPEND_IN_PROGRESS: Final = "SuspendInProgress"
SUSPEND_COMPLETE: Final = "SuspendComplete"
RESUMED: Final = "RayServiceResumed"

# Condition messages (calculateConditions)
MSG_INITIALIZING: Final = "RayService is initializing"
MSG_NON_ZERO: Final = "Number of serve endpoints is greater than 0"
MSG_ZERO: Final = "Number of serve endpoints dropped to 0"
MSG_BOTH: Final = "Both active and pending Ray clusters exist"
MSG_NO_PENDING: Final = "Active Ray cluster exists and no pending Ray cluster"
MSG_NO_ACTIVE: Final = ("No active Ray cluster exists, and the RayService is not initializing. "
                        "Please open a GitHub issue in the KubeRay repository.")

# serviceStatus (deprecated; equivalent to Ready=True)
SERVICE_STATUS_RUNNING: Final = "Running"

# Serve application / deployment statuses (serve.proto)
APP_RUNNING: Final = "RUNNING"

# K8sEventType (utils/constant.go). The command executor derives FailedTo* from these on failure.
CREATED_RAY_CLUSTER: Final = "CreatedRayCluster"
UPDATED_RAY_CLUSTER: Final = "UpdatedRayCluster"
DELETED_RAY_CLUSTER: Final = "DeletedRayCluster"
CREATED_SERVICE: Final = "CreatedService"
UPDATED_SERVICE: Final = "UpdatedService"
UPDATED_HEAD_POD_SERVE_LABEL: Final = "UpdatedHeadPodServeLabel"
UPDATED_SERVE_APPLICATIONS: Final = "UpdatedServeApplications"
FAILED_TO_UPDATE_SERVE_APPLICATIONS: Final = "FailedToUpdateServeApplications"
UPDATED_SERVE_TARGET_CAPACITY: Final = "UpdatedServeTargetCapacity"
FAILED_TO_UPDATE_TARGET_CAPACITY: Final = "FailedToUpdateTargetCapacity"
CREATED_GATEWAY: Final = "CreatedGateway"
UPDATED_GATEWAY: Final = "UpdatedGateway"
CREATED_HTTP_ROUTE: Final = "CreatedHTTPRoute"
UPDATED_HTTP_ROUTE: Final = "UpdatedHTTPRoute"
RAY_SERVICE_INITIALIZING_TIMEOUT_EVENT: Final = "RayServiceInitializingTimeout"

# Gateway API (incremental upgrade; utils/constant.go)
GATEWAY_API_VERSION: Final = "gateway.networking.k8s.io/v1"
GATEWAY_LISTENER_PORT_NAME: Final = "http"
DEFAULT_GATEWAY_LISTENER_PORT: Final = 80

# updateServeDeployment's error text (kept verbatim: users search the troubleshooting page for it)
SERVE_UPDATE_ERROR: Final = (
    "fail to create / update Serve applications. If you observe this error consistently, please check "
    "\"Issue 5: Fail to create / update Serve applications.\" in "
    "https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting/rayservice-troubleshooting.html"
    "#kuberay-raysvc-troubleshoot for more details. err: {err}"
)
