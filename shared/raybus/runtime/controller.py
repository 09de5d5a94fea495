"""Runs one reconciler replica: snapshot cache, partition leases, trigger consumers, workers.

The three guarantees of the bus contract meet here:
(a) coalescing: RAYBUS_TRIGGERS keeps one pending trigger per object, and the WorkQueue folds
    whatever arrives while a key waits or runs into one more reconcile;
(b) exclusivity: a key is reconciled only by the replica holding its partition's lease, and within
    that replica by one worker at a time;
(c) snapshot first: no partition is consumed before the cache holds the full object state, and a
    replica that acquires a partition enqueues every object of it (takeover resync).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js.client import JetStreamContext
from nats.js.errors import FetchTimeoutError
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from raybus.bus import subjects as s
from raybus.bus.codec import decode_or_dead_letter
from raybus.bus.envelopes import ObjectKey, Trigger
from raybus.bus.publish import publish_trigger
from raybus.bus.streams import BusSettings, ensure_leases, ensure_streams, trigger_consumer_config
from raybus.observability import controllerruntime as crm
from raybus.observability.metrics import RECONCILE_CAUSES, TRIGGER_BIND_FAILURES
from raybus.observability.tracing import exporting, extract_context, process_attributes
from raybus.runtime import traces
from raybus.runtime.cache import ObjectCache
from raybus.runtime.leases import PartitionLeases
from raybus.runtime.pull import consumer_lost
from raybus.runtime.tasks import cancel_and_wait
from raybus.runtime.traces import ReconcileTraces
from raybus.runtime.workqueue import WorkQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    """What a reconcile returns, as controller-runtime's (ctrl.Result, error):
    - error: KubeRay returned an error -> requeued with the rate limiter (AddRateLimited);
    - requeue_after: KubeRay's RequeueAfter;
    - published: commands went out; whether they worked is known only from their Outcome, so the
      key's failure count is kept until then (a failed Outcome counts as this round's error).
    A reconcile with no error that published nothing resets the key's backoff (Queue.Forget)."""

    requeue_after: float | None = None
    error: bool = False
    published: bool = False
    status: bool = False  # a status write went out (only counted: raybus_reconcile_causes_total)


def _cause_label(trig: Trigger) -> str:
    """A bounded label: the watcher's cause is "<EVENT> <kind> <ns/name>"; others are free text."""
    event = trig.cause.split(" ", 1)[0]
    return f"{event if event in _EVENTS else 'other'} {trig.cause_kind or '-'}"


_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED", "SYNC"})


# A reconcile returns a Result, or just "requeue after N seconds" / None.
ReconcileFn = Callable[[ObjectKey], Awaitable["Result | float | None"]]


# How long one pull request waits on an idle partition. A fetch returns as soon as a trigger
# arrives (measured: 2-4 ms publish -> fetch, whatever this is), so this only sets the idle cost:
# every expiry is two requests to the server per partition, and with 16 partitions x 3
# controllers at 1 s that was 2% of a core per reconciler and 3% of nats-server's, doing nothing.
FETCH_WAIT_S = 5.0
LEASE_STALE_NAK_S = 1.0  # a trigger met while our partition lease is stale comes back after this


@dataclass
class _Pending:
    msg: Msg | None  # the trigger to ack; None: a wake from this replica's own cache (wake())
    ctx: otel_context.Context
    cause: str = ""  # "<event> <kind>" of the trigger's cause, for raybus_reconcile_causes_total

    async def ack(self) -> None:
        if self.msg is not None:
            with contextlib.suppress(Exception):
                await self.msg.ack()

    async def nak(self, delay: float | None = None) -> None:
        if self.msg is not None:
            with contextlib.suppress(Exception):
                await self.msg.nak(delay=delay)


