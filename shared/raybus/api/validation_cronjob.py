"""RayCronJob validation mirroring KubeRay v1.7 ValidateRayCronJobSpec (alpha, gate RayCronJob)."""

from __future__ import annotations

from raybus.api.cron import validate_cron_schedule
from raybus.api.predicates import MAX_RAY_CRON_JOB_NAME_LENGTH
from raybus.api.raycronjob import RayCronJob
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_cluster import effective_name
from raybus.api.validation_job import validate_rayjob_spec


def validate_raycronjob(cron_job: RayCronJob, *, settings: FeatureGates = DEFAULT_FEATURE_GATES) -> list[str]:
    """Time zone names are only checked for emptiness: resolving them needs the tz database (I/O),
    which belongs to the RayCronJob controller, not to this pure module."""
    errs: list[str] = []
    name = effective_name(cron_job.metadata)
    # Bounded so the deterministic child RayJob name stays within the RayJob limit.
    if len(name) > MAX_RAY_CRON_JOB_NAME_LENGTH:
        errs.append(f"RayCronJob name should be no more than {MAX_RAY_CRON_JOB_NAME_LENGTH} characters")
    schedule = cron_job.spec.schedule
    if "TZ" in schedule:
        errs.append("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    elif (problem := validate_cron_schedule(schedule)) is not None:
        errs.append(f"invalid cron schedule: {problem}")
    if cron_job.spec.time_zone is not None and cron_job.spec.time_zone == "":
        errs.append("timeZone must not be empty string, omit the field to use the local time zone of the KubeRay "
                    "operator")
    errs += [
        f"invalid RayJob template: {e}"
        for e in validate_rayjob_spec(cron_job.spec.job_template, cron_job.metadata.annotations, gates=settings)
    ]
    return errs
