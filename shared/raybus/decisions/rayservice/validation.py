"""RayService validation outcome: rayservice_controller.go (validateRayService, L127-141).

Invalid -> Warning event (InvalidRayServiceMetadata / InvalidRayServiceSpec), condition
Ready=False reason ValidationFailed with the error as message, lastUpdateTime=now; no requeue.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from raybus.api.rayservice import RayService
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_service import validate_rayservice_metadata, validate_rayservice_spec
from raybus.decisions.commands import ObjectRef, RecordEvent, UpdateStatus
from raybus.decisions.job.validation import VALIDATION_FAILED, ValidationDecision
from raybus.decisions.rayservice.constants import READY
from raybus.decisions.rayservice.status import rfc3339, set_condition


def rayservice_validation(service: RayService, *, now: datetime,
                          gates: FeatureGates = DEFAULT_FEATURE_GATES) -> ValidationDecision | None:
    meta = service.metadata
    ref = ObjectRef(api_version="ray.io/v1", kind="RayService", namespace=meta.namespace or "default",
                    name=meta.name or "", uid=meta.uid)
    for err_type, errors in (
        ("InvalidRayServiceMetadata", validate_rayservice_metadata(meta)),
        ("InvalidRayServiceSpec", validate_rayservice_spec(service, gates=gates)),
    ):
        if not errors:
            continue
        message = "; ".join(errors)
        status: dict[str, Any] = service.status.to_dict() if service.status is not None else {}
        conditions = list(status.get("conditions") or [])
        if any(c.get("type") == READY and c.get("reason") == VALIDATION_FAILED
               and c.get("message") == message for c in conditions):
            return ValidationDecision(reasons=[f"RayService still invalid: {message}"])
        # KubeRay's setCondition: ObservedGeneration is the status' (not yet this generation's).
        set_condition(status, READY, "False", VALIDATION_FAILED, message, now=now)
        status["lastUpdateTime"] = rfc3339(now)
        where = f"{meta.namespace}/{meta.name}"
        return ValidationDecision(
            commands=[
                RecordEvent(reason=f"{where}: {message}", target=ref, type="Warning",
                            event_reason=err_type, message=f"{where}: {message}"),
                UpdateStatus(reason="RayService failed validation", target=ref, status=status),
            ],
            reasons=[f"{err_type}: {message}"],
        )
    return None
