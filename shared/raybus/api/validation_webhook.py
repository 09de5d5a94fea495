"""KubeRay v1.7's optional validating webhooks (``ray-operator/pkg/webhooks/v1``) as pure code.

KubeRay's webhooks check, on create and update of RayCluster, RayJob and RayService, only what
``Validate<Kind>Metadata`` checks (the name) and, for a RayCluster, that worker group names are
unique; everything else the operator judges when it reconciles (a Warning Event, a RayJob's
ValidationFailed). ``Strictness.FULL`` is raybus's own option: the operator's whole validation at
admission time, so a RayCluster whose worker group has minReplicas > maxReplicas is refused by
``kubectl apply`` instead of reported later. Errors are field errors as ``apierrors.NewInvalid``
words them; :func:`invalid_status` is the Status the webhook answers and the API server relays:
``admission webhook "vraycluster.kb.io" denied the request: RayCluster.ray.io "x" is invalid: ...``.

One wording differs: KubeRay prints a duplicate worker group's whole WorkerGroupSpec as Go's
``%#v`` (pointer addresses included); raybus prints its group name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from raybus.api.load import RayAny
from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_cluster import (
    validate_managed_by,
    validate_raycluster_metadata,
    validate_raycluster_spec,
    validate_raycluster_upgrade_options,
)
from raybus.api.validation_job import validate_rayjob_metadata, validate_rayjob_spec
from raybus.api.validation_service import validate_rayservice_metadata, validate_rayservice_spec

GROUP = "ray.io"


class Strictness(StrEnum):
    KUBERAY = "kuberay"  # KubeRay's webhooks: names and unique worker group names
    FULL = "full"  # also everything the operator validates before it reconciles


@dataclass(frozen=True)
class FieldError:
    """field.Error: `<field>: <body>`, body e.g. `Invalid value: "x": must be unique`."""

    field: str
    reason: str  # the StatusCause type: FieldValueInvalid, FieldValueForbidden
    body: str

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"


def _quoted(value: str) -> str:
    """Go's %q of a string (JSON's escapes cover what names and group names can hold)."""
    return json.dumps(value)


def _invalid(field: str, value: str, detail: str) -> FieldError:
    return FieldError(field, "FieldValueInvalid", f"Invalid value: {_quoted(value)}: {detail}")


def _forbidden(field: str, detail: str) -> FieldError:
    return FieldError(field, "FieldValueForbidden", f"Forbidden: {detail}")


def _name_error(name: str, problems: list[str]) -> list[FieldError]:
    """Validate<Kind>Metadata returns its first problem, on metadata.name."""
    return [_invalid("metadata.name", name, problems[0])] if problems else []


def _duplicate_worker_group(cluster: RayCluster) -> list[FieldError]:
    """validateWorkerGroups: the first repeated groupName."""
    seen: set[str] = set()
    for i, group in enumerate(cluster.spec.worker_group_specs or []):
        if group.group_name in seen:
            return [_invalid(f"spec.workerGroupSpecs[{i}]", group.group_name, "worker group names must be unique")]
        seen.add(group.group_name)
    return []


def _operator(problems: list[str]) -> list[FieldError]:
    return [_forbidden("spec", p) for p in problems]


def webhook_errors(obj: RayAny, *, strictness: Strictness = Strictness.KUBERAY,
                   gates: FeatureGates = DEFAULT_FEATURE_GATES) -> list[FieldError]:
    """What the webhook refuses `obj` for (create and update alike, as KubeRay's); [] = allowed.
    The status is not judged: the main resource's writes cannot change it."""
    full = strictness is Strictness.FULL
    meta = obj.metadata
    name = meta.name or ""
    if isinstance(obj, RayCluster):
        errs = _name_error(name, validate_raycluster_metadata(meta)) + _duplicate_worker_group(obj)
        if full:
            errs += _operator(validate_managed_by(obj.spec.managed_by)
                              + validate_raycluster_spec(obj.spec, meta.annotations, gates=gates)
                              + validate_raycluster_upgrade_options(obj))
        return errs
    if isinstance(obj, RayJob):
        errs = _name_error(name, validate_rayjob_metadata(meta))
        return errs + (_operator(validate_rayjob_spec(obj.spec, meta.annotations, gates=gates)) if full else [])
    if isinstance(obj, RayService):
        errs = _name_error(name, validate_rayservice_metadata(meta))
        return errs + (_operator(validate_rayservice_spec(obj, gates=gates)) if full else [])
    return []  # RayCronJob: KubeRay has no webhook for it


def invalid_status(kind: str, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """apierrors.NewInvalid(schema.GroupKind{ray.io, kind}, name, errors).Status()."""
    aggregate = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    return {
        "status": "Failure",
        "code": 422,
        "reason": "Invalid",
        "message": f"{kind}.{GROUP} {_quoted(name)} is invalid: {aggregate}",
        "details": {"group": GROUP, "kind": kind, "name": name,
                    "causes": [{"reason": e.reason, "message": e.body, "field": e.field} for e in errors]},
    }
