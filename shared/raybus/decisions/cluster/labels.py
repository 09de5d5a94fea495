"""KubeRay constants used to build Pods, Services, Ingresses and RBAC objects.

Values are those of ``ray-operator/controllers/ray/utils/constant.go`` and the constant blocks of
``controllers/ray/common/{pod,ingress}.go`` in KubeRay v1.7. Names follow KubeRay's identifiers in
UPPER_SNAKE so a grep for the Go name finds the Python one.
"""

from __future__ import annotations

from typing import Final

# --- Label keys (utils/constant.go) -----------------------------------------------------------------
RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: Final = "ray.io/originated-from-cr-name"
RAY_ORIGINATED_FROM_CRD_LABEL_KEY: Final = "ray.io/originated-from-crd"
RAY_CLUSTER_LABEL_KEY: Final = "ray.io/cluster"
RAY_NODE_TYPE_LABEL_KEY: Final = "ray.io/node-type"
RAY_NODE_GROUP_LABEL_KEY: Final = "ray.io/group"
RAY_NODE_LABEL_KEY: Final = "ray.io/is-ray-node"
RAY_ID_LABEL_KEY: Final = "ray.io/identifier"
RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY: Final = "ray.io/serve"
RAY_CLUSTER_HEADLESS_SERVICE_LABEL_KEY: Final = "ray.io/headless-worker-svc"
RAY_WORKER_REPLICA_NAME_KEY: Final = "ray.io/worker-group-replica-name"
RAY_WORKER_REPLICA_INDEX_KEY: Final = "ray.io/worker-group-replica-index"
RAY_HOST_INDEX_KEY: Final = "ray.io/replica-host-index"
KUBERNETES_APPLICATION_NAME_LABEL_KEY: Final = "app.kubernetes.io/name"
KUBERNETES_CREATED_BY_LABEL_KEY: Final = "app.kubernetes.io/created-by"
APPLICATION_NAME: Final = "kuberay"
COMPONENT_NAME: Final = "kuberay-operator"

# labelPod: these three system labels are never taken from the user's template / group labels.
NON_OVERRIDABLE_POD_LABELS: Final = frozenset(
    {RAY_NODE_TYPE_LABEL_KEY, RAY_NODE_GROUP_LABEL_KEY, RAY_CLUSTER_LABEL_KEY}
)

# --- Node types / label values ----------------------------------------------------------------------
HEAD_NODE: Final = "head"
WORKER_NODE: Final = "worker"
RAY_NODE_HEAD_GROUP_LABEL_VALUE: Final = "headgroup"
ENABLE_RAY_CLUSTER_SERVING_SERVICE_TRUE: Final = "true"
ENABLE_RAY_CLUSTER_SERVING_SERVICE_FALSE: Final = "false"

# utils.CRDType values (also the values of ray.io/originated-from-crd).
RAY_CLUSTER_CRD: Final = "RayCluster"
RAY_JOB_CRD: Final = "RayJob"
RAY_SERVICE_CRD: Final = "RayService"

# --- Annotation keys -----------------------------------------------------------------------------------
RAY_FT_ENABLED_ANNOTATION_KEY: Final = "ray.io/ft-enabled"
RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY: Final = "ray.io/external-storage-namespace"
RAY_OVERWRITE_CONTAINER_CMD_ANNOTATION_KEY: Final = "ray.io/overwrite-container-cmd"
ENABLE_SERVE_SERVICE_KEY: Final = "ray.io/enable-serve-service"
ENABLE_SERVE_SERVICE_TRUE: Final = "true"
INGRESS_CLASS_ANNOTATION_KEY: Final = "kubernetes.io/ingress.class"

