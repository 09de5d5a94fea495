"""rayClusterReconcile (``raycluster_controller.go``) as one pure function.

``reconcile_cluster(snapshot, settings=..., now=..., entropy=...)`` takes everything the adapter
observed for one RayCluster and returns the ordered commands, the updated scale expectations (to be
persisted *before* the commands are published), the status to write (``None`` when
``InconsistentRayClusterStatus`` says nothing changed) and the requeue delay.

Order (KubeRay's): managedBy external -> skip; defaults; validation (Warning event, no requeue);
GCS FT Redis cleanup finalizer (redis_cleanup.py: add it first; on deletion delete the Pods, run
the cleanup Job, remove it) -> deletionTimestamp -> nothing; owned objects (autoscaler RBAC,
Ingress, auth Secret, head Service, headless Service, serve Service; create-only) -> the batch
scheduler's PodGroup + reconcilePods (Pods labelled for the scheduler) -> calculateStatus; the
NetworkPolicies (KubeRay's separate controller) go last and never affect the status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raybus.api import with_defaults
from raybus.api.raycluster import RayCluster
from raybus.api.validation_cluster import (
    validate_managed_by,
    validate_raycluster_metadata,
    validate_raycluster_spec,
    validate_raycluster_status,
    validate_raycluster_upgrade_options,
    validate_worker_group_names,
)
from raybus.decisions.batches import BatchState
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.autoscaler_container import autoscaler_v1_restart_policy_warning
from raybus.decisions.cluster.batch_scheduler import (
    add_scheduler_metadata,
    pod_group_failure_events,
    reconcile_pod_group,
)
from raybus.decisions.cluster.expectations import ScaleExpectations, forget_pods
from raybus.decisions.cluster.network_policy import reconcile_network_policies
from raybus.decisions.cluster.outcome import (
    EVENT_TO_FAILURE,
    REPLICA_FAILURE_REASONS,
    ReconcileError,
    cluster_ref,
)
from raybus.decisions.cluster.owned import OwnedOutcome, reconcile_owned_objects
from raybus.decisions.cluster.pods import pods_may_be_reconciled, reconcile_pods
from raybus.decisions.cluster.redis_cleanup import reconcile_redis_cleanup
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.cluster.status import StatusError, calculate_status, inconsistent_status
from raybus.decisions.commands import Command, CreateObject, PatchObject, RecordEvent, UpdateStatus
from raybus.decisions.memo import LastPerObject

_DEFAULTED: LastPerObject[RayCluster] = LastPerObject()
_VALIDATED: LastPerObject[tuple[list[Command], bool]] = LastPerObject()

# raycluster_controller.go DefaultRequeueDuration
DEFAULT_REQUEUE_SECONDS = 2.0
# utils.KubeRayController: the only managedBy value this operator reconciles.
KUBERAY_OPERATOR = "ray.io/kuberay-operator"


class CommandFailure(BaseModel):
    """A command of the previous round the executor could not apply.

    ``reason`` is KubeRay's ReplicaFailure reason (``FailedCreateWorkerPod`` ...) or the failed
    command's ``event_reason`` (``CreatedWorkerPod`` ...), which is mapped to it.
    """

    model_config = ConfigDict(frozen=True)

    reason: str
    message: str = ""
    # "Kind/namespace/name" of the failed command's object (CommandResult.target); a failed Pod
    # create/delete drops that Pod's scale expectation.
    target: str | None = None


class ClusterSnapshot(BaseModel):
    """Everything the adapter observed for one RayCluster."""

    model_config = ConfigDict(frozen=True)

    cluster: RayCluster
    pods: list[dict[str, Any]] = Field(default_factory=list)  # label ray.io/cluster=<name>
    services: list[dict[str, Any]] = Field(default_factory=list)
    ingresses: list[dict[str, Any]] = Field(default_factory=list)
    service_accounts: list[dict[str, Any]] = Field(default_factory=list)
    roles: list[dict[str, Any]] = Field(default_factory=list)
    role_bindings: list[dict[str, Any]] = Field(default_factory=list)
    # The auth token Secrets known to exist (no watch: a create answered 201 or 409, auth_secret.py;
    # names only), batch Jobs (the Redis cleanup Job), NetworkPolicies and PodGroups.
    secrets: list[dict[str, Any]] = Field(default_factory=list)
    jobs: list[dict[str, Any]] = Field(default_factory=list)
    network_policies: list[dict[str, Any]] = Field(default_factory=list)
    pod_groups: list[dict[str, Any]] = Field(default_factory=list)
    expectations: ScaleExpectations = Field(default_factory=ScaleExpectations)
    last_failures: list[CommandFailure] = Field(default_factory=list)
    # The state of every batch the expectations name (None: no ledger; KubeRay's plain timeout)
    # and the id of the batch this round's commands will go out in.
    batches: dict[str, BatchState] | None = None
    batch_id: str = ""
    pods_watermark: int | None = None  # highest Pod resourceVersion the cache has applied


class ClusterDecision(BaseModel):
    model_config = ConfigDict(frozen=True)

    commands: list[Command] = Field(default_factory=list)
    expectations: ScaleExpectations = Field(default_factory=ScaleExpectations)
    status: dict[str, Any] | None = None  # camelCase RayClusterStatus to write; None = unchanged
    requeue_after: float | None = None  # seconds; None = no requeue
    # The requeue had `status` been what the RayCluster already says (KubeRay's, when its status
    # update finds nothing inconsistent): for a round whose status the reconciler does not send
    # because that very status is already on its way (runtime.inflight).
    requeue_unchanged: float | None = None
    # This round's own error (KubeRay's reconcile returned it): the runtime requeues with the
    # rate limiter. A failure reported by the previous round's Outcome was already counted.
    error: str | None = None
    reasons: list[str] = Field(default_factory=list)


def _managed_by_external(cluster: RayCluster) -> str | None:
    """utils.ManagedByExternalController."""
    managed_by = cluster.spec.managed_by
    return managed_by if managed_by and managed_by != KUBERAY_OPERATOR else None


def _validation_events(cluster: RayCluster, settings: OperatorSettings) -> tuple[list[Command], bool]:
    """validateRayClusterMetadata / Spec / UpgradeOptions / Status -> Warning events.

    Returns (events, requeue): only an invalid *status* is returned as an error (2 s requeue)."""
    ref = cluster_ref(cluster)
    where = f"{cluster.namespace}/{cluster.name}"
    events: list[Command] = []
    groups = [
        (
            "InvalidRayClusterMetadata",
            f"The RayCluster metadata is invalid {where}",
            validate_raycluster_metadata(cluster.metadata),
        ),
        (
            "InvalidRayClusterSpec",
            f"The RayCluster spec is invalid {where}",
            validate_managed_by(cluster.spec.managed_by)
            + validate_worker_group_names(cluster.spec)
            + validate_raycluster_spec(
                cluster.spec, cluster.metadata.annotations, gates=settings.feature_gates
            )
            + validate_raycluster_upgrade_options(cluster),
        ),
        (
            "InvalidRayClusterStatus",
            f"The RayCluster status is invalid {where}",
            validate_raycluster_status(cluster),
        ),
    ]
    for event_reason, prefix, errors in groups:
        if errors:  # KubeRay returns at the first failing validation
            message = f"{prefix}: {'; '.join(errors)}"
            event = RecordEvent(
                reason=message, target=ref, type="Warning", event_reason=event_reason, message=message
            )
            return [event], event_reason == "InvalidRayClusterStatus"
    return events, False


def failure_error(failures: list[CommandFailure]) -> ReconcileError | None:
    """The previous round's executor failures as KubeRay's reconcile error (ReplicaFailure reason)."""
    for failure in failures:
        mapped = (
            failure.reason
            if failure.reason in REPLICA_FAILURE_REASONS
            else EVENT_TO_FAILURE.get(failure.reason)
        )
        if mapped:
            return ReconcileError(failure.message or failure.reason, mapped)
    if failures:
        return ReconcileError(failures[0].message or failures[0].reason)
    return None


def clear_workers_to_delete_patch(raw: RayCluster, groups: list[str]) -> PatchObject:
    """Reset scaleStrategy.workersToDelete of ``groups`` on the CR.

    A JSON merge patch replaces arrays wholesale, so the whole workerGroupSpecs list is sent (from the
    raw, non-defaulted object) with ``metadata.resourceVersion`` as an optimistic-concurrency guard:
    if the autoscaler changed the CR meanwhile the patch fails with a conflict instead of undoing it.
    """
    specs: list[dict[str, Any]] = []
    for group in raw.spec.worker_group_specs or []:
        body = group.to_dict()
        if group.group_name in groups:
            strategy = dict(body.get("scaleStrategy") or {})
            strategy.pop("workersToDelete", None)
            body["scaleStrategy"] = strategy
        specs.append(body)
    patch: dict[str, Any] = {"spec": {"workerGroupSpecs": specs}}
    if raw.metadata.resource_version:
        patch["metadata"] = {"resourceVersion": raw.metadata.resource_version}
    return PatchObject(
        reason=f"Clear scaleStrategy.workersToDelete of worker groups {sorted(groups)} after deleting them",
        target=cluster_ref(raw),
        merge_patch=patch,
    )


def status_update(snapshot: ClusterSnapshot, decision: ClusterDecision) -> UpdateStatus | None:
    """The UpdateStatus command for ``decision.status`` (None when the status is unchanged)."""
    if decision.status is None:
        return None
    return UpdateStatus(
        reason="RayCluster status changed", target=cluster_ref(snapshot.cluster), status=decision.status
    )


def _with_scheduler_metadata(cluster: RayCluster, cmd: Command, settings: OperatorSettings) -> Command:
    """createHeadPod / createWorkerPod: the batch scheduler's AddMetadataToChildResource."""
    if not settings.batch_scheduler or not isinstance(cmd, CreateObject) or cmd.object.get("kind") != "Pod":
        return cmd
    group = podutil.labels(cmd.object).get(podutil.GROUP_LABEL, "")
    obj = add_scheduler_metadata(cluster, cmd.object, group_name=group, settings=settings)
    return cmd.model_copy(update={"object": obj})


