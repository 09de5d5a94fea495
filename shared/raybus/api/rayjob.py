"""ray.io/v1 RayJob (KubeRay v1.7.0 ``ray-operator/apis/ray/v1/rayjob_types.go``)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from raybus.api.meta import K8sObject, RayModel, RayObject
from raybus.api.raycluster import RayClusterSpec, RayClusterStatus


class JobStatus(StrEnum):
    """Ray job status as reported by the Ray dashboard (mirrors Ray's ``JobStatus``)."""

    NEW = ""
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


# Ray's JobStatus.is_terminal(); KubeRay's IsJobTerminal must stay in sync with it.
TERMINAL_JOB_STATUSES = frozenset({JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED})


class JobDeploymentStatus(StrEnum):
    NEW = ""
    INITIALIZING = "Initializing"
    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"
    VALIDATION_FAILED = "ValidationFailed"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"
    RETRYING = "Retrying"
    WAITING = "Waiting"


# IsJobDeploymentTerminal: only Complete and Failed are terminal (ValidationFailed is handled
# before the state machine and never re-queued, but is not "terminal" for deletion rules).
TERMINAL_JOB_DEPLOYMENT_STATUSES = frozenset({JobDeploymentStatus.COMPLETE, JobDeploymentStatus.FAILED})


class JobFailedReason(StrEnum):
    SUBMISSION_FAILED = "SubmissionFailed"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    PRE_RUNNING_DEADLINE_EXCEEDED = "PreRunningDeadlineExceeded"
    APP_FAILED = "AppFailed"
    TRANSITION_GRACE_PERIOD_EXCEEDED = "JobDeploymentStatusTransitionGracePeriodExceeded"
    JOB_STATUS_CHECK_TIMEOUT_EXCEEDED = "JobStatusCheckTimeoutExceeded"
    VALIDATION_FAILED = "ValidationFailed"


class JobSubmissionMode(StrEnum):
    K8S_JOB = "K8sJobMode"
    HTTP = "HTTPMode"
    INTERACTIVE = "InteractiveMode"
    SIDECAR = "SidecarMode"


class DeletionPolicyType(StrEnum):
    DELETE_CLUSTER = "DeleteCluster"
    DELETE_WORKERS = "DeleteWorkers"
    DELETE_SELF = "DeleteSelf"
    DELETE_NONE = "DeleteNone"


class DeletionPolicy(RayModel):
    """Legacy onSuccess/onFailure policy (deprecated in KubeRay in favour of deletionRules)."""

    policy: str | None = None


class DeletionCondition(RayModel):
    # Exactly one of jobStatus (SUCCEEDED|FAILED) / jobDeploymentStatus (Failed) - CRD CEL rules.
    job_status: str | None = None
    job_deployment_status: str | None = None
    ttl_seconds: int | None = None


class DeletionRule(RayModel):
    policy: str = ""
    condition: DeletionCondition = Field(default_factory=DeletionCondition)


class DeletionStrategy(RayModel):
    on_success: DeletionPolicy | None = None
    on_failure: DeletionPolicy | None = None
    deletion_rules: list[DeletionRule] | None = None


class SubmitterConfig(RayModel):
    backoff_limit: int | None = None


class RayJobStatusInfo(RayModel):
    """Subset of the dashboard's job info kept in status.rayJobInfo."""

    start_time: str | None = None
    end_time: str | None = None


class RayJobSpec(RayModel):
    active_deadline_seconds: int | None = None
    pre_running_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    ray_cluster_spec: RayClusterSpec | None = None
    submitter_pod_template: K8sObject | None = None
    metadata: dict[str, str] | None = None
    cluster_selector: dict[str, str] | None = None
    submitter_config: SubmitterConfig | None = None
    managed_by: str | None = None
    deletion_strategy: DeletionStrategy | None = None
    entrypoint: str | None = None
    runtime_env_yaml: str | None = Field(default=None, alias="runtimeEnvYAML")
    job_id: str | None = Field(default=None, alias="jobId")
    submission_mode: str | None = None
    entrypoint_resources: str | None = None
    # float32 in Go; keep ints as ints so round trips stay exact.
    entrypoint_num_cpus: int | float | None = None
    entrypoint_num_gpus: int | float | None = None
    ttl_seconds_after_finished: int | None = None
    shutdown_after_job_finishes: bool | None = None
    suspend: bool | None = None


class RayJobStatus(RayModel):
    ray_job_info: RayJobStatusInfo | None = Field(default=None, alias="rayJobInfo")
    job_id: str | None = Field(default=None, alias="jobId")
    ray_cluster_name: str | None = None
    dashboard_url: str | None = Field(default=None, alias="dashboardURL")
    job_status: str | None = None
    job_deployment_status: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    succeeded: int | None = None
    failed: int | None = None
    ray_cluster_status: RayClusterStatus | None = None
    job_status_check_failure_start_time: str | None = None
    observed_generation: int | None = None


class RayJob(RayObject):
    kind: str | None = "RayJob"
    spec: RayJobSpec = Field(default_factory=RayJobSpec)
    status: RayJobStatus | None = None
