"""cluster-reconciler: KubeRay's RayCluster controller as a bus consumer.

Per reconcile: read the RayCluster and everything it owns from the snapshot cache, its scale
expectations from Redis and the state of the batches they name (runtime.batches: Outcomes, then
the command ledger), call the pure `reconcile_cluster`, persist the updated expectations *before*
publishing the commands (KubeRay's ExpectScalePod-before-create order, so a crash between the two
can never lead to a second create), then publish one ordered command batch whose id the
expectations already carry.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from cluster_reconciler.answered import AnsweredSecrets
from raybus.adapters.redis_state import EXPECTATIONS
from raybus.api.raycluster import RayCluster
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey, Outcome
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.expectations import ScaleExpectations
from raybus.decisions.cluster.outcome import cluster_ref
from raybus.decisions.cluster.reconcile import (
    DEFAULT_REQUEUE_SECONDS,
    ClusterSnapshot,
    CommandFailure,
    reconcile_cluster,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.cluster.status import differs_beyond_transition_times
from raybus.decisions.commands import CreateObject, ObjectRef, RecordEvent, UpdateStatus
from raybus.runtime.cache import union_by_name
from raybus.runtime.controller import ReconcileFn, Result
from raybus.runtime.inflight import InFlightWrites
from raybus.runtime.outcomes import real_failures
from raybus.runtime.reconciler_app import ReconcilerApp, ReconcilerContext
from raybus.runtime.service import CommonSettings

log = logging.getLogger(__name__)
KINDS = [s.Kind.RAYCLUSTER, s.Kind.POD, s.Kind.SERVICE, s.Kind.INGRESS, s.Kind.SERVICEACCOUNT,
         s.Kind.ROLE, s.Kind.ROLEBINDING, s.Kind.JOB, s.Kind.NETWORKPOLICY,
         s.Kind.PODGROUP]


class ClusterReconciler:
    def __init__(self, ctx: ReconcilerContext, operator: OperatorSettings) -> None:
        self._ctx = ctx
        self._operator = operator
        self._inflight = InFlightWrites(differs=differs_beyond_transition_times)
        self._memo: dict[ObjectKey, tuple[int, str, ScaleExpectations]] = {}
        self._parsed: dict[ObjectKey, tuple[dict[str, Any], RayCluster]] = {}
        self._epoch: Callable[[ObjectKey], int] = lambda key: -1  # bound by the app
        self._secrets = AnsweredSecrets()  # nothing watches Secrets: their creates' answers
        ctx.outcomes.hooks.append(self._settle)

    def _settle(self, outcome: Outcome) -> None:
        written = next((r.resource_version for r in outcome.results
                        if r.op == "update_status" and r.ok and r.code == 200), None)
        failed = any(r.op == "update_status" and not r.ok for r in outcome.results)
        self._inflight.settle(outcome.reconcile_id, written_rv=written, status_failed=failed)
        for r in real_failures(outcome.results):
            if r.op == "create" and r.target:  # e.g. a PodGroup whose CRD is missing: retry it
                self._inflight.create_failed(outcome.key, r.target, batch_id=outcome.reconcile_id)
        self._secrets.record(outcome)

    def bind(self, look_again: Any, epoch: Callable[[ObjectKey], int],
             retry: Callable[[ObjectKey], None] | None = None,
             requeue_after: Callable[[ObjectKey, float], None] | None = None) -> None:
        """A status held back behind an in-flight one is asked for again once that settles; a
        failed status write asks for a reconcile (`retry`), which requeues for when it may be
        sent again; a status write that landed asks for KubeRay's requeue 2 s later
        (`requeue_after`); `epoch` tells when the expectations memo must be re-read from Redis."""
        self._inflight.on_ready = look_again
        self._inflight.on_status_failed = retry
        self._epoch = epoch
        if requeue_after is not None:
            self._inflight.on_status_written = lambda key: requeue_after(key, DEFAULT_REQUEUE_SECONDS)

    async def _load_expectations(self, key: ObjectKey, uid: str) -> ScaleExpectations:
        """Redis is the truth (another replica may have owned the key); within one ownership
        epoch this replica is the only writer, so its own last write is what Redis holds. They
        are the RayCluster incarnation's (`uid`): another incarnation's are none of its own."""
        memo = self._memo.get(key)
        epoch = self._epoch(key)
        if memo is not None and memo[0] == epoch and memo[1] == uid:
            return memo[2]
        stored = await self._ctx.store.load(EXPECTATIONS, namespace=key.namespace, name=key.name)
        if stored and stored.get(UID_FIELD, uid) != uid:
            stored = None
        expectations = ScaleExpectations.model_validate(stored) if stored else ScaleExpectations()
        self._memo[key] = (epoch, uid, expectations)
        return expectations

    def _owned(self, kind: s.Kind, key: ObjectKey) -> list[dict[str, Any]]:
        return self._ctx.cache.owned_by(kind, key.namespace, owner_kind="RayCluster",
                                        owner_name=key.name)

    def _last_failures(self, key: ObjectKey) -> list[CommandFailure]:
        outcome = self._ctx.outcomes.last(key)
        if outcome is None:
            return []
        failures = real_failures(outcome.results)
        # target lets the decision name the failed object (KubeRay's error message carries it).
        return [CommandFailure(reason=r.error_reason or "", message=r.message, target=r.target)
                for r in failures]

    async def reconcile(self, key: ObjectKey) -> Result:
        cache, store = self._ctx.cache, self._ctx.store
        raw = cache.get(s.Kind.RAYCLUSTER, key.namespace, key.name)
        raw_seq = cache.held_seq(s.Kind.RAYCLUSTER, key.namespace, key.name)
        if raw is None:
            # RayClusterScaleExpectation.Delete on NotFound, but kept in Redis for a while: KubeRay
            # deletes them in the process whose informer saw the deletion, which never decides on
            # that RayCluster again. Here the partition may move to a replica whose cache still
            # lags the deletion (a NATS node restart delays one kind's ordered consumer); it found
            # no expectations and created a head Pod and every worker again, under new names, for
            # Pods the previous owner had just created (what tests/integration/bus/
            # test_cluster_expectations_handover.py shows; the chaos soak's symptom, seed 1).
            # Kept, they hold that replica back as they held the previous owner; tagged with the
            # uid, they never hold back a new RayCluster of the same name.
            await store.expire(EXPECTATIONS, namespace=key.namespace, name=key.name,
                               seconds=DELETED_EXPECTATIONS_TTL_S)
            self._memo.pop(key, None)
            self._parsed.pop(key, None)
            self._ctx.outcomes.forget(key)
            self._inflight.forget(key)
            self._secrets.forget(key)
            return Result()
        parsed = self._parsed.get(key)
        if parsed is not None and parsed[0] is raw:
            cluster = parsed[1]  # the same watch event as last time: parse it once
        else:
            try:
                cluster = RayCluster.model_validate(raw)
            except ValidationError as exc:
                return await self._unparseable(key, raw, exc)
            # The cache replaces the dict on every event (never mutates it), so identity is
            # exact; the decisions only copy the model, so it may be reused as is.
            self._parsed[key] = (raw, cluster)
        expectations = await self._load_expectations(key, cluster.metadata.uid or "")
        batch_id = uuid.uuid4().hex
        batches = await self._ctx.batches.states(expectations.batches())
        # No await from here on: the Pods, Services, ... and the watermark must be one snapshot.
        # The watermark is read first, so it never covers a Pod event the Pod list lacks.
        watermark = cache.rv_watermark(s.Kind.POD)
        snapshot = ClusterSnapshot(
            cluster=cluster,
            pods=cache.labelled(s.Kind.POD, key.namespace, key.name),
            services=union_by_name(self._owned(s.Kind.SERVICE, key),
                            cache.labelled(s.Kind.SERVICE, key.namespace, key.name)),
            ingresses=self._owned(s.Kind.INGRESS, key),
            service_accounts=self._owned(s.Kind.SERVICEACCOUNT, key),
            roles=self._owned(s.Kind.ROLE, key),
            role_bindings=self._owned(s.Kind.ROLEBINDING, key),
            # The auth Secret as its create was answered (no watch), the Redis cleanup Job,
            # NetworkPolicies and the batch scheduler's PodGroup.
            secrets=self._secrets.secrets(key, cluster.metadata.uid or ""),
            jobs=self._owned(s.Kind.JOB, key),
            network_policies=self._owned(s.Kind.NETWORKPOLICY, key),
            pod_groups=self._owned(s.Kind.PODGROUP, key),
            expectations=expectations,
            last_failures=self._last_failures(key),
            batches=batches,
            batch_id=batch_id,
            pods_watermark=watermark,
        )
        decision = reconcile_cluster(snapshot, settings=self._operator, now=datetime.now(UTC),
                                     entropy=secrets.token_hex(8))
        # Named creates already in flight are dropped only right before the publish (below):
        # marked earlier, a round that then failed (Redis closed the connection while saving the
        # expectations) or returned early left them "in flight" under a batch never published,
        # and every later round skipped them for 300 s: a RayService's pending cluster got no
        # head Service and no autoscaler ServiceAccount, so its head Pod was refused (403).
        commands = list(decision.commands)
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
            uid = cluster.metadata.uid or ""
            await store.save(EXPECTATIONS, namespace=key.namespace, name=key.name,
                             value={**decision.expectations.model_dump(mode="json"), UID_FIELD: uid})
            self._memo[key] = (self._epoch(key), uid, decision.expectations)
        requeue = decision.requeue_after
        if decision.status is not None and self._inflight.status_pending(key, decision.status,
                                                                         cached=raw.get("status")):
            # That status is on its way (or just written, not yet in the cache), or waits behind
            # one that is (asked for again when it settles). KubeRay requeues 2 s after its
            # Status().Update returns: ours returns when the write's Outcome arrives, which asks
            # for that requeue (_status_written); this round keeps its deadline and otherwise
            # asks for what an unchanged status asks for. (Requeueing every 2 s until our own
            # write reached the cache was a third of the reconciles.)
            decision = decision.model_copy(update={"status": None})
            requeue = _after_write(decision.requeue_unchanged, self._inflight.since_written(key),
                                   self._inflight.status_expires_in(key))
        if decision.status is not None:
            previous = self._inflight.last_status(key) or (raw.get("status") or {})
            wait = self._inflight.status_wait(key, urgent=significant(previous, decision.status),
                                              interval_s=STATUS_INTERVAL_S)
            if wait > 0:  # only counters/resources changed: fold into the next write
                decision = decision.model_copy(update={"status": None})
                requeue = wait if requeue is None else min(requeue, wait)
        if decision.status is not None:
            base = self._inflight.status_rv(key, cluster.metadata.resource_version or "")
            self._inflight.mark_status(key, decision.status, batch_id=s.status_batch_id(batch_id),
                                       base_rv=base)
            commands.append(UpdateStatus(reason="RayCluster status changed", resource_version=base or None,
                                         target=cluster_ref(cluster), status=decision.status))
            if requeue == DEFAULT_REQUEUE_SECONDS != decision.requeue_unchanged:
                # The status-write requeue: 2 s after the write lands (_status_written), not after
                # it is sent. A busy executor holds a RayCluster status for seconds (it yields to
                # command batches), and a requeue counted from the send found it still pending:
                # at 1,000 clusters 8 reconciles per cluster that decided nothing.
                # Until the Outcome comes, only the in-flight memo's expiry, in case it never does.
                requeue = _after_write(decision.requeue_unchanged, None, self._inflight.status_expires_in(key))
        # Every command is logged with its reason when published; the rest of the decision's
        # reasoning (KubeRay's V(1) logs) at debug, so a steady cluster does not flood the logs.
        for reason in decision.reasons:
            log.debug(reason, extra={"key": str(key)})
        if decision.error is not None:
            log.info("reconcile error", extra={"key": str(key), "error": decision.error})
        commands = self._inflight.drop_pending_creates(key, commands, batch_id=batch_id)
        if commands:
            try:
                await self._ctx.publish(key=key, kind=s.Kind.RAYCLUSTER, commands=commands,
                                        reasons=decision.reasons, uid=cluster.metadata.uid,
                                        resource_version=cluster.metadata.resource_version,
                                        batch_id=batch_id)
            except Exception:
                # Not (surely) published: the retry (rate limited) must send them again.
                self._inflight.status_not_sent(key, s.status_batch_id(batch_id))
                self._inflight.creates_not_sent(key, batch_id)
                raise
        published = any(not isinstance(c, UpdateStatus) for c in commands)
        return Result(requeue_after=requeue, error=decision.error is not None, published=published,
                      status=any(isinstance(c, UpdateStatus) for c in commands))

    async def _unparseable(self, key: ObjectKey, raw: dict[str, Any],
                           exc: ValidationError) -> Result:
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


# The RayCluster uid stored with its expectations, and how long they outlive its deletion: longer
# than any replica's cache can lag it (KubeRay's resync is 300 s).
UID_FIELD = "uid"
DELETED_EXPECTATIONS_TTL_S = 3600


# A RayCluster woken by events runs at most once a second (runtime/workqueue.py): its Pods step
# through scheduled/started/ready one after the other, and deciding after each step was two
# thirds of its runs, deciding nothing. A cluster quiet for a second still runs 0.1 s
# after its first event. RayJobs and RayServices are woken by far fewer events and keep
# every run (their job-end and Serve latencies are measured against KubeRay's 2-3 s polls).
MIN_INTERVAL_S = 1.0


# A status change that only moves counters, desired resources or endpoints is written at most
# this often per cluster (KubeRay requeues every 2 s while a cluster changes); state, reason, head
# and condition changes are written at once (`significant`). At 1,000 clusters the executor's one
# QPS budget would otherwise go to a write per Pod turning ready. The head's fields and a
# condition's reason are not folded: KubeRay shows them at once, and folding them for 5 s saved
# 15-27% of the status writes but no CPU per Pod or all-ready time beyond run-to-run noise.
STATUS_INTERVAL_S = 2.0


def _after_write(unchanged: float | None, since_written: float | None,
                 expires_in: float | None) -> float | None:
    """The requeue of a round whose status is already on its way: KubeRay's 2 s after the status
    write (DEFAULT_REQUEUE_SECONDS, from when its Outcome arrived); while it is in flight or after
    those 2 s, when the in-flight memo stops holding the status back (so one the cache never shows
    is sent again); at the latest the unchanged-status requeue."""
    if since_written is not None and since_written < DEFAULT_REQUEUE_SECONDS:
        left: float | None = DEFAULT_REQUEUE_SECONDS - since_written
    else:
        left = expires_in
    if left is None:
        return unchanged
    return left if unchanged is None else min(unchanged, left)


def significant(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """State, reason, head, observedGeneration or a condition (type, status, reason) changed:
    write it now. Counters, desired resources and endpoints may wait STATUS_INTERVAL_S."""
    def conditions(status: dict[str, Any]) -> set[tuple[str, str, str]]:
        return {(str(c.get("type")), str(c.get("status")), str(c.get("reason")))
                for c in status.get("conditions") or []}
    return (old.get("state") != new.get("state") or old.get("reason") != new.get("reason")
            or old.get("head") != new.get("head") or conditions(old) != conditions(new)
            or old.get("observedGeneration") != new.get("observedGeneration"))


class ClusterReconcilerApp(ReconcilerApp):
    def __init__(self, settings: CommonSettings, operator: OperatorSettings) -> None:
        self.reconciler: ClusterReconciler | None = None

        def make(ctx: ReconcilerContext) -> ReconcileFn:
            self.reconciler = ClusterReconciler(ctx, operator)
            return self.reconciler.reconcile

        super().__init__(settings, controller=s.Controller.CLUSTER,
                         primary_kind=s.Kind.RAYCLUSTER, kinds=KINDS, make_reconcile=make,
                         min_interval_s=MIN_INTERVAL_S)

    async def prepare(self, ctx: ReconcilerContext) -> None:
        assert self.reconciler is not None and self.runtime is not None
        self.reconciler.bind(self.runtime.look_again, self.runtime.epoch, retry=self.runtime.look_again,
                            requeue_after=self.runtime.requeue_after)
        ctx.cache.listeners.setdefault(s.Kind.POD.value, []).append(self._on_pod)

    def _on_pod(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A Pod event wakes its RayCluster from this replica's cache, not through a trigger: a
        Pod steps through five or six versions, and a trigger per version was a third of the
        bus's messages per Pod, each one published, stored, fetched and acked. The
        watcher publishes no RayCluster trigger for a labelled Pod (watcher.app.on_change)."""
        assert self.runtime is not None
        pod = new if new is not None else old
        namespace = str(((pod or {}).get("metadata") or {}).get("namespace") or "")
        cause = f"{'DELETED' if new is None else 'ADDED' if old is None else 'MODIFIED'} pod"
        for cluster in podutil.clusters_to_wake(old, new):
            self.runtime.wake(ObjectKey(namespace=namespace, name=cluster), cause)


def create_app(settings: CommonSettings, operator: OperatorSettings | None = None) -> ReconcilerApp:
    return ClusterReconcilerApp(settings, operator or OperatorSettings())
