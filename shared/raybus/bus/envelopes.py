"""Message envelopes: every message on the bus is one of these pydantic models, JSON-encoded.

Each carries a schema version, the key of the object it is about, and (where known) the object's
uid and resourceVersion, so a consumer can tell incarnations and ages apart. Trace context travels
in NATS headers (W3C traceparent), not in the body.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from raybus.decisions.commands import Command
from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardCommand,
    DashboardCommandResult,
    DashboardInterest,
)

SCHEMA_VERSION = 1


class ObjectKey(BaseModel):
    model_config = ConfigDict(frozen=True)
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class Envelope(BaseModel):
    model_config = ConfigDict(frozen=True)
    schema_version: Literal[1] = 1  # bump with SCHEMA_VERSION when the envelope changes
    key: ObjectKey
    kind: str
    uid: str | None = None
    resource_version: str | None = None


class ObjectEvent(Envelope):
    """Current state of one Kubernetes object (or its deletion), as the watcher saw it."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "SYNC"]
    object: dict[str, Any] = Field(default_factory=dict)
    scope: str = "_"  # subjects.object_subject's scope token


class Trigger(Envelope):
    """"Look again at this object": carries no state, only where to look and how fresh to be.

    objects_seq is the RAYBUS_OBJECTS sequence of the event that caused it; a reconciler waits
    until its snapshot cache has applied at least that sequence before deciding.
    """

    controller: str
    cause: str = ""
    objects_seq: int = 0
    cause_kind: str = ""  # kind token of the object at objects_seq (caches follow kinds separately)
    cause_scope: str = ""  # its scope token (a cache may follow one scope of a kind only)


class CommandBatch(Envelope):
    """One reconcile's commands for one object, applied in order by the executor."""

    controller: str
    reconcile_id: str
    commands: list[Command]
    reasons: list[str] = Field(default_factory=list)
    # A status batch's command batch from the same reconcile, which the executor finishes first
    # for RayJobs/RayServices: KubeRay writes a reconcile's objects before its Status().Update, so
    # no one sees e.g. a RayService promoted while its serve Service still selects the old cluster.
    after: str | None = None


class CommandResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    op: str
    target: str
    ok: bool
    code: int = 0
    error_reason: str | None = None  # KubeRay's failure reason, e.g. FailedCreateWorkerPod
    message: str = ""
    # Never applied: the batch was revoked before any executor claimed it (bus/ledger.py), or an
    # earlier command of the batch failed. Not a failure of this command: re-decide it.
    expired: bool = False
    resource_version: str | None = None  # of the object after a successful write, when known


class Outcome(Envelope):
    """What the executor did with one CommandBatch."""

    controller: str
    reconcile_id: str
    results: list[CommandResult]
    finished_at: datetime

    @property
    def is_status(self) -> bool:
        """The Outcome of a status write (its own subject, its own in-flight memo)."""
        return bool(self.results) and all(r.op == "update_status" for r in self.results)


class DashboardObservation(Envelope):
    """What one Ray cluster's dashboard answered, published by the dashboard-poller only when it
    changed (observed_at is not part of the comparison). key = the RayCluster's namespace/name."""

    observation: ClusterObservation
    observed_at: datetime


class DashboardInterestMessage(Envelope):
    """A reconciler's declaration of what it needs observed for one owner (RayJob/RayService);
    key = the owner. Last value per owner: a newer one replaces the older entirely."""

    controller: str
    interest: DashboardInterest
    # Further clusters of the same owner: a RayService follows its active and pending cluster.
    more: list[DashboardInterest] = Field(default_factory=list)

    def all(self) -> list[DashboardInterest]:
        return [self.interest, *self.more]


class DashboardCommandMessage(Envelope):
    """One dashboard write for the dashboard-poller; key = the owner (RayJob/RayService)."""

    controller: str
    command_id: str
    command: DashboardCommand


class DashboardResultMessage(Envelope):
    """How one DashboardCommandMessage ended; key = the owner.

    command_seq: the command's RAYBUS_DASHBOARD_COMMANDS sequence. Commands of one owner run in
    order, so a redelivered command at or below the last result's command_seq is already done
    (or superseded) and is not run again. observation_seq: the RAYBUS_DASHBOARD sequence of the
    cluster's observation after the poller read the state back (0: none published yet); a
    reconciler that waits for it (`ObjectCache.wait_for(seq, kind="dashboard")`) decides on the
    read-back state, which matters most for an "unknown" result."""

    controller: str
    result: DashboardCommandResult
    finished_at: datetime
    command_seq: int = 0
    observation_seq: int = 0
