"""ray.io/v1 RayCronJob (KubeRay v1.7.0 ``raycronjob_types.go``; alpha, gate RayCronJob)."""

from __future__ import annotations

from pydantic import Field

from raybus.api.meta import RayModel, RayObject
from raybus.api.rayjob import RayJobSpec


class RayCronJobSpec(RayModel):
    job_template: RayJobSpec = Field(default_factory=RayJobSpec)
    schedule: str = ""
    # None means the operator's local time zone; "" is rejected by ValidateRayCronJobSpec.
    time_zone: str | None = None
    suspend: bool | None = None


class RayCronJobStatus(RayModel):
    last_schedule_time: str | None = None


class RayCronJob(RayObject):
    kind: str | None = "RayCronJob"
    spec: RayCronJobSpec = Field(default_factory=RayCronJobSpec)
    status: RayCronJobStatus | None = None
