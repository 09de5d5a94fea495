"""Pure parts of the executor: which object a command addresses, the Event it records, and the
KubeRay failure reason a failed command reports.

KubeRay records Events on the *reconciled* object (the RayCluster), not on the pod it created:
`r.Recorder.Eventf(instance, Normal, CreatedWorkerPod, "Created worker Pod %s", ...)`, and on
failure a Warning with the matching FailedTo* reason (ray-operator/controllers/ray/utils/constant.go).
The RayCluster status' ReplicaFailure condition uses the shorter reasons FailedCreateHeadPod etc.
(apis/ray/v1 raycluster_types.go), which the executor reports as CommandResult.error_reason.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from raybus.bus.envelopes import CommandBatch
from raybus.decisions.commands import (
    Command,
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    RecordEvent,
    UpdateStatus,
)

Json = dict[str, Any]
COMPONENT = "raybus"
NODE_TYPE_LABEL = "ray.io/node-type"

# Bus kind tokens of the objects reconcilers own -> their Kubernetes identity.
_PRIMARY = {"raycluster": ("ray.io/v1", "RayCluster"), "rayjob": ("ray.io/v1", "RayJob"),
            "rayservice": ("ray.io/v1", "RayService")}


def involved_object(batch: CommandBatch) -> ObjectRef:
    api_version, kind = _PRIMARY.get(batch.kind, ("ray.io/v1", batch.kind))
    return ObjectRef(api_version=api_version, kind=kind, namespace=batch.key.namespace,
                     name=batch.key.name, uid=batch.uid)


def target_of(cmd: Command, batch: CommandBatch) -> ObjectRef:
    """The object a command acts on (creates carry a manifest instead of a ref)."""
    if isinstance(cmd, CreateObject):
        m = cmd.object.get("metadata") or {}
        return ObjectRef(api_version=str(cmd.object.get("apiVersion", "")),
                         kind=str(cmd.object.get("kind", "")),
                         namespace=str(m.get("namespace") or batch.key.namespace),
                         name=str(m.get("name") or ""))
    return cmd.target


def describe(ref: ObjectRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def _node_type(cmd: Command) -> str | None:
    if isinstance(cmd, CreateObject) and cmd.object.get("kind") == "Pod":
        labels = (cmd.object.get("metadata") or {}).get("labels") or {}
        return str(labels.get(NODE_TYPE_LABEL) or "") or None
    return None


def failure_reason(cmd: Command) -> str | None:
    """KubeRay's ReplicaFailure reason for a failed command, when it has one."""
    event_reason = getattr(cmd, "event_reason", None) or ""
    if isinstance(cmd, CreateObject) and cmd.object.get("kind") == "Pod":
        node_type = _node_type(cmd)
        if node_type == "head" or "Head" in event_reason:
            return "FailedCreateHeadPod"
        return "FailedCreateWorkerPod"
    if isinstance(cmd, DeleteObject) and cmd.target.kind == "Pod":
        if "All" in event_reason:
            return "FailedDeleteAllPods"
        if "Head" in event_reason:
            return "FailedDeleteHeadPod"
        return "FailedDeleteWorkerPod"
    return None


def failed_event_reason(event_reason: str | None) -> str | None:
    """CreatedWorkerPod -> FailedToCreateWorkerPod, DeletedHeadPod -> FailedToDeleteHeadPod."""
    if not event_reason:
        return None
    for done, failed in (("Created", "FailedToCreate"), ("Deleted", "FailedToDelete"),
                         ("Updated", "FailedToUpdate"), ("Patched", "FailedToUpdate")):
        if event_reason.startswith(done):
            return failed + event_reason[len(done):]
    return None


def success_event(cmd: Command) -> tuple[str, str, str] | None:
    """(type, reason, message) to record after cmd succeeded, or None."""
    if isinstance(cmd, RecordEvent):
        return cmd.type, cmd.event_reason, cmd.message
    if isinstance(cmd, (CreateObject, DeleteObject, PatchObject)) and cmd.event_reason:
        return "Normal", cmd.event_reason, cmd.reason
    return None


# KubeRay's Warning messages (raycluster_controller.go): "Failed to create head Pod ns/name, err",
# "Failed creating service ns/name, err", ... The err part is the API server's message.
_FAILED_CREATE = {"Service": "Failed creating service", "Ingress": "Failed creating ingress",
                  "Role": "Failed creating role", "RoleBinding": "Failed creating role binding",
                  "ServiceAccount": "Failed creating service account", "Route": "Failed creating route",
                  "Job": "Failed to create Job", "RayCluster": "Failed to create RayCluster",
                  "Secret": "Failed creating secret", "NetworkPolicy": "Failed creating network policy"}