def _before_reconcile(snapshot: ClusterSnapshot, cluster: RayCluster, *, settings: OperatorSettings,
                      now: datetime) -> ClusterDecision | None:
    """rayClusterReconcile's early returns, in its order: an invalid spec (events), the GCS FT
    Redis cleanup finalizer, a RayCluster being deleted. None: go on to the reconcile funcs."""
    raw = snapshot.cluster
    events, requeue_invalid = _VALIDATED.get((raw.namespace, raw.name), (cluster, settings),
                                             lambda: _validation_events(cluster, settings))
    if events:
        return ClusterDecision(
            commands=events,
            expectations=snapshot.expectations,
            requeue_after=DEFAULT_REQUEUE_SECONDS if requeue_invalid else None,
            reasons=[e.reason for e in events],
        )
    cleanup = reconcile_redis_cleanup(
        cluster, raw, pods=list(snapshot.pods), jobs=list(snapshot.jobs), settings=settings, now=now
    )
    if cleanup is not None:
        return ClusterDecision(
            commands=cleanup.commands,
            expectations=snapshot.expectations,
            requeue_after=cleanup.requeue_after,
            reasons=cleanup.reasons,
        )
    if cluster.metadata.deletion_timestamp:
        return ClusterDecision(
            expectations=snapshot.expectations, reasons=["RayCluster is being deleted, just ignore"]
        )
    return None


