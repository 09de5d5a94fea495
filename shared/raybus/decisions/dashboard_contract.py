"""The dashboard gateway's contract, as pure data: what reconcilers ask of Ray dashboards and what
the dashboard-poller reports back.

KubeRay's RayJob and RayService controllers call the dashboard from inside their reconcile
(GetJobInfo every 3 s, GetServeDetails + proxy health every 2 s, SubmitJob, StopJob, DeleteJob,
UpdateDeployments). In raybus only the dashboard-poller talks to dashboards; reconcilers:
- declare what they need observed (`DashboardInterest`, level state, last value per owner);
- ask for writes (`DashboardCommand`), executed idempotently by the poller, one outcome each
  (`DashboardCommandResult`);
- read what was observed (`ClusterObservation`, published by the poller only when it changes).
Decision code reads and writes these models; the bus envelopes (`raybus.bus.envelopes`) wrap them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


# --- observations ---------------------------------------------------------------------------------
class JobObservation(_Frozen):
    """One Ray job as the dashboard reported it (KubeRay's RayJobInfo, the fields it uses)."""

    job_id: str  # the submission id (KubeRay's status.jobId)
    status: str  # PENDING | RUNNING | STOPPED | SUCCEEDED | FAILED
    message: str = ""
    error_type: str | None = None
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    driver_exit_code: int | None = None
    # The FAILED/JOB_SUPERVISOR_ACTOR_DIED record real Ray re-creates after DELETE of a job: never
    # a reason to flip a RayJob that raybus stopped or deleted.
    ghost: bool = False


class ServeDeploymentObservation(_Frozen):
    status: str  # UPDATING | HEALTHY | UNHEALTHY | ...
    message: str = ""


class ServeAppObservation(_Frozen):
    status: str  # NOT_STARTED | DEPLOYING | RUNNING | DEPLOY_FAILED | DELETING | UNHEALTHY
    message: str = ""
    route_prefix: str | None = None
    deployments: dict[str, ServeDeploymentObservation] = Field(default_factory=dict)


class ClusterObservation(_Frozen):
    """What one Ray cluster's dashboard (and head proxy) last answered.

    Only the parts some reconciler declared interest in are filled. `jobs_missing` lists declared
    job ids the dashboard answered 404 for (a definite "not found", unlike a timeout). A part that
    could not be read this round keeps its last known value: faults never erase an observation.
    """

    namespace: str
    cluster: str
    reachable: bool = False
    jobs: dict[str, JobObservation] = Field(default_factory=dict)
    jobs_missing: list[str] = Field(default_factory=list)
    serve_apps: dict[str, ServeAppObservation] | None = None  # None: never read yet
    proxy_healthy: dict[str, bool] = Field(default_factory=dict)  # head pod name -> /-/healthz ok


# --- interest: what a reconciler needs observed ----------------------------------------------------
class DashboardInterest(_Frozen):
    """Level state, one per (controller, owner object): replaces the previous one entirely.

    An owner with nothing to observe publishes an empty interest (no cluster). `expect_change`
    asks for the fast cadence (a job that may change soon, apps deploying, an upgrade). `poll_now`
    is a token: whenever it changes the poller reads the cluster at once (e.g. the submitter
    container just ended, so the Ray job has most likely ended too). `follow_jobs` (declared jobs)
    asks for an end signal that costs no polling: the poller holds each such job's log tail stream
    open, as `ray job logs --follow` does, and reads the cluster at once when the head closes it
    (HTTPMode/InteractiveMode, which have no submitter container whose end Kubernetes reports).
    """

    cluster: str | None = None  # RayCluster name (same namespace as the owner)
    jobs: list[str] = Field(default_factory=list)
    serve: bool = False
    proxy_pods: dict[str, str] = Field(default_factory=dict)  # head pod name -> pod IP
    proxy_port: int = 8000
    expect_change: bool = False
    poll_now: str = ""
    follow_jobs: list[str] = Field(default_factory=list)  # each also read as if in `jobs`
    # The owner learns of its jobs' end from Kubernetes (K8sJobMode/SidecarMode: the submitter
    # container follows the job and ends with it) and then changes `poll_now`: no fast cadence
    # just because a job started recently.
    job_end_signalled: bool = False


# --- commands: writes the poller performs ---------------------------------------------------------
class _DashboardCommand(_Frozen):
    reason: str = Field(description="Why: logged, and used for the owner's Kubernetes Event")
    cluster: str  # RayCluster name, same namespace as the owner


class SubmitJob(_DashboardCommand):
    """POST /api/jobs/ (HTTPMode). A 'submission id already exists' answer counts as success."""

    op: Literal["submit_job"] = "submit_job"
    job_id: str  # submission_id
    entrypoint: str
    runtime_env: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    entrypoint_resources: dict[str, float] | None = None


class StopJob(_DashboardCommand):
    op: Literal["stop_job"] = "stop_job"
    job_id: str


class DeleteJob(_DashboardCommand):
    op: Literal["delete_job"] = "delete_job"
    job_id: str


class PutServeConfig(_DashboardCommand):
    """PUT /api/serve/applications/ with serveConfigV2 (as JSON). `config_hash` identifies what
    was sent, for the reconciler's serve-config cache."""

    op: Literal["put_serve_config"] = "put_serve_config"
    config: dict[str, Any]
    config_hash: str


class DeleteServeApps(_DashboardCommand):
    op: Literal["delete_serve_apps"] = "delete_serve_apps"


DashboardCommand = Annotated[
    SubmitJob | StopJob | DeleteJob | PutServeConfig | DeleteServeApps, Field(discriminator="op")
]


class DashboardCommandResult(_Frozen):
    """How a dashboard command ended. `state`:
    - ok: done (including idempotent successes: submission id exists, job already gone);
    - failed: the dashboard refused it (a definite answer: bad request, job not terminal, ...);
    - unknown: no definite answer (timeout); the poller read the state back and reports it in the
      observation, never assuming success or failure.
    """

    command_id: str
    op: str
    cluster: str
    state: Literal["ok", "failed", "unknown"]
    message: str = ""
    # Never executed: revoked in the command ledger before the poller claimed it (state "failed").
    # Not a refusal by the dashboard: re-decide it.
    expired: bool = False