def failure_message(cmd: Command, *, cluster: ObjectRef, error: str) -> str:
    """The Warning Event text KubeRay records when this command's API call fails."""
    if isinstance(cmd, CreateObject):
        kind = str(cmd.object.get("kind", ""))
        meta = cmd.object.get("metadata") or {}
        where = f"{meta.get('namespace') or cluster.namespace}/{meta.get('name', '')}"
        if kind == "Pod":
            if _node_type(cmd) == "head" or "Head" in (cmd.event_reason or ""):
                return f"Failed to create head Pod {where}, {error}"
            return f"Failed to create worker Pod for the cluster {cluster.namespace}/{cluster.name}, {error}"
        prefix = _FAILED_CREATE.get(kind, f"Failed to create {kind}")
        return f"{prefix} {where}, {error}"
    if isinstance(cmd, DeleteObject):
        where = f"{cmd.target.namespace}/{cmd.target.name}"
        if cmd.target.kind == "Pod":
            role = "head " if "Head" in (cmd.event_reason or "") else (
                "worker " if "Worker" in (cmd.event_reason or "") else "")
            return f"Failed deleting {role}Pod {where}, {error}"
        return f"Failed deleting {cmd.target.kind} {where}, {error}"
    if isinstance(cmd, PatchObject):
        return f"Failed updating {cmd.target.kind} {cmd.target.namespace}/{cmd.target.name}, {error}"
    return f"{cmd.reason}: {error}"


def failure_event(cmd: Command, error: str, *, cluster: ObjectRef) -> tuple[str, str, str] | None:
    if isinstance(cmd, UpdateStatus | RecordEvent):
        return None
    reason = failed_event_reason(getattr(cmd, "event_reason", None))
    if reason is None:
        return None
    return "Warning", reason, failure_message(cmd, cluster=cluster, error=error)[:1024]


# K8sEventAction (utils/constant.go) by event reason, as KubeRay passes it to Eventf.
_ACTION_PREFIXES = (("Created", "Create"), ("FailedToCreate", "Create"), ("Deleted", "Delete"),
                    ("FailedToDelete", "Delete"), ("ForceDeleted", "Cleanup"), ("Updated", "Update"),
                    ("FailedToUpdate", "Update"), ("FailedToCleanup", "Cleanup"), ("Invalid", "Validate"))
_ACTION_EXACT = {"BatchSchedulerCleanedUp": "Cleanup", "AutoscalerServiceAccountNotFound": "Validate",
                 "RayClusterNotFound": "Validate", "NetworkPolicyNameCollision": "Validate",
                 "RayServiceInitializingTimeout": "Reconcile", "RollbackImpossible": "Reconcile"}
# mgr.GetEventRecorder("<name>") of each KubeRay controller, by the object the Event is about.
_CONTROLLER_BY_KIND = {"RayCluster": "raycluster-controller", "RayJob": "rayjob-controller",
                       "RayService": "rayservice-controller", "RayCronJob": "raycronjob-controller"}


def event_action(reason: str) -> str:
    """The `action` KubeRay v1.7 records with this reason (Reconcile when it names none)."""
    if reason in _ACTION_EXACT:
        return _ACTION_EXACT[reason]
    for prefix, action in _ACTION_PREFIXES:
        if reason.startswith(prefix):
            return action
    return "Reconcile"


def reporting_controller(involved: ObjectRef, reason: str) -> str:
    """KubeRay v1.7's per-controller recorder name (NetworkPolicy Events come from its own controller)."""
    if "NetworkPolicy" in reason:
        return "networkpolicy-controller"
    return _CONTROLLER_BY_KIND.get(involved.kind, f"{involved.kind.lower()}-controller")


def micro_time(now: datetime) -> str:
    """metav1.MicroTime's RFC 3339 with microseconds."""
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def core_event_manifest(involved: ObjectRef, *, type_: str, reason: str, message: str,
                        now: datetime, host: str) -> Json:
    """The core/v1 form of the same Event (only where events.k8s.io is forbidden to the executor)."""
    new = event_manifest(involved, type_=type_, reason=reason, message=message, now=now, host=host)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Event", "metadata": new["metadata"],
        "involvedObject": new["regarding"], "reason": reason, "message": new["note"], "type": type_,
        "action": new["action"], "source": {"component": COMPONENT, "host": host},
        "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
        "reportingComponent": new["reportingController"], "reportingInstance": new["reportingInstance"],
    }


def event_manifest(involved: ObjectRef, *, type_: str, reason: str, message: str,
                   now: datetime, host: str) -> Json:
    """An events.k8s.io/v1 Event as KubeRay v1.7's recorder (client-go tools/events) writes it:
    name <object>.<unix nanos hex>, eventTime, action, reportingController = the controller's
    recorder name, reportingInstance <controller>-<host>, note (<= 1 KiB)."""
    name = f"{involved.name}.{int(now.timestamp() * 1e9):x}"
    ref: Json = {"apiVersion": involved.api_version, "kind": involved.kind,
                 "namespace": involved.namespace, "name": involved.name}
    if involved.uid:
        ref["uid"] = involved.uid
    controller = reporting_controller(involved, reason)
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": involved.namespace},
        "eventTime": micro_time(now), "reportingController": controller,
        "reportingInstance": f"{controller}-{host}"[:128], "action": event_action(reason),
        "reason": reason, "regarding": ref, "note": message[:1024], "type": type_,
    }