def _known_expectations(snapshot: ClusterSnapshot) -> ScaleExpectations:
    """No batch states: a failed Pod create/delete drops its expectation at once (KubeRay
    records one only after a successful API call) instead of holding the group 30 s."""
    if snapshot.batches is not None:
        return snapshot.expectations
    failed_pods = [
        f.target.split("/", 2)[2]
        for f in snapshot.last_failures
        if f.target and f.target.startswith("Pod/") and f.target.count("/") >= 2
    ]
    return forget_pods(snapshot.expectations, failed_pods)


@dataclass
class _Round:
    """What the reconcile funcs of one round add up to."""

    expectations: ScaleExpectations
    commands: list[Command] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    error: ReconcileError | None = None
    awaiting_pod_group: bool = False


def _pod_group_step(cluster: RayCluster, snapshot: ClusterSnapshot, settings: OperatorSettings,
                    round_: _Round) -> None:
    """The batch scheduler's DoBatchSchedulingOnSubmission, before any Pod."""
    if round_.error is not None or not settings.batch_scheduler or not pods_may_be_reconciled(cluster, settings):
        return
    round_.commands += pod_group_failure_events(
        cluster, [(f.target, f.message) for f in snapshot.last_failures], settings=settings
    )
    # It returns before any Pod when the PodGroup cannot be written. Our create is asynchronous,
    # so the Pods wait until the PodGroup is seen (the watcher's PodGroup event wakes us): never a
    # gang member without its gang.
    pod_group = reconcile_pod_group(cluster, existing=list(snapshot.pod_groups), settings=settings)
    round_.commands += pod_group
    round_.awaiting_pod_group = any(isinstance(c, CreateObject) for c in pod_group)
    if round_.awaiting_pod_group:
        round_.reasons.append("waiting for the batch scheduler's PodGroup before reconciling Pods")


def _pods_step(cluster: RayCluster, snapshot: ClusterSnapshot, settings: OperatorSettings, round_: _Round,
               *, now: datetime, entropy: str) -> None:
    """reconcilePods."""
    if round_.error is not None or round_.awaiting_pod_group:
        return
    pods = reconcile_pods(
        cluster,
        pods=list(snapshot.pods),
        expectations=round_.expectations,
        settings=settings,
        now=now,
        entropy=entropy,
        batch_id=snapshot.batch_id,
        batches=snapshot.batches,
        pods_watermark=snapshot.pods_watermark,
    )
    round_.commands += [_with_scheduler_metadata(cluster, c, settings) for c in pods.commands]
    round_.reasons += pods.reasons
    round_.expectations = pods.expectations
    round_.error = pods.error
    if pods.cleared_workers_to_delete:
        round_.commands.append(clear_workers_to_delete_patch(snapshot.cluster, pods.cleared_workers_to_delete))


