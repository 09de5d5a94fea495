"""Pydantic models of the Ray 2.60 dashboard REST payloads (Jobs and Serve).

Field names, nullability and types follow the captures in /work/shared/ray-dashboard (README §3
"JobDetails field names", §4 "Serve details field names"). Unknown extra fields are ignored so a
newer Ray does not break parsing; enums are strict because a value outside them means we are
talking to something that is not the API we know.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class JobStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        """KubeRay's IsJobTerminal: STOPPED, SUCCEEDED and FAILED never change again."""
        return self in (JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED)


class JobType(StrEnum):
    SUBMISSION = "SUBMISSION"  # submitted through /api/jobs/
    DRIVER = "DRIVER"  # a plain `ray.init(address="auto")` script (README §3 "plain drivers")


# README §3 `error_type`: the full enum in Ray 2.60's source. Kept as data, not a strict enum.
KNOWN_JOB_ERROR_TYPES = frozenset(
    {
        "RUNTIME_ENV_SETUP_FAILURE",
        "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
        "JOB_SUPERVISOR_ACTOR_START_FAILURE",
        "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE",
        "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE",
        "JOB_SUPERVISOR_ACTOR_DIED",
        "JOB_ENTRYPOINT_COMMAND_START_ERROR",
        "JOB_ENTRYPOINT_COMMAND_ERROR",
    }
)
GHOST_ENTRYPOINT = "Entrypoint not found."


class DriverInfo(_Model):
    id: str
    node_ip_address: str
    pid: str  # a string in the API (66_*)


class JobDetails(_Model):
    """One element of `GET /api/jobs/` or the body of `GET /api/jobs/<id>` (KubeRay's RayJobInfo)."""

    type: JobType
    job_id: str | None = None  # hex Ray job id, null unless the entrypoint calls ray.init()
    submission_id: str | None = None  # null for DRIVER entries (200_*)
    driver_info: DriverInfo | None = None
    status: JobStatus
    entrypoint: str
    message: str | None = None  # null for DRIVER jobs
    error_type: str | None = None
    start_time: int | None = None  # epoch ms; null on the ghost record (39b_*)
    end_time: int | None = None  # epoch ms; null until terminal; 0 for a running DRIVER (201_*)
    metadata: dict[str, str] | None = None
    runtime_env: dict[str, Any] | None = None
    driver_agent_http_address: str | None = None
    driver_node_id: str | None = None
    driver_exit_code: int | None = None

    @property
    def ended_at_ms(self) -> int | None:
        """end_time normalised: None while running (also for the DRIVER's 0)."""
        return self.end_time or None

    @property
    def is_supervisor_ghost(self) -> bool:
        """README §3: the FAILED record a dying supervisor re-creates after a DELETE."""
        return self.error_type == "JOB_SUPERVISOR_ACTOR_DIED" and self.entrypoint == GHOST_ENTRYPOINT