# --- Containers / volumes (common/pod.go) ---------------------------------------------------------
RAY_CONTAINER_INDEX: Final = 0
SHARED_MEMORY_VOLUME_NAME: Final = "shared-mem"
SHARED_MEMORY_VOLUME_MOUNT_PATH: Final = "/dev/shm"
PLASMA_DIRECTORY_PARAM_KEY: Final = "plasma-directory"
RAY_LOG_VOLUME_NAME: Final = "ray-logs"
RAY_LOG_VOLUME_MOUNT_PATH: Final = "/tmp/ray"
AUTOSCALER_CONTAINER_NAME: Final = "autoscaler"
WAIT_GCS_READY_INIT_CONTAINER_NAME: Final = "wait-gcs-ready"
RAY_TOKEN_VOLUME_NAME: Final = "ray-token"
RAY_TOKEN_MOUNT_PATH: Final = "/var/run/secrets/ray.io/serviceaccount"

# Accelerators (common/pod.go customAcceleratorToRayResourceMap).
NEURON_CORE_CONTAINER_RESOURCE_NAME: Final = "aws.amazon.com/neuroncore"
NEURON_CORE_RAY_RESOURCE_NAME: Final = "neuron_cores"
TPU_CONTAINER_RESOURCE_NAME: Final = "google.com/tpu"
TPU_RAY_RESOURCE_NAME: Final = "TPU"
CUSTOM_ACCELERATOR_TO_RAY_RESOURCE: Final = {
    NEURON_CORE_CONTAINER_RESOURCE_NAME: NEURON_CORE_RAY_RESOURCE_NAME,
    TPU_CONTAINER_RESOURCE_NAME: TPU_RAY_RESOURCE_NAME,
}

# --- Ports ----------------------------------------------------------------------------------------------
DEFAULT_CLIENT_PORT: Final = 10001
DEFAULT_GCS_SERVER_PORT: Final = 6379
DEFAULT_DASHBOARD_PORT: Final = 8265
DEFAULT_METRICS_PORT: Final = 8080
DEFAULT_DASHBOARD_AGENT_LISTEN_PORT: Final = 52365
DEFAULT_SERVING_PORT: Final = 8000
CLIENT_PORT_NAME: Final = "client"
GCS_SERVER_PORT_NAME: Final = "gcs-server"
DASHBOARD_PORT_NAME: Final = "dashboard"
METRICS_PORT_NAME: Final = "metrics"
SERVING_PORT_NAME: Final = "serve"
DEFAULT_SERVICE_APP_PROTOCOL: Final = "tcp"
HEADLESS_SERVICE_SUFFIX: Final = "headless"

# --- Container env var names ---------------------------------------------------------------------------
RAY_CLUSTER_NAME: Final = "RAY_CLUSTER_NAME"
RAY_CLUSTER_NAMESPACE: Final = "RAY_CLUSTER_NAMESPACE"
RAY_IP: Final = "RAY_IP"
FQ_RAY_IP: Final = "FQ_RAY_IP"
RAY_PORT: Final = "RAY_PORT"
RAY_ADDRESS: Final = "RAY_ADDRESS"
RAY_REDIS_ADDRESS: Final = "RAY_REDIS_ADDRESS"
REDIS_PASSWORD: Final = "REDIS_PASSWORD"
REDIS_USERNAME: Final = "REDIS_USERNAME"
RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE: Final = "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE"
RAY_EXTERNAL_STORAGE_NS: Final = "RAY_external_storage_namespace"
RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S: Final = "RAY_gcs_rpc_server_reconnect_timeout_s"
RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO: Final = "RAY_timeout_ms_task_wait_for_death_info"
RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS: Final = "RAY_gcs_server_request_timeout_seconds"
RAY_SERVE_KV_TIMEOUT_S: Final = "RAY_SERVE_KV_TIMEOUT_S"
RAY_USAGE_STATS_KUBERAY_IN_USE: Final = "RAY_USAGE_STATS_KUBERAY_IN_USE"
RAY_USAGE_STATS_EXTRA_TAGS: Final = "RAY_USAGE_STATS_EXTRA_TAGS"
KUBERAY_GEN_RAY_START_CMD: Final = "KUBERAY_GEN_RAY_START_CMD"
KUBERAY_GEN_AUTOSCALER_START_CMD: Final = "KUBERAY_GEN_AUTOSCALER_START_CMD"
RAY_CLOUD_INSTANCE_ID: Final = "RAY_CLOUD_INSTANCE_ID"
RAY_NODE_TYPE_NAME: Final = "RAY_NODE_TYPE_NAME"
RAY_ENABLE_AUTOSCALER_V2: Final = "RAY_enable_autoscaler_v2"
RAY_START_ULIMIT_OPEN_FILES: Final = "RAY_START_ULIMIT_OPEN_FILES"
RAY_AUTH_MODE_ENV_VAR: Final = "RAY_AUTH_MODE"
RAY_AUTH_TOKEN_ENV_VAR: Final = "RAY_AUTH_TOKEN"
RAY_ENABLE_K8S_TOKEN_AUTH_ENV_VAR: Final = "RAY_ENABLE_K8S_TOKEN_AUTH"
RAY_AUTH_TOKEN_SECRET_KEY: Final = "auth_token"
AUTH_MODE_TOKEN: Final = "token"