def _status_step(cluster: RayCluster, snapshot: ClusterSnapshot, settings: OperatorSettings,
                 owned: OwnedOutcome, status_error: ReconcileError | None, round_: _Round,
                 *, now: datetime) -> tuple[dict[str, Any] | None, bool]:
    """calculateStatus and inconsistentRayClusterStatus: (the status to write, calculate failed)."""
    try:
        new_status = calculate_status(
            cluster,
            pods=list(snapshot.pods),
            head_services=owned.head_services,
            planned_head_service=owned.planned_head_service,
            reconcile_error=status_error,
            settings=settings,
            now=now,
        )
    except StatusError as exc:
        round_.reasons.append(f"Got error when calculating new status: {exc}")
        return None, True
    old = cluster.status.to_dict() if cluster.status is not None else None
    if inconsistent_status(old, new_status):
        round_.reasons.append("status changed")
        return new_status, False
    return None, False


def _requeues(round_: _Round, previous: ReconcileError | None, *, status_changed: bool, calculate_failed: bool,
              settings: OperatorSettings) -> tuple[float | None, float | None]:
    """(requeue, requeue when the status is unchanged). KubeRay: an error -> rate-limited requeue
    (controller-runtime ignores RequeueAfter then); status changed -> 2 s; otherwise
    RAYCLUSTER_DEFAULT_REQUEUE_SECONDS. A previous round's failure already fed the rate limiter
    through its Outcome, and the retry it asks for is in this round's commands: requeueing on a
    timer as well would retry faster than the backoff."""
    if round_.error is not None or previous is not None:
        return None, None
    if calculate_failed or round_.awaiting_pod_group:
        return DEFAULT_REQUEUE_SECONDS, DEFAULT_REQUEUE_SECONDS
    unchanged = float(settings.raycluster_default_requeue_seconds)
    return (DEFAULT_REQUEUE_SECONDS if status_changed else unchanged), unchanged


def reconcile_cluster(
    snapshot: ClusterSnapshot, *, settings: OperatorSettings, now: datetime, entropy: str
) -> ClusterDecision:
    """rayClusterReconcile. Pure: no I/O, clock, env or randomness beyond the arguments."""
    raw = snapshot.cluster
    manager = _managed_by_external(raw)
    if manager is not None:
        return ClusterDecision(
            expectations=snapshot.expectations,
            reasons=[f"Skipping RayCluster managed by a custom controller: {manager}"],
        )
    # Memoised per RayCluster (decisions/memo.py): same parsed object, same defaults and verdict.
    cluster = _DEFAULTED.get((raw.namespace, raw.name), (raw,), lambda: with_defaults(raw))
    early = _before_reconcile(snapshot, cluster, settings=settings, now=now)
    if early is not None:
        return early
    round_ = _Round(expectations=_known_expectations(snapshot))
    restart_warning = autoscaler_v1_restart_policy_warning(cluster.spec)
    if restart_warning is not None:
        message = f"RayCluster spec warning {cluster.namespace}/{cluster.name}: {restart_warning}"
        round_.commands.append(RecordEvent(reason=message, target=cluster_ref(cluster), type="Warning",
                                           event_reason="InvalidRayClusterSpec", message=message))
    owned = reconcile_owned_objects(cluster, snapshot=snapshot, settings=settings)
    round_.commands += owned.commands
    round_.reasons += owned.reasons
    round_.error = owned.error
    _pod_group_step(cluster, snapshot, settings, round_)
    _pods_step(cluster, snapshot, settings, round_, now=now, entropy=entropy)
    if round_.error is not None:
        round_.reasons.append(f"reconcile error: {round_.error.message}")
    # KubeRay's NetworkPolicy controller is separate: its failures never reach this status.
    previous = failure_error(
        [f for f in snapshot.last_failures if not (f.target or "").startswith("NetworkPolicy/")]
    )
    status, calculate_failed = _status_step(cluster, snapshot, settings, owned, round_.error or previous, round_,
                                            now=now)
    round_.commands += reconcile_network_policies(cluster, existing=list(snapshot.network_policies),
                                                  settings=settings)
    requeue, unchanged = _requeues(round_, previous, status_changed=status is not None,
                                   calculate_failed=calculate_failed, settings=settings)
    return ClusterDecision(
        commands=round_.commands,
        expectations=round_.expectations,
        status=status,
        requeue_after=requeue,
        requeue_unchanged=unchanged,
        error=round_.error.message if round_.error is not None else None,
        reasons=round_.reasons,
    )
