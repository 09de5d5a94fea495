"""Inputs and outputs of the RayService decision (``reconcile_rayservice``).

The adapter builds a :class:`ServiceSnapshot` from the object cache, Redis and the dashboard
gateway; the decision returns a :class:`ServiceDecision` it executes. What KubeRay keeps in process
memory (the serve-config LRU, the dangling-cluster deletion timestamps) comes in and goes out as
explicit state so a restarted or second replica decides exactly as the first would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raybus.api.rayservice import RayService
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command
from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardCommand,
    DashboardCommandResult,
    DashboardInterest,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ServiceSettings(_Frozen):
    """Operator knobs the RayService controller reads (env + feature gates), passed in frozen."""

    operator: OperatorSettings = Field(default_factory=OperatorSettings)
    # ENABLE_ZERO_DOWNTIME (isZeroDowntimeUpgradeEnabled): only "false" disables; spec wins.
    enable_zero_downtime: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, feature_gates: str = "") -> ServiceSettings:
        return cls(operator=OperatorSettings.from_env(env, feature_gates=feature_gates),
                   enable_zero_downtime=(env.get("ENABLE_ZERO_DOWNTIME") or "").lower() != "false")


class ServeConfigCacheEntry(_Frozen):
    """What one RayCluster was last given (KubeRay's ServeConfigs LRU value, kept in Redis).

    ``config_hash`` = :func:`raybus.decisions.rayservice.serve.serve_config_hash` of the serveConfigV2
    string that was submitted (KubeRay caches and compares the string itself).
    """

    config_hash: str
    target_capacity: int | None = None  # target_capacity sent with it (incremental upgrade)
    submitted_at: datetime | None = None  # when the dashboard accepted it


class TimedObservation(_Frozen):
    """A dashboard observation and when the poller made it (``DashboardObservation.observed_at``)."""

    observation: ClusterObservation
    observed_at: datetime | None = None


class DashboardOutcome(_Frozen):
    """A dashboard command published for this RayService in the previous round and how it ended.

    The runtime keeps the commands it published until their results arrive (read-your-writes), so
    it can hand both back together: the decision needs the command (which cluster, which config
    hash) to update the serve-config cache.
    """

    command: DashboardCommand
    result: DashboardCommandResult
    finished_at: datetime | None = None


class CommandFailure(_Frozen):
    """A Kubernetes command of the previous round the executor could not apply (like KubeRay's
    returned error). Same shape as the cluster decision's ``CommandFailure``."""

    reason: str  # the failed command's event_reason (e.g. CreatedRayCluster) or error reason
    message: str = ""
    target: str | None = None  # "Kind/namespace/name"


class ServiceSnapshot(_Frozen):
    """Everything one RayService reconcile reads. Raw objects are camelCase dicts as the API
    server returns them; lists may contain unrelated objects of the namespace (filtered here)."""

    service: RayService
    # RayClusters the RayService owns: its controller ownerRef, or KubeRay's association labels
    # ray.io/originated-from-cr-name=<name>, ray.io/originated-from-crd=RayService.
    clusters: list[dict[str, Any]] = Field(default_factory=list)
    # Head pods of those clusters (labels ray.io/cluster=<cluster>, ray.io/node-type=head).
    pods: list[dict[str, Any]] = Field(default_factory=list)
    # The RayService's Services (<name>-head-svc, <name>-serve-svc or its serveService override)
    # and, for the incremental upgrade, the per-cluster <cluster>-serve-svc.
    services: list[dict[str, Any]] = Field(default_factory=list)
    # EndpointSlices of those Services (label kubernetes.io/service-name).
    endpoint_slices: list[dict[str, Any]] = Field(default_factory=list)
    # Incremental upgrade only: <name>-gateway and <name>-httproute.
    gateways: list[dict[str, Any]] = Field(default_factory=list)
    http_routes: list[dict[str, Any]] = Field(default_factory=list)
    # Dashboard gateway: per RayCluster name.
    observations: dict[str, TimedObservation] = Field(default_factory=dict)
    # Redis state (see ServiceDecision for the update semantics).
    serve_config_cache: dict[str, ServeConfigCacheEntry] = Field(default_factory=dict)
    deletion_deadlines: dict[str, datetime] = Field(default_factory=dict)
    # Previous round's outcomes.
    dashboard_results: list[DashboardOutcome] = Field(default_factory=list)
    failed_commands: list[CommandFailure] = Field(default_factory=list)
    # Extra entropy for generated names (the RayService uid is always used; tests may add more).
    entropy: str = ""


class ServiceDecision(_Frozen):
    """What to do. Execute ``commands`` and ``dashboard_commands`` even when ``error`` is set
    (KubeRay's calls before its error return happened)."""

    commands: list[Command] = Field(default_factory=list)
    dashboard_commands: list[DashboardCommand] = Field(default_factory=list)
    status: dict[str, Any] | None = None  # full camelCase status to write; None = unchanged
    # One DashboardInterest per RayCluster to observe (active and/or pending); [] = nothing to
    # observe; None = keep the last published interest (a round that ended early on an error).
    # The whole list is the owner's level state (see the DashboardInterest proposal).
    interest: list[DashboardInterest] | None = None
    # Redis updates, per cluster name; None = delete the key. Entries not mentioned are unchanged.
    serve_config_cache: dict[str, ServeConfigCacheEntry | None] = Field(default_factory=dict)
    # Deadlines are only ever added (never moved) and removed once their cluster is gone.
    deletion_deadlines: dict[str, datetime | None] = Field(default_factory=dict)
    requeue_after: float | None = None  # seconds; only time-based transitions need one
    error: str | None = None  # KubeRay returned an error: rate-limited requeue
    reasons: list[str] = Field(default_factory=list)