class ControllerRuntime:
    def __init__(self, nc: NATS, *, controller: s.Controller, replica_id: str, cache: ObjectCache,
                 primary_kind: s.Kind, reconcile: ReconcileFn, bus: BusSettings | None = None,
                 workers: int = 8, resync_s: float = 300.0, debounce_s: float = 0.1,
                 min_interval_s: float = 0.0) -> None:
        self._nc = nc
        self.controller = controller
        self.replica_id = replica_id
        self.cache = cache
        self._kind = primary_kind
        self._reconcile = reconcile
        self.bus = bus or BusSettings()
        self._workers = workers
        self._resync_s = resync_s
        self._debounce = debounce_s
        # controller-runtime's name for this controller (and its workqueue): KubeRay's, by kind
        self.name = crm.CONTROLLER_NAMES.get(controller, controller.value)
        self.queue: WorkQueue[ObjectKey, _Pending] = WorkQueue(
            min_interval_s=min_interval_s, metrics=crm.QueueMetrics(self.name))
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        self._epochs: dict[int, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.leases: PartitionLeases | None = None
        self._tracer = trace.get_tracer(f"raybus.{controller.value}")
        self.reconciling: set[ObjectKey] = set()  # observable for tests
        # Keys in _process -> whether requeue_after asked for a requeue meanwhile.
        self._in_process: dict[ObjectKey, bool] = {}
        self._traces = ReconcileTraces(f"ADDED {primary_kind.value}")  # runtime/traces.py

    def partition(self, key: ObjectKey) -> int:
        return s.partition_of(key.namespace, key.name, self.bus.partitions)

    def epoch(self, key: ObjectKey) -> int:
        """Changes whenever this replica (re)acquires the key's partition: state a reconciler keeps
        in memory for the key is valid only within one epoch (another replica may have owned the
        key in between and changed its Redis state)."""
        return self._epochs.get(self.partition(key), 0)

    async def start(self) -> None:
        js = self._nc.jetstream()
        await ensure_streams(js, self.bus)
        await self.cache.start()  # (c): full snapshot before any decision
        kv = await ensure_leases(js, self.bus)
        self.leases = PartitionLeases(kv, js, controller=self.controller, replica_id=self.replica_id,
                                      partitions=self.bus.partitions, ttl_s=self.bus.lease_ttl_s)
        await self._lease_round()
        self._tasks.append(asyncio.create_task(self._lease_loop()))
        self._tasks.append(asyncio.create_task(self._resync_loop()))
        crm.init_controller(self.name, self._workers)
        crm.QUEUES.add(self.name, self.queue)
        self._tasks += [asyncio.create_task(self._worker()) for _ in range(self._workers)]

    async def stop(self) -> None:
        crm.QUEUES.remove(self.name, self.queue)
        await cancel_and_wait([*self._tasks, *self._fetchers.values()])
        self._fetchers.clear()
        if self.leases is not None:
            with contextlib.suppress(Exception):
                await self.leases.release_all()
        await self.cache.stop()

    # --- leases -------------------------------------------------------------------------------
    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self.bus.lease_ttl_s / 5)
            try:
                await self._lease_round()
            except Exception:
                log.exception("lease round failed")

    async def _lease_round(self) -> None:
        assert self.leases is not None
        busy = {self.partition(k) for k in self.reconciling}
        releasable = set(self.leases.held) - busy
        changes = await self.leases.tick(releasable=releasable)
        for p in changes.lost:
            await self._drop_partition(p)
        if changes.acquired:
            log.info("acquired partition leases", extra={"partitions": sorted(changes.acquired)})
        for p in changes.acquired:
            self._epochs[p] = self._epochs.get(p, 0) + 1
            self._fetchers[p] = asyncio.create_task(self._fetch_loop(p))
            self._enqueue_partition(p)  # takeover: look at everything this partition holds

    async def _drop_partition(self, p: int) -> None:
        task = self._fetchers.pop(p, None)
        if task is not None:
            await cancel_and_wait([task])
        waiting = self.queue.waiting(lambda k: self.partition(k) == p)
        for pending in self.queue.drop(lambda k: self.partition(k) != p):
            await pending.nak()  # the new owner gets it at once, not after ack_wait
        # Hand over the requeues only this replica knew of (RequeueAfter, a retry, a look again
        # after a status write that triggers nothing): the new owner's takeover resync only sees
        # the objects already in *its* cache, which may lag ours. The trigger carries our
        # watermark, so the new owner decides on a snapshot at least as fresh as ours.
        js = self._nc.jetstream()
        for key in waiting:
            with contextlib.suppress(Exception):
                await publish_trigger(js, controller=self.controller, key=key, kind=self._kind.value,
                                      cause="partition handover", objects_seq=self.cache.applied(self._kind.value),
                                      cause_kind=self._kind.value, partitions=self.bus.partitions)
        if waiting:
            log.info("partition handed over", extra={"partition": p, "keys": len(waiting)})

    def _enqueue_partition(self, p: int) -> None:
        for ns, name in self.cache.keys(self._kind):
            key = ObjectKey(namespace=ns, name=name)
            if self.partition(key) == p:
                self.queue.add(key)

    async def _resync_loop(self) -> None:
        # KubeRay requeues every RayCluster after 300 s regardless; this is the same safety net.
        while True:
            await asyncio.sleep(self._resync_s)
            for p in list(self._fetchers):
                self._enqueue_partition(p)

    # --- consuming triggers ---------------------------------------------------------------------
    async def _bind(self, p: int) -> JetStreamContext.PullSubscription:
        """The partition's trigger consumer, retried until it is there. The lease stays held while
        this runs, so a bind that gave up (NoStreamResponseError while a NATS node restarts)
        would leave the partition owned and never consumed: its objects never reconciled, a
        deletion never finalized, a new object never initialized."""
        js = self._nc.jetstream()
        config = trigger_consumer_config(self.controller, p, self.bus)

        def failed(state: RetryCallState) -> None:
            TRIGGER_BIND_FAILURES.labels(self.controller.value).inc()
            log.warning("trigger consumer not bound; retrying", extra={
                "partition": p, "error": repr(state.outcome.exception() if state.outcome else None),
                "retry_s": state.next_action.sleep if state.next_action else None})
        # Retried until bound (the lease is held meanwhile); a cancel (stop, lost lease) is not.
        async for attempt in AsyncRetrying(wait=wait_exponential(multiplier=0.2, min=0.2, max=5.0),
                                           retry=retry_if_exception_type(Exception),
                                           before_sleep=failed, reraise=True):
            with attempt:
                await js.add_consumer(s.trigger_stream(self.controller), config)  # idempotent
                return await js.pull_subscribe_bind(durable=config.durable_name or "",
                                                    stream=s.trigger_stream(self.controller))
        raise AssertionError("unreachable: AsyncRetrying retries forever")

    async def _fetch_loop(self, p: int) -> None:
        psub = await self._bind(p)
        try:
            while True:  # stopped by cancel_and_wait, which re-cancels a swallowed cancel
                try:
                    msgs = await psub.fetch(256, timeout=FETCH_WAIT_S)
                except (FetchTimeoutError, NatsTimeout, TimeoutError):
                    continue  # an idle partition: nats-py raises asyncio's TimeoutError here too
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.warning("fetch failed; retrying", exc_info=True, extra={"partition": p})
                    await asyncio.sleep(1.0)
                    js = self._nc.jetstream()
                    if await consumer_lost(js, s.trigger_stream(self.controller),
                                           s.trigger_consumer_name(self.controller, p)):
                        log.warning("trigger consumer lost; creating it again", extra={"partition": p})
                        with contextlib.suppress(Exception):
                            await psub.unsubscribe()
                        psub = await self._bind(p)
                    continue
                for msg in msgs:
                    await self._accept(msg)
        finally:
            with contextlib.suppress(Exception):
                await psub.unsubscribe()

    async def _accept(self, msg: Msg) -> None:
        trig = await decode_or_dead_letter(Trigger, data=msg.data, subject=msg.subject, nc=self._nc,
                                           service=f"{self.controller.value}-reconciler")
        if trig is None:
            await msg.ack()
            return
        if not await self.cache.wait_for(trig.objects_seq, kind=trig.cause_kind, scope=trig.cause_scope):
            # Never decide on a snapshot older than the trigger's cause (e.g. the cache's ordered
            # consumer is still re-subscribing after a NATS restart): ask for it again shortly.
            log.warning("snapshot behind trigger; redelivering", extra={
                "key": str(trig.key), "seq": trig.objects_seq, "kind": trig.cause_kind})
            await msg.nak(delay=1.0)
            return
        # Debounced: the events a change fans out into (a Pod's schedule/start/ready, a burst of
        # them across a cluster) arrive within milliseconds of each other; deciding once after
        # them, not once per event, is what keeps a reconciler's CPU proportional to changes.
        ctx = extract_context(msg.headers)
        cause = _cause_label(trig)
        self._traces.woke(trig.key, cause, ctx)
        self.queue.add_soon(trig.key, _Pending(msg=msg, ctx=ctx, cause=cause), self._debounce)

    # --- workers --------------------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            key, pendings = await self.queue.get()
            try:
                await self._process(key, pendings)
            finally:
                self.queue.done(key)

    async def _process(self, key: ObjectKey, pendings: list[_Pending]) -> None:
        assert self.leases is not None
        if not self.leases.valid(self.partition(key)):
            # A renewal is late (e.g. NATS just restarted) while the fetcher still pulls. Naked
            # at once, a trigger came straight back to this replica, ~0.1 s a round, and after
            # max_deliver rounds NATS gave up on it: it stayed in the work queue below the
            # consumer's ack floor and its RayCluster was never reconciled (make test beside
            # two CPU hogs, the sample right after the NATS restart test). With a delay, a
            # lease that is renewed or taken over within max_deliver seconds loses nothing.
            for pending in pendings:
                await pending.nak(delay=LEASE_STALE_NAK_S)
            if not any(pending.msg is not None for pending in pendings):
                # A requeue or a wake of ours (no bus message will come back): keep it until the
                # lease is renewed, or until the partition is dropped and handed over.
                self.queue.add_after(key, 1.0)
            return
        self._in_process[key] = False
        try:
            await self._run(key, pendings, self._traces.parent(key, [p.ctx for p in pendings]))
        finally:
            self._in_process.pop(key, None)

    async def _run(self, key: ObjectKey, pendings: list[_Pending], parent: otel_context.Context | None) -> None:
        self.reconciling.add(key)
        active = crm.ACTIVE_WORKERS.labels(self.name)
        active.inc()
        started = time.monotonic()
        try:
            links: list[Link] = []
            attributes: dict[str, str | int] = {"raybus.key": str(key)}
            if exporting():  # a span nobody records needs neither
                links = traces.links(p.ctx for p in pendings)
                attributes.update(process_attributes(s.triggers_filter(self.controller),
                                                     count=max(len(pendings), 1)))
            with self._tracer.start_as_current_span("reconcile", context=parent, kind=SpanKind.CONSUMER,
                                                    links=links, attributes=attributes):
                returned = await self._reconcile(key)
            result = returned if isinstance(returned, Result) else Result(requeue_after=returned)
            RECONCILE_CAUSES.labels(
                self.controller.value, pendings[-1].cause if pendings else "requeue",
                "commands" if result.published else "status" if result.status else "nothing").inc()
        except Exception:
            log.exception("reconcile failed", extra={"key": str(key)})
            result = Result(error=True)
        finally:
            self.reconciling.discard(key)
            active.dec()
        crm.observe_reconcile(self.name, time.monotonic() - started, error=result.error,
                              requeue_after=result.requeue_after)
        for pending in pendings:
            await pending.ack()
        if result.error:
            delay = self.queue.add_rate_limited(key)
            log.debug("reconcile error; retry rate limited", extra={"key": str(key), "delay_s": delay})
            return
        if not result.published:
            self.queue.forget_failures(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after, earliest=self._in_process.get(key, False))

    # --- outcomes of published commands feed the rate limiter -----------------------------------
    def owns(self, key: ObjectKey) -> bool:
        return self.leases is not None and self.leases.valid(self.partition(key))

    def command_failed(self, key: ObjectKey) -> None:
        """A command of key's last round failed: that round's error (AddRateLimited), instead of
        an immediate retry (controller-runtime never retries an error without backoff)."""
        if self.owns(key):
            self.queue.add_rate_limited(key)

    def commands_succeeded(self, key: ObjectKey) -> None:
        self.queue.forget_failures(key)

    def look_again(self, key: ObjectKey) -> None:
        if self.owns(key):
            self.queue.add(key)

    def requeue_after(self, key: ObjectKey, delay_s: float) -> None:
        """RequeueAfter from outside a run (e.g. when a write the run sent has landed); an earlier
        requeue of the key already scheduled is kept, and so is this one when a run of the key
        in progress asks for a later one as it ends (the Outcome of a status write can arrive
        before the run that sent it has acked its triggers: make test beside two hogs, a resumed
        RayCluster waited for the 120 s memo expiry instead of 2 s)."""
        if self.owns(key):
            self.queue.add_after(key, delay_s, earliest=True)
            if key in self._in_process:
                self._in_process[key] = True

    def wake(self, key: ObjectKey, cause: str) -> None:
        """A change this replica's cache applied wakes `key`, as a trigger would, without one on
        the bus (controller-runtime's informer handlers feed its workqueue in process the same
        way). Every replica's cache applies every event, so only the holder of the key's
        partition acts; held, not necessarily valid: while a renewal is late, _process keeps the
        wake until it is renewed or hands it over with the partition (_drop_partition). A
        partition acquired later starts with a takeover resync, which covers what came before.
        `cause`: "<event> <kind>", as a trigger's."""
        if self.partition(key) in self._fetchers:
            self.queue.add_soon(key, _Pending(msg=None, ctx=otel_context.get_current(), cause=cause),
                                self._debounce)