class JobSubmitRequest(_Model):
    """Body of `POST /api/jobs/` (KubeRay's RayJobRequest). Unset fields are not sent: the API
    rejects unknown keys with 400 (42_err_POST_unknown_field)."""

    entrypoint: str
    submission_id: str | None = None
    runtime_env: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    entrypoint_memory: int | None = None
    entrypoint_resources: dict[str, float] | None = None

    def to_body(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class JobSubmitResponse(_Model):
    job_id: str  # equals the submission id (10_*), not the hex Ray job id
    submission_id: str


class JobLogs(_Model):
    logs: str


class JobStopResponse(_Model):
    stopped: bool


class JobDeleteResponse(_Model):
    deleted: bool


class VersionInfo(_Model):
    version: str
    ray_version: str
    ray_commit: str
    session_name: str | None = None


# ---- Serve (README §4) -----------------------------------------------------------------------


class ApplicationStatus(StrEnum):
    """There is no app-level UPDATING: an app being updated shows DEPLOYING (README §4)."""

    NOT_STARTED = "NOT_STARTED"
    DEPLOYING = "DEPLOYING"
    DEPLOY_FAILED = "DEPLOY_FAILED"
    RUNNING = "RUNNING"
    UNHEALTHY = "UNHEALTHY"
    DELETING = "DELETING"


class DeploymentStatus(StrEnum):
    UPDATING = "UPDATING"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    DEPLOY_FAILED = "DEPLOY_FAILED"
    UPSCALING = "UPSCALING"
    DOWNSCALING = "DOWNSCALING"


class ActorDetails(_Model):
    node_id: str | None = None
    node_ip: str | None = None
    node_instance_id: str | None = None
    actor_id: str | None = None
    actor_name: str | None = None
    worker_id: str | None = None
    log_file_path: str | None = None


class ProxyDetails(ActorDetails):
    status: str  # STARTING, HEALTHY, UNHEALTHY, DRAINING, DRAINED


class ReplicaDetails(ActorDetails):
    replica_id: str
    state: str  # STARTING, UPDATING, RECOVERING, RUNNING, STOPPING, STOPPED, PENDING_MIGRATION
    pid: int | None = None
    start_time_s: float | None = None


class DeploymentDetails(_Model):
    name: str
    status: DeploymentStatus
    status_trigger: str
    message: str = ""
    deployment_config: dict[str, Any] = Field(default_factory=dict)
    target_num_replicas: int | None = None
    required_resources: dict[str, float] = Field(default_factory=dict)
    replicas: list[ReplicaDetails] = Field(default_factory=list)
    recent_dead_replicas: list[ReplicaDetails] = Field(default_factory=list)


class TopologyEdge(_Model):
    name: str
    app_name: str


class TopologyNode(_Model):
    name: str
    app_name: str
    outbound_deployments: list[TopologyEdge] = Field(default_factory=list)
    is_ingress: bool


class DeploymentTopology(_Model):
    app_name: str
    nodes: dict[str, TopologyNode]
    ingress_deployment: str | None = None


class ServeApplicationDetails(_Model):
    name: str
    route_prefix: str | None = None  # null while first DEPLOYING, when DELETING, on import failure
    docs_path: str | None = None
    status: ApplicationStatus
    message: str = ""
    last_deployed_time_s: float | None = None
    deployed_app_config: dict[str, Any] | None = None
    source: str | None = None
    deployments: dict[str, DeploymentDetails] = Field(default_factory=dict)
    external_scaler_enabled: bool | None = None
    deployment_topology: DeploymentTopology | None = None


class ServeDetails(_Model):
    """`GET /api/serve/applications/`. Before Serve starts (or after shutdown) only 4 keys exist
    (01_*, 101_*), hence the defaults."""

    controller_info: ActorDetails = Field(default_factory=ActorDetails)
    proxy_location: str | None = None
    http_options: dict[str, Any] | None = None
    grpc_options: dict[str, Any] | None = None
    proxies: dict[str, ProxyDetails] = Field(default_factory=dict)
    applications: dict[str, ServeApplicationDetails] = Field(default_factory=dict)
    target_capacity: float | None = None
    target_groups: list[dict[str, Any]] = Field(default_factory=list)
    controller_health_metrics: dict[str, Any] | None = None
    restores_unset_config_options: bool | None = None


class ServeDeploymentStatus(_Model):
    """KubeRay's ServeDeploymentStatus (name, status, message)."""

    name: str
    status: DeploymentStatus
    message: str = ""


class ServeApplicationStatus(_Model):
    """KubeRay's ServeApplicationStatus, what GetMultiApplicationStatus returns per app."""

    name: str
    status: ApplicationStatus
    message: str = ""
    deployments: dict[str, ServeDeploymentStatus] = Field(default_factory=dict)

    @classmethod
    def from_details(cls, app: ServeApplicationDetails) -> ServeApplicationStatus:
        return cls(
            name=app.name,
            status=app.status,
            message=app.message,
            deployments={
                n: ServeDeploymentStatus(name=d.name, status=d.status, message=d.message)
                for n, d in app.deployments.items()
            },
        )
