"""What the RayJob decision reads (JobSnapshot) and returns (JobDecision)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.decisions.commands import Command
from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardCommand,
    DashboardCommandResult,
    DashboardInterest,
)


class KubeCommandFailure(BaseModel):
    """A Kubernetes command of the previous round the executor could not apply (KubeRay's
    reconcile would have returned that error)."""

    model_config = ConfigDict(frozen=True)

    message: str
    target: str = ""  # "Kind/namespace/name" (CommandResult.target)
    code: int = 0  # HTTP status, 0 when unknown


class JobSnapshot(BaseModel):
    """Everything the adapter observed for one RayJob, consistent (read-your-writes)."""

    model_config = ConfigDict(frozen=True)

    rayjob: RayJob
    # The RayCluster the RayJob uses: status.rayClusterName, or before that is set in clusterSelector
    # mode the selected cluster (spec.clusterSelector["ray.io/cluster"]). None when it does not exist.
    cluster: RayCluster | None = None
    # The submitter batch/v1 Job named after the RayJob (K8sJobMode); None when absent.
    submitter: dict[str, Any] | None = None
    # Pods labelled ray.io/cluster=<cluster>, ray.io/node-type=head (SidecarMode's submitter container).
    head_pods: list[dict[str, Any]] = Field(default_factory=list)
    # The RayJob's own head Service "<rayjob>-head-svc" (reconcileServices); None when absent.
    head_service: dict[str, Any] | None = None
    # The dashboard-poller's last observation of the cluster (None: never observed).
    dashboard: ClusterObservation | None = None
    # Results of the dashboard commands this RayJob's previous decision published.
    dashboard_results: list[DashboardCommandResult] = Field(default_factory=list)
    # Kubernetes commands of the previous decision that failed.
    failures: list[KubeCommandFailure] = Field(default_factory=list)
    # Stable input for names the decision invents (KubeRay's random suffixes); the RayJob uid when
    # the adapter has nothing better.
    entropy: str = ""


class JobDecision(BaseModel):
    model_config = ConfigDict(frozen=True)

    commands: list[Command] = Field(default_factory=list)
    dashboard_commands: list[DashboardCommand] = Field(default_factory=list)
    status: dict[str, Any] | None = None  # full camelCase RayJobStatus to write; None = unchanged
    interest: DashboardInterest = Field(default_factory=DashboardInterest)
    # Seconds until the next time-based transition (deadline, TTL, grace period, timeout); None = no
    # requeue. Job status changes arrive as dashboard observations, which trigger a reconcile.
    requeue_after: float | None = None
    error: str | None = None  # KubeRay returned an error: requeue with the rate limiter
    reasons: list[str] = Field(default_factory=list)
