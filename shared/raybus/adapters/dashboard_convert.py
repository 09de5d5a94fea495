"""Ray dashboard payloads -> the gateway's observation models (`decisions.dashboard_contract`).

Keeps exactly what KubeRay's controllers read: for a job its RayJobInfo fields (status, message,
error type, start/end time, driver exit code); for Serve each app's status, message and route and
each deployment's status and message (KubeRay's ServeApplicationStatus / ServeDeploymentStatus).
Everything else (replica lists, actor ids, timestamps that move on every GET) is left out, so an
observation changes only when something a reconciler acts on changed.
"""

from __future__ import annotations

from raybus.adapters.dashboard_models import JobDetails, ServeDetails
from raybus.decisions.dashboard_contract import (
    JobObservation,
    ServeAppObservation,
    ServeDeploymentObservation,
)

GHOST_ERROR_TYPE = "JOB_SUPERVISOR_ACTOR_DIED"


def job_observation(job_id: str, details: JobDetails, *, deleted_by_us: bool = False) -> JobObservation:
    """`deleted_by_us`: this process DELETEd the job; a FAILED/JOB_SUPERVISOR_ACTOR_DIED record
    for it afterwards is the ghost even if a future Ray changes the ghost's entrypoint text."""
    ghost = details.is_supervisor_ghost or (
        deleted_by_us and details.status == "FAILED" and details.error_type == GHOST_ERROR_TYPE)
    return JobObservation(
        job_id=job_id,
        status=details.status.value,
        message=details.message or "",
        error_type=details.error_type,
        start_time_ms=details.start_time,
        end_time_ms=details.ended_at_ms,
        driver_exit_code=details.driver_exit_code,
        ghost=ghost,
    )


def serve_observation(details: ServeDetails) -> dict[str, ServeAppObservation]:
    return {
        name: ServeAppObservation(
            status=app.status.value,
            message=app.message,
            route_prefix=app.route_prefix,
            deployments={
                dep_name: ServeDeploymentObservation(status=dep.status.value, message=dep.message)
                for dep_name, dep in app.deployments.items()
            },
        )
        for name, app in details.applications.items()
    }


def jobs_by_submission_id(listing: list[JobDetails]) -> dict[str, JobDetails]:
    """`GET /api/jobs/` lists SUBMISSION and DRIVER entries in unstable order (README §3); a
    declared job is a submission id. DRIVER entries have none and are skipped."""
    return {d.submission_id: d for d in listing if d.submission_id}
