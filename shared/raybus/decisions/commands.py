"""Commands: what decision code asks the command executor to do against Kubernetes.

Decision functions return these (with a human-readable reason each, as KubeRay's controllers log
and record Events for every action). The executor is the only component that turns them into API
calls; it applies them idempotently (create tolerates AlreadyExists, delete tolerates NotFound).
Objects to create always carry an explicit metadata.name chosen by decision code, so a redelivered
command can never create a second pod the way a retried generateName create would.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ObjectRef(BaseModel):
    """Enough to address one Kubernetes object."""

    model_config = ConfigDict(frozen=True)

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None  # precondition: act only on this incarnation of the object

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, api_version: str, kind: str, namespace: str = "") -> ObjectRef:
        """The ref of a raw object as listed/watched (uid included); `namespace` if it has none."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        return cls(api_version=api_version, kind=kind, namespace=str(meta.get("namespace") or namespace),
                   name=str(meta.get("name") or ""), uid=str(meta["uid"]) if meta.get("uid") else None)


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True)
    reason: str = Field(description="Why: logged and used for the Kubernetes Event, like KubeRay's")


class CreateObject(_Command):
    op: Literal["create"] = "create"
    object: dict[str, Any]  # full manifest: apiVersion, kind, metadata.name/namespace, spec
    event_reason: str | None = None  # e.g. "CreatedHeadPod"; None = no Event
    # Secret `data` keys the executor fills with a fresh random token at create time. Decisions are
    # pure and deterministic, and a Secret value must neither be derivable from stable inputs nor
    # travel on the bus: the manifest carries the key only, the executor generates the value.
    generated_data_keys: tuple[str, ...] = ()


class DeleteObject(_Command):
    op: Literal["delete"] = "delete"
    target: ObjectRef
    propagation: Literal["Background", "Foreground", "Orphan"] = "Background"
    event_reason: str | None = None  # e.g. "DeletedWorkerPod"


class PatchObject(_Command):
    """JSON merge patch (RFC 7386) of the main resource, e.g. clearing workersToDelete."""

    op: Literal["patch"] = "patch"
    target: ObjectRef
    merge_patch: dict[str, Any]
    event_reason: str | None = None


class UpdateStatus(_Command):
    """Replace .status through the status subresource; the executor retries on conflict."""

    op: Literal["update_status"] = "update_status"
    target: ObjectRef
    status: dict[str, Any]
    # The resourceVersion the status was computed on: written over exactly that version, in one
    # call, like KubeRay's Status().Update of the object it read. If the object moved on (409):
    # on_conflict "fail" reports the conflict and the controller decides again (state machines:
    # RayJob, RayService); "retry" re-reads and replaces .status (client-go's RetryOnConflict; the
    # RayCluster's level status is recomputed from pods anyway). None: always re-read first.
    resource_version: str | None = None
    on_conflict: Literal["retry", "fail"] = "retry"


class RecordEvent(_Command):
    op: Literal["event"] = "event"
    target: ObjectRef
    type: Literal["Normal", "Warning"] = "Normal"
    event_reason: str
    message: str


Command = Annotated[
    CreateObject | DeleteObject | PatchObject | UpdateStatus | RecordEvent, Field(discriminator="op")
]


def merge_patch(current: object, goal: object) -> Any:
    """RFC 7386 merge patch turning ``current`` into ``goal`` (lists and scalars replace; keys
    missing from ``goal`` become null): what a PatchObject's ``merge_patch`` carries to make an
    object exactly what a decision wants."""
    if not isinstance(current, dict) or not isinstance(goal, dict):
        return copy.deepcopy(goal)
    patch: dict[str, Any] = {}
    for key in current.keys() - goal.keys():
        patch[key] = None
    for key, value in goal.items():
        if key not in current:
            patch[key] = copy.deepcopy(value)
        elif current[key] != value:
            patch[key] = merge_patch(current[key], value)
    return patch


def apply_merge_patch(target: object, patch: object) -> Any:
    """RFC 7386: `target` with `patch` applied (null removes a key; lists and scalars replace)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out
