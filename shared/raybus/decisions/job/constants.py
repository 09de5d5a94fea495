"""KubeRay's RayJob constants (``rayjob_controller.go``, ``utils/constant.go``, ``common/job.go``).

Names follow KubeRay's Go identifiers in UPPER_SNAKE so a grep for the Go name finds the Python one.
"""

from __future__ import annotations

from typing import Final

# rayjob_controller.go
RAY_JOB_DEFAULT_REQUEUE_SECONDS: Final = 3.0  # RayJobDefaultRequeueDuration
PYTHON_UNBUFFERED_ENV_VAR_NAME: Final = "PYTHONUNBUFFERED"
DEFAULT_SUBMITTER_FINISHED_TIMEOUT_SECONDS: Final = 30  # DefaultSubmitterFinishedTimeout
# raybus: how long a failed submitter waits for the dashboard-poller's read of the Ray job before
# the failure is attributed to the submission (see running.py `_await_job_status`).
SUBMITTER_FAILURE_READBACK_SECONDS: Final = 5

# utils/constant.go
RAY_JOB_STOP_JOB_FINALIZER: Final = "ray.io/rayjob-finalizer"  # RayJobStopJobFinalizer
RAY_JOB_CLUSTER_SELECTOR_KEY: Final = "ray.io/cluster"
RAY_JOB_SUBMISSION_MODE_LABEL_KEY: Final = "ray.io/job-submission-mode"
DISABLE_PROVISIONED_HEAD_RESTART_ANNOTATION_KEY: Final = "ray.io/disable-provisioned-head-restart"
SUBMITTER_CONTAINER_NAME: Final = "ray-job-submitter"  # utils.SubmitterContainerName
RAY_DASHBOARD_ADDRESS: Final = "RAY_DASHBOARD_ADDRESS"
RAY_JOB_SUBMISSION_ID: Final = "RAY_JOB_SUBMISSION_ID"
DEFAULT_SUBMITTER_BACKOFF_LIMIT: Final = 2  # createNewK8sJob: ptr.To[int32](2)
DEFAULT_TRANSITION_GRACE_PERIOD_SECONDS: Final = 300  # DEFAULT_RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS
DEFAULT_STATUS_CHECK_TIMEOUT_SECONDS: Final = 300  # RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS default
KUBERAY_OPERATOR: Final = "ray.io/kuberay-operator"  # utils.KubeRayController

# Kubernetes batch/v1 Job condition types.
JOB_COMPLETE: Final = "Complete"
JOB_FAILED: Final = "Failed"

# K8sEventType values the RayJob controller records (utils/constant.go).
CREATED_RAY_CLUSTER: Final = "CreatedRayCluster"
DELETED_RAY_CLUSTER: Final = "DeletedRayCluster"
UPDATED_RAY_CLUSTER: Final = "UpdatedRayCluster"
RAY_CLUSTER_NOT_FOUND: Final = "RayClusterNotFound"
CREATED_RAY_JOB_SUBMITTER: Final = "CreatedRayJobSubmitter"
DELETED_RAY_JOB_SUBMITTER: Final = "DeletedRayJobSubmitter"
CREATED_SERVICE: Final = "CreatedService"
UPDATED_SERVICE: Final = "UpdatedService"
# The executor turns a failed Created*/Deleted*/Updated* command into FailedToCreate*/... Warning
# events (FailedToCreateRayCluster, FailedToCreateRayJobSubmitter, FailedToDeleteRayCluster, ...).

# selectMostImpactfulRule's order.
DELETION_POLICY_IMPACT: Final = {"DeleteSelf": 4, "DeleteCluster": 3, "DeleteWorkers": 2, "DeleteNone": 1}
