"""RayJob validation outcome: rayjob_controller.go L152-170.

Invalid -> Warning event (errType as KubeRay: InvalidRayJobMetadata / InvalidRayJobSpec /
InvalidRayJobStatus), status.jobDeploymentStatus=ValidationFailed, reason=ValidationFailed,
message=the error; terminal, no requeue. Decided again only when the message would change, so a
resync does not repeat the Event for the same problem.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raybus.api.rayjob import RayJob
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_job import (
    validate_rayjob_metadata,
    validate_rayjob_spec,
    validate_rayjob_status,
)
from raybus.decisions.commands import Command, ObjectRef, RecordEvent, UpdateStatus

VALIDATION_FAILED = "ValidationFailed"


class ValidationDecision(BaseModel):
    model_config = ConfigDict(frozen=True)
    commands: list[Command] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)


def _ref(obj: RayJob) -> ObjectRef:
    return ObjectRef(api_version="ray.io/v1", kind=obj.kind or "RayJob",
                     namespace=obj.metadata.namespace or "default", name=obj.metadata.name or "",
                     uid=obj.metadata.uid)


def rayjob_validation(job: RayJob, *, gates: FeatureGates = DEFAULT_FEATURE_GATES) -> ValidationDecision | None:
    """None when the RayJob is valid (the lifecycle reconcile goes on)."""
    for err_type, errors in (
        ("InvalidRayJobMetadata", validate_rayjob_metadata(job.metadata)),
        ("InvalidRayJobSpec", validate_rayjob_spec(job.spec, job.metadata.annotations, gates=gates)),
        ("InvalidRayJobStatus", validate_rayjob_status(job)),
    ):
        if not errors:
            continue
        message = "; ".join(errors)
        current = job.status
        if (current is not None and current.job_deployment_status == VALIDATION_FAILED
                and current.message == message):
            return ValidationDecision(reasons=[f"RayJob still invalid: {message}"])
        status: dict[str, Any] = current.to_dict() if current is not None else {}
        status.update(jobDeploymentStatus=VALIDATION_FAILED, reason=VALIDATION_FAILED, message=message)
        where = f"{job.metadata.namespace}/{job.metadata.name}"
        return ValidationDecision(
            commands=[
                RecordEvent(reason=f"{where}: {message}", target=_ref(job), type="Warning",
                            event_reason=err_type, message=f"{where}: {message}"),
                UpdateStatus(reason="RayJob failed validation", target=_ref(job), status=status),
            ],
            reasons=[f"{err_type}: {message}"],
        )
    return None
