"""Public validation entry points (pure; feature gates passed explicitly).

    from raybus.api.validation import validate, validate_raycluster
    problems = validate_raycluster(cluster, settings=FeatureGates(ray_cluster_mtls=True))
    if problems: ...  # KubeRay: Warning event + (RayJob) ValidationFailed, no requeue

Each function returns a list of human-readable messages in KubeRay's wording; empty = valid.
"""

from __future__ import annotations

from raybus.api.load import RayAny
from raybus.api.raycluster import RayCluster
from raybus.api.raycronjob import RayCronJob
from raybus.api.rayjob import RayJob
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_cluster import (
    validate_raycluster,
    validate_raycluster_metadata,
    validate_raycluster_spec,
    validate_raycluster_status,
    validate_raycluster_upgrade_options,
)
from raybus.api.validation_cronjob import validate_raycronjob
from raybus.api.validation_job import (
    validate_rayjob,
    validate_rayjob_metadata,
    validate_rayjob_spec,
    validate_rayjob_status,
)
from raybus.api.validation_service import (
    validate_rayservice,
    validate_rayservice_metadata,
    validate_rayservice_spec,
)

__all__ = [
    "validate",
    "validate_raycluster",
    "validate_raycluster_metadata",
    "validate_raycluster_spec",
    "validate_raycluster_status",
    "validate_raycluster_upgrade_options",
    "validate_raycronjob",
    "validate_rayjob",
    "validate_rayjob_metadata",
    "validate_rayjob_spec",
    "validate_rayjob_status",
    "validate_rayservice",
    "validate_rayservice_metadata",
    "validate_rayservice_spec",
]


def validate(obj: RayAny, *, settings: FeatureGates = DEFAULT_FEATURE_GATES) -> list[str]:
    """Dispatch on the object's type."""
    if isinstance(obj, RayCluster):
        return validate_raycluster(obj, settings=settings)
    if isinstance(obj, RayJob):
        return validate_rayjob(obj, settings=settings)
    if isinstance(obj, RayCronJob):
        return validate_raycronjob(obj, settings=settings)
    return validate_rayservice(obj, settings=settings)
