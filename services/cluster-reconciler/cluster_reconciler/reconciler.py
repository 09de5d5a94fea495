"""One RayCluster reconcile: snapshot -> `reconcile_cluster` -> expectations -> one published batch.

Order:
1. the RayCluster is gone -> keep its expectations a while (state.Expectations.deleted), forget
   what this replica remembered of it;
2. parse it (once per watch event); one our models refuse gets KubeRay's InvalidRayClusterSpec;
3. the snapshot: the cache, its scale expectations from Redis and the state of the batches they
   name (runtime.batches: Outcomes, then the command ledger);
4. the pure decision; creates decided on a RayCluster the bus already has a newer copy of are
   decided again on that copy;
5. the updated expectations are persisted *before* publishing (KubeRay's ExpectScalePod-before-
   create order, so a crash between the two can never lead to a second create);
6. the status goes through the runtime's status-write policy (runtime.status_writes), and the
   commands go out as one ordered batch whose id the expectations already carry.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from cluster_reconciler.snapshot import build_snapshot, last_failures
from cluster_reconciler.state import AnsweredSecrets, Expectations
from raybus.api.raycluster import RayCluster
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.cluster.outcome import cluster_ref
from raybus.decisions.cluster.reconcile import DEFAULT_REQUEUE_SECONDS, ClusterDecision, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.cluster.status import differs_beyond_transition_times
from raybus.decisions.commands import Command, CreateObject, ObjectRef, RecordEvent, UpdateStatus
from raybus.runtime.controller import Result
from raybus.runtime.reconciler_app import ReconcilerContext
from raybus.runtime.status_writes import StatusWrites

log = logging.getLogger(__name__)


def significant(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """State, reason, head, observedGeneration or a condition (type, status, reason) changed:
    write it now. Counters, desired resources and endpoints may wait (runtime.status_writes)."""
    def conditions(status: dict[str, Any]) -> set[tuple[str, str, str]]:
        return {(str(c.get("type")), str(c.get("status")), str(c.get("reason")))
                for c in status.get("conditions") or []}
    return (old.get("state") != new.get("state") or old.get("reason") != new.get("reason")
            or old.get("head") != new.get("head") or conditions(old) != conditions(new)
            or old.get("observedGeneration") != new.get("observedGeneration"))


class ClusterReconciler:
    def __init__(self, ctx: ReconcilerContext, operator: OperatorSettings) -> None:
        self._ctx = ctx
        self._operator = operator
        self.status_writes = StatusWrites(ctx.outcomes, urgent=significant, differs=differs_beyond_transition_times,
                                          requeue_s=DEFAULT_REQUEUE_SECONDS)
        self.expectations = Expectations(ctx.store)
        self._parsed: dict[ObjectKey, tuple[dict[str, Any], RayCluster]] = {}
        self._secrets = AnsweredSecrets()  # nothing watches Secrets: their creates' answers
        ctx.outcomes.hooks.append(self._secrets.record)

    def bind(self, look_again: Callable[[ObjectKey], None], epoch: Callable[[ObjectKey], int],
             requeue_after: Callable[[ObjectKey, float], None]) -> None:
        """`epoch` tells when the expectations memo must be re-read from Redis; the rest is the
        status-write policy's (StatusWrites.bind)."""
        self.status_writes.bind(look_again, retry=look_again, requeue_after=requeue_after)
        self.expectations.epoch = epoch

    async def reconcile(self, key: ObjectKey) -> Result:
        cache = self._ctx.cache
        raw = cache.get(s.Kind.RAYCLUSTER, key.namespace, key.name)
        raw_seq = cache.held_seq(s.Kind.RAYCLUSTER, key.namespace, key.name)
        if raw is None:
            return await self._gone(key)
        cluster = self._parse(key, raw)
        if isinstance(cluster, ValidationError):
            return await self._unparseable(key, raw, cluster)
        uid = cluster.metadata.uid or ""
        expectations = await self.expectations.load(key, uid)
        batch_id = uuid.uuid4().hex
        batches = await self._ctx.batches.states(expectations.batches())
        snapshot = build_snapshot(cache, key, cluster, expectations=expectations, batches=batches,
                                  secrets=self._secrets.secrets(key, uid),
                                  failures=last_failures(self._ctx.outcomes, key), batch_id=batch_id)
        decision = reconcile_cluster(snapshot, settings=self._operator, now=datetime.now(UTC),
                                     entropy=secrets.token_hex(8))
        commands: list[Command] = list(decision.commands)
        if any(isinstance(c, CreateObject) for c in commands) and not await cache.is_latest(
                s.Kind.RAYCLUSTER, key.namespace, key.name, raw_seq):
            # A create decided on a RayCluster the bus already has a newer copy of (e.g. its
            # deletion, behind a stalled consumer while the GC's Pod deletions arrived): not
            # published; decided again on the newer copy (ObjectCache.is_latest).
            log.info("RayCluster newer on the bus than in the cache; creates decided again", extra={
                "key": str(key)})
            return Result(requeue_after=0.1)
        if decision.expectations != expectations:
            # Before publishing: a crash in between leaves expectations naming a batch that was
            # never published; the next reconcile revokes it through the ledger and re-decides.
            await self.expectations.save(key, uid, decision.expectations)
        requeue = self._status(key, raw, cluster, decision, commands, batch_id)
        return await self._publish(key, cluster, decision, commands, batch_id, requeue)

    async def _gone(self, key: ObjectKey) -> Result:
        await self.expectations.deleted(key)
        self._parsed.pop(key, None)
        self._ctx.outcomes.forget(key)
        self.status_writes.forget(key)
        self._secrets.forget(key)
        return Result()

    def _parse(self, key: ObjectKey, raw: dict[str, Any]) -> RayCluster | ValidationError:
        parsed = self._parsed.get(key)
        if parsed is not None and parsed[0] is raw:
            return parsed[1]  # the same watch event as last time: parse it once
        try:
            cluster = RayCluster.model_validate(raw)
        except ValidationError as exc:
            return exc
        # The cache replaces the dict on every event (never mutates it), so identity is exact;
        # the decisions only copy the model, so it may be reused as is.
        self._parsed[key] = (raw, cluster)
        return cluster

    def _status(self, key: ObjectKey, raw: dict[str, Any], cluster: RayCluster, decision: ClusterDecision,
                commands: list[Command], batch_id: str) -> float | None:
        """Append the status write if the policy sends it now; the round's requeue."""
        status, requeue = self.status_writes.hold(key, decision.status, cached=raw.get("status"),
                                                  requeue=decision.requeue_after,
                                                  unchanged=decision.requeue_unchanged)
        if status is not None:
            base, requeue = self.status_writes.send(
                key, status, batch_id=s.status_batch_id(batch_id),
                cache_rv=cluster.metadata.resource_version or "", requeue=requeue,
                unchanged=decision.requeue_unchanged)
            commands.append(UpdateStatus(reason="RayCluster status changed", resource_version=base or None,
                                         target=cluster_ref(cluster), status=status))
        return requeue

    async def _publish(self, key: ObjectKey, cluster: RayCluster, decision: ClusterDecision,
                       commands: list[Command], batch_id: str, requeue: float | None) -> Result:
        # Every command is logged with its reason when published; the rest of the decision's
        # reasoning (KubeRay's V(1) logs) at debug, so a steady cluster does not flood the logs.
        for reason in decision.reasons:
            log.debug(reason, extra={"key": str(key)})
        if decision.error is not None:
            log.info("reconcile error", extra={"key": str(key), "error": decision.error})
        commands = self.status_writes.drop_pending_creates(key, commands, batch_id=batch_id)
        if commands:
            try:
                await self._ctx.publish(key=key, kind=s.Kind.RAYCLUSTER, commands=commands,
                                        reasons=decision.reasons, uid=cluster.metadata.uid,
                                        resource_version=cluster.metadata.resource_version,
                                        batch_id=batch_id)
            except Exception:
                # Not (surely) published: the retry (rate limited) must send them again.
                self.status_writes.not_sent(key, batch_id, s.status_batch_id(batch_id))
                raise
        published = any(not isinstance(c, UpdateStatus) for c in commands)
        return Result(requeue_after=requeue, error=decision.error is not None, published=published,
                      status=any(isinstance(c, UpdateStatus) for c in commands))

    async def _unparseable(self, key: ObjectKey, raw: dict[str, Any], exc: ValidationError) -> Result:
        # The API server accepted it (preserve-unknown-fields), our models did not: treat it like
        # KubeRay's InvalidRayClusterSpec (Warning event, no requeue), never crash the replica.
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        meta = raw.get("metadata") or {}
        message = f"The RayCluster spec is invalid {key}: {problems}"
        ref = ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace=key.namespace,
                        name=key.name, uid=meta.get("uid"))
        await self._ctx.publish(key=key, kind=s.Kind.RAYCLUSTER, reasons=[message], commands=[
            RecordEvent(reason=message, target=ref, type="Warning",
                        event_reason="InvalidRayClusterSpec", message=message)])
        return Result()