DEFAULT_WORKER_RAY_GCS_RECONNECT_TIMEOUT_S: Final = "600"
LOCAL_HOST: Final = "127.0.0.1"

# --- Probes (utils/constant.go) -----------------------------------------------------------------------
DEFAULT_READINESS_PROBE_INITIAL_DELAY_SECONDS: Final = 10
DEFAULT_READINESS_PROBE_TIMEOUT_SECONDS: Final = 2
DEFAULT_HEAD_READINESS_PROBE_TIMEOUT_SECONDS: Final = 5
DEFAULT_READINESS_PROBE_PERIOD_SECONDS: Final = 5
DEFAULT_READINESS_PROBE_SUCCESS_THRESHOLD: Final = 1
DEFAULT_READINESS_PROBE_FAILURE_THRESHOLD: Final = 10
SERVE_READINESS_PROBE_FAILURE_THRESHOLD: Final = 1
DEFAULT_LIVENESS_PROBE_INITIAL_DELAY_SECONDS: Final = 30
DEFAULT_LIVENESS_PROBE_TIMEOUT_SECONDS: Final = 2
DEFAULT_HEAD_LIVENESS_PROBE_TIMEOUT_SECONDS: Final = 5
DEFAULT_LIVENESS_PROBE_PERIOD_SECONDS: Final = 5
DEFAULT_LIVENESS_PROBE_SUCCESS_THRESHOLD: Final = 1
DEFAULT_LIVENESS_PROBE_FAILURE_THRESHOLD: Final = 120
RAY_AGENT_RAYLET_HEALTH_PATH: Final = "api/local_raylet_healthz"
RAY_DASHBOARD_GCS_HEALTH_PATH: Final = "api/gcs_healthz"
RAY_SERVE_PROXY_HEALTH_PATH: Final = "-/healthz"
# Ray >= 2.53 unified endpoint (ray-project/ray#56943, KubeRay #4448).
RAY_NODE_HEALTH_PATH: Final = "/api/healthz"
# v1.7: one try per probe run (wget's default 20 retries outlived the probe's timeout).
BASE_WGET_HEALTH_COMMAND: Final = "wget --tries 1 -T {timeout} -q -O- http://localhost:{port}/{path} | grep success"
# v1.7 (kuberay#4468): the submitter's GCS health wait uses Python's urllib, not wget (a head image
# without wget would wait forever); every Ray image has Python.
BASE_PYTHON_HEALTH_COMMAND: Final = ('python -c "import urllib.request; r=urllib.request.urlopen(\'{url}\', '
                                     'timeout={timeout}); exit(0 if b\'success\' in r.read() else 1)"')
RAY_DASHBOARD_GCS_HEALTH_CHECK_TIMEOUT_SECONDS: Final = 10

# --- Naming ---------------------------------------------------------------------------------------------
SERVE_NAME: Final = "serve"
MAX_NAME_LENGTH: Final = 50  # utils.CheckName: 63 - ("-worker-" + 5 generated chars)
MAX_LABEL_LENGTH: Final = 63  # utils.CheckLabel
RAY_API_VERSION: Final = "ray.io/v1"
RAY_CLUSTER_KIND: Final = "RayCluster"
