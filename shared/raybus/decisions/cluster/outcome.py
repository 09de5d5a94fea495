"""Shared plumbing for the reconcilePods port: the accumulating plan, errors, object refs, knobs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.decisions.batches import BatchState
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.expectations import (
    ScaleAction,
    ScaleExpectations,
    check_satisfied,
    expect_scale_pod,
    take_retry_name,
)
from raybus.decisions.cluster.naming import NameAllocator
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, DeleteObject, ObjectRef

# utils/constant.go ReplicaFailure reasons (RayClusterReplicaFailureReason).
FAILED_DELETE_ALL_PODS = "FailedDeleteAllPods"
FAILED_DELETE_HEAD_POD = "FailedDeleteHeadPod"
FAILED_CREATE_HEAD_POD = "FailedCreateHeadPod"
FAILED_DELETE_WORKER_POD = "FailedDeleteWorkerPod"
FAILED_CREATE_WORKER_POD = "FailedCreateWorkerPod"
REPLICA_FAILURE_REASONS = frozenset(
    {
        FAILED_DELETE_ALL_PODS,
        FAILED_DELETE_HEAD_POD,
        FAILED_CREATE_HEAD_POD,
        FAILED_DELETE_WORKER_POD,
        FAILED_CREATE_WORKER_POD,
    }
)
# Event reasons (utils/constant.go K8sEventType) and the ReplicaFailure reason a failure maps to.
CREATED_HEAD_POD = "CreatedHeadPod"
CREATED_WORKER_POD = "CreatedWorkerPod"
DELETED_HEAD_POD = "DeletedHeadPod"
DELETED_WORKER_POD = "DeletedWorkerPod"
DELETED_POD = "DeletedPod"
EVENT_TO_FAILURE = {
    CREATED_HEAD_POD: FAILED_CREATE_HEAD_POD,
    DELETED_HEAD_POD: FAILED_DELETE_HEAD_POD,
    CREATED_WORKER_POD: FAILED_CREATE_WORKER_POD,
    DELETED_WORKER_POD: FAILED_DELETE_WORKER_POD,
    DELETED_POD: FAILED_DELETE_ALL_PODS,
}


@dataclass(frozen=True)
class ReconcileError:
    """What KubeRay's reconcile functions return as ``error``: stops the round, requeues after 2 s,
    keeps ``state`` from becoming ready; ``replica_failure_reason`` sets ReplicaFailure=True."""

    message: str
    replica_failure_reason: str | None = None


def pod_ref(pod: Mapping[str, Any], namespace: str) -> ObjectRef:
    return ObjectRef.of(pod, api_version="v1", kind="Pod", namespace=namespace)


def cluster_ref(cluster: RayCluster) -> ObjectRef:
    return ObjectRef(
        api_version="ray.io/v1",
        kind="RayCluster",
        namespace=cluster.namespace or "default",
        name=cluster.name,
        uid=cluster.metadata.uid,
    )


@dataclass
class PodPlan:
    """Mutable accumulator threaded through one reconcilePods run (never escapes the decision)."""

    cluster: RayCluster
    pods: list[Mapping[str, Any]]
    settings: OperatorSettings
    now: datetime
    entropy: str
    expectations: ScaleExpectations
    names: NameAllocator
    batch_id: str = ""  # the batch this round's commands go out in (expectations name it)
    batches: dict[str, BatchState] | None = None  # states of the batches expectations name
    pods_watermark: int | None = None  # highest Pod resourceVersion the cache has applied
    commands: list[Command] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    cleared_workers_to_delete: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return self.cluster.namespace or "default"

    def log(self, message: str) -> None:
        self.reasons.append(message)

    def satisfied(self, group: str) -> bool:
        """IsSatisfied for one group, dropping the met expectations."""
        timeout = self.settings.expectations_timeout_seconds
        ok, self.expectations = check_satisfied(
            self.expectations,
            group=group,
            existing_pod_names=(podutil.name(p) for p in self.pods),
            now=self.now,
            timeout_seconds=timeout,
            batches=self.batches,
            namespace=self.namespace,
            watermark=self.pods_watermark,
        )
        return ok

    def reuse_name(self, group: str) -> str | None:
        """A name from ``group``'s earlier create that did not happen, to create under again."""
        name, self.expectations = take_retry_name(
            self.expectations, group=group, taken=(podutil.name(p) for p in self.pods)
        )
        if name is not None:
            self.names.reserve(name)
        return name

    def delete_pod(
        self, pod: Mapping[str, Any], *, group: str | None, reason: str, event_reason: str
    ) -> None:
        """Delete + ExpectScalePod(Delete) (``group=None``: no expectation, as deleteAllPods)."""
        self.commands.append(
            DeleteObject(reason=reason, target=pod_ref(pod, self.namespace), event_reason=event_reason)
        )
        if group is not None:
            self.expectations = expect_scale_pod(
                self.expectations,
                group=group,
                pod_name=podutil.name(pod),
                action=ScaleAction.DELETE,
                now=self.now,
                batch=self.batch_id,
            )

    def create_pod(self, pod: dict[str, Any], *, group: str, reason: str, event_reason: str) -> None:
        """Create + ExpectScalePod(Create)."""
        pod_name = str(pod["metadata"]["name"])
        self.commands.append(CreateObject(reason=reason, object=pod, event_reason=event_reason))
        self.expectations = expect_scale_pod(
            self.expectations,
            group=group,
            pod_name=pod_name,
            action=ScaleAction.CREATE,
            now=self.now,
            batch=self.batch_id,
        )

    def delete_all(self, pods: list[Mapping[str, Any]], *, reason: str, event_reason: str) -> int:
        """deleteAllPods: delete every matching Pod if at least one is not already terminating."""
        active = [p for p in pods if not podutil.is_terminating(p)]
        if not active:
            return 0
        for pod in active:
            self.delete_pod(pod, group=None, reason=reason, event_reason=event_reason)
        return len(active)
