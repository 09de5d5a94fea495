"""Publishing one decision of a state-machine controller (RayJob, RayService), one step at a time.

A step is what a pure decision returns: Kubernetes commands, dashboard commands, the status to
write, what the dashboard-poller should observe, and KubeRay's requeue/error. The runner
publishes it (commands as one ordered batch; the status with the resourceVersion it was computed
on, like KubeRay's Status().Update; each dashboard command with an id derived from the batch, so a
redelivery is recognised by the poller's ledger) and holds the object's next decision until the
WriteBarrier says every write was answered: the next step always starts from what this one wrote.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raybus.bus import subjects as s
from raybus.bus.envelopes import DashboardCommandMessage, ObjectKey
from raybus.bus.publish import DashboardInterestPublisher, publish_dashboard_command
from raybus.decisions.commands import Command, ObjectRef, UpdateStatus
from raybus.decisions.dashboard_contract import DashboardCommand, DashboardInterest
from raybus.runtime.barrier import WriteBarrier
from raybus.runtime.controller import Result
from raybus.runtime.reconciler_app import ReconcilerContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    commands: Sequence[Command] = ()
    dashboard_commands: Sequence[DashboardCommand] = ()
    status: dict[str, Any] | None = None
    # What to observe: one interest per cluster; None = leave what was declared before.
    interests: Sequence[DashboardInterest] | None = None
    requeue_after: float | None = None
    error: str | None = None
    reasons: Sequence[str] = field(default_factory=tuple)
    # The batch id to publish under (default: a fresh one). A controller that must persist what it
    # is about to publish (e.g. its dashboard commands' ids, `dashboard_command_ids`) before
    # publishing picks it first.
    batch_id: str | None = None


def new_batch_id() -> str:
    return uuid.uuid4().hex


def dashboard_command_ids(batch_id: str, count: int) -> list[str]:
    """The ids the runner gives a step's dashboard commands, in order."""
    return [f"{batch_id}-{index}" for index in range(count)]


class StepRunner:
    def __init__(self, ctx: ReconcilerContext, *, kind: s.Kind, k8s_kind: str) -> None:
        self._ctx = ctx
        self._kind = kind
        self._k8s_kind = k8s_kind
        self.barrier = WriteBarrier(cache=ctx.cache, outcomes=ctx.outcomes, batches=ctx.batches,
                                    ledger=ctx.ledger, kind=kind, controller=ctx.controller.value)
        self._interests = DashboardInterestPublisher(ctx.nc.jetstream())
        self._held: dict[ObjectKey, int] = {}

    async def wait(self, key: ObjectKey) -> Result | None:
        """A Result to return right away while the previous step's writes are unanswered."""
        if await self.barrier.ready(key):
            self._held.pop(key, None)
            return None
        # Looking again is a cache read (no I/O): cheap, and it needs no trigger, which a
        # RayService's own status write does not produce (KubeRay's For() predicate).
        held = self._held[key] = self._held.get(key, 0) + 1
        return Result(requeue_after=min(0.02 * 2 ** min(held, 6), 1.0))

    async def publish(self, key: ObjectKey, obj: dict[str, Any], step: Step) -> Result:
        meta = obj.get("metadata") or {}
        uid, rv = meta.get("uid"), str(meta.get("resourceVersion") or "")
        batch_id = step.batch_id or new_batch_id()
        commands = list(step.commands)
        if step.status is not None:
            commands.append(UpdateStatus(
                reason=f"{self._k8s_kind} status changed", resource_version=rv or None,
                on_conflict="fail",
                target=ObjectRef(api_version="ray.io/v1", kind=self._k8s_kind, namespace=key.namespace,
                                 name=key.name, uid=uid),
                status=step.status))
        for reason in step.reasons:
            log.debug(reason, extra={"key": str(key)})
        if step.error is not None:
            log.info("reconcile error", extra={"key": str(key), "error": step.error})
        if commands:
            await self._ctx.publish(key=key, kind=self._kind, commands=commands,
                                    reasons=list(step.reasons), uid=uid, resource_version=rv,
                                    batch_id=batch_id)
        wrote_commands = any(not isinstance(c, UpdateStatus) for c in commands)
        dashboard_ids: list[str] = []
        js = self._ctx.nc.jetstream()
        try:
            for command_id, command in zip(dashboard_command_ids(batch_id, len(step.dashboard_commands)),
                                           step.dashboard_commands, strict=True):
                log.info(command.reason, extra={"key": str(key), "op": command.op, "command_id": command_id})
                await publish_dashboard_command(js, DashboardCommandMessage(
                    key=key, kind=self._kind.value, uid=uid, resource_version=rv,
                    controller=self._ctx.controller.value, command_id=command_id, command=command))
                dashboard_ids.append(command_id)
            if step.interests is not None:
                interests = list(step.interests) or [DashboardInterest()]
                await self._interests.publish(controller=self._ctx.controller, key=key, kind=self._kind.value,
                                              interest=interests[0], more=interests[1:], uid=uid)
        finally:
            # Whatever went out is waited for, even when a later publish failed: otherwise a round
            # whose command went out and whose interest publish failed (a NATS election) is
            # decided again, and each retry sends the same Serve config PUT once more.
            self.barrier.wrote(key, batch=batch_id if wrote_commands else None,
                               status=(s.status_batch_id(batch_id), rv) if step.status is not None else None,
                               dashboard=dashboard_ids, base_rv=rv)
        return Result(requeue_after=step.requeue_after, error=step.error is not None,
                      published=wrote_commands or bool(dashboard_ids))

    async def gone(self, key: ObjectKey) -> Result:
        """The object was deleted: stop observing for it and forget what was remembered."""
        self.barrier.forget(key)
        self._held.pop(key, None)
        self._ctx.outcomes.forget(key)
        await self._interests.publish(controller=self._ctx.controller, key=key, kind=self._kind.value,
                                      interest=DashboardInterest())
        self._interests.forget(self._ctx.controller, key)
        return Result()
