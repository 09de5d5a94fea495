"""The command executor: the only raybus component with Kubernetes write access.

Consumes CommandBatch messages from RAYBUS_COMMANDS (a work queue) through the shared durable pull
consumer `command-executor`, and status writes from RAYBUS_STATUS (last value per object) through
`command-executor-status`: any number of replicas share them, each message goes to one of them.
`runtime.pull.PullWorkers` keeps every message it holds alive with in-progress acks, so ack_wait is
a few seconds and a dead replica's batches reach another replica that fast.

Every command batch goes through the command ledger (`bus/ledger.py`) first: claim, apply, record
the results, publish the Outcome, ack. Hence, whatever JetStream redelivers or duplicates:
- a batch is applied at most once (a redelivered `done` batch is answered from the ledger);
- a batch its reconciler revoked is answered "expired" and never applied;
- two replicas never apply one batch at once (a claim is a lease; a lost lease stops the loser).
Acknowledgement is explicit: decoded and applied (success or permanent failure) -> Outcome -> ack;
a transient API error (429/5xx/connection) -> claim released, nak with a growing delay (the
batch is redelivered; commands are idempotent); on the last allowed delivery the failure is
reported instead; undecodable -> dead-letter subject, counted, ack. Failures are reported in the
Outcome only: the reconciler's rate limiter decides when to look again (controller-runtime's
AddRateLimited), not an immediate trigger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from opentelemetry import trace
from pydantic import AliasChoices, Field

from command_executor.admission import Admission, Known, redacted
from command_executor.executor import BatchResult, Executor
from command_executor.mapping import describe, target_of
from raybus.adapters.kube import KubeClient, new_api_client, rate_limiter
from raybus.adapters.priority_limiter import WRITE_PRIORITY, PriorityLimiter
from raybus.bus import subjects as s
from raybus.bus.codec import dead_letter, decode_or_dead_letter
from raybus.bus.connect import connect_nats
from raybus.bus.envelopes import CommandBatch, CommandResult, Outcome
from raybus.bus.ledger import BatchLedger, BatchRecord, command_key, digest_of, with_landed
from raybus.bus.publish import publish_outcome
from raybus.bus.streams import (
    BusSettings,
    command_consumer_config,
    ensure_streams,
    status_consumer_config,
)
from raybus.decisions.settings import DecisionSettings
from raybus.observability.metrics import MESSAGES
from raybus.observability.tracing import extract_context
from raybus.runtime.pull import PullWorkers
from raybus.runtime.settings import NOT_A_FLAG, CommonSettings, DecisionFlags, KubeSettings
from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)
tracer = trace.get_tracer("raybus.command-executor")
SERVICE = "command-executor"


class ExecutorSettings(DecisionFlags, KubeSettings):
    service: str = Field(default=SERVICE, json_schema_extra=NOT_A_FLAG)
    # Batches for one object still run one after another (Executor's lock).
    concurrency: int = Field(default=32, validation_alias=AliasChoices("concurrency", "RAYBUS_EXECUTOR_CONCURRENCY"),
                             description="batches applied at once")
    ack_wait_s: float = Field(default=5.0, description="executor consumers' ack wait; heartbeats every "
                              "ack_wait/3 keep work alive")
    max_deliver: int = Field(default=20, description="deliveries of one batch before it is dead-lettered")
    nak_delay_s: float = Field(default=1.0, description="first redelivery delay after a transient error; "
                               "doubles, capped")
    status_retries: int = Field(default=5, description="attempts of one status write")
    status_defer_s: float = Field(default=5.0, description="longest a RayCluster status write yields to "
                                  "command batches")
    # Admission (command_executor/admission.py).
    admission_wait_s: float = Field(default=30.0, description="how long a batch whose Ray object the watch has "
                                    "not seen is retried before it is refused")
    # Off only for tests of the apply/ledger mechanics that publish hand-made batches without a
    # watcher; admission has its own tests. Never off in a deployment.
    admission: bool = Field(default=True, json_schema_extra=NOT_A_FLAG)
    status_after_s: float = Field(default=10.0, description="longest a RayJob/RayService status waits for its "
                                  "reconcile's batch")
    # What admission rebuilds created objects with: the reconcilers' operator settings, loaded the
    # same way (DecisionFlags.decisions).
    decision: DecisionSettings = Field(default=DecisionSettings(), json_schema_extra=NOT_A_FLAG)
    watch_namespace: str | None = Field(default=None, description="KubeRay's watchNamespace, comma-separated: "
                                        "the namespaces whose objects are admitted")

    def completed(self) -> ExecutorSettings:
        return self.model_copy(update={"decision": self.decisions()})


class CommandExecutorService:
    def __init__(self, settings: ExecutorSettings, *, kube: KubeClient | None = None) -> None:
        self.settings = settings
        self._kube = kube
        self.executor: Executor | None = None
        self.ledger: BatchLedger | None = None
        self.admission: Admission | None = None
        self.bus = BusSettings(partitions=settings.partitions, executor_ack_wait_s=settings.ack_wait_s,
                               max_deliver=settings.max_deliver, declare=settings.bus_declare,
                               replicas=settings.stream_replicas)
        self._nc: NATS | None = None
        self._workers: list[PullWorkers] = []
        self.applied = 0  # batches finished (observable for tests / bench)
        self.answered_from_ledger = 0  # redeliveries answered without applying again

    @property
    def nc(self) -> NATS:
        assert self._nc is not None
        return self._nc

    async def start(self) -> None:
        if self._kube is None:
            api = await new_api_client(self.settings.kubeconfig)
            self._kube = KubeClient(api, limiter=PriorityLimiter(rate_limiter(self.settings.kube_qps,
                                                                              self.settings.kube_burst)))
        events_kube = KubeClient(self._kube.api, limiter=rate_limiter(self.settings.kube_qps,
                                                                      self.settings.kube_burst))
        self.executor = Executor(self._kube, status_retries=self.settings.status_retries,
                                 host=self.settings.replica_id or None, events_kube=events_kube)
        self._nc = await connect_nats(self.settings.nats_url, self.settings.auth, max_reconnect_attempts=-1,
                                      name=f"{SERVICE}-{self.settings.replica_id}")
        js = self.nc.jetstream()
        await ensure_streams(js, self.bus)
        self.ledger = await BatchLedger.open(js, declare=self.bus.declare, replicas=self.bus.replicas)
        if self.settings.admission:
            # The informers' list/watch calls get their own limiter, as controller-runtime's cache
            # builds its clients apart from the manager's writer.
            informers_kube = KubeClient(self._kube.api, limiter=rate_limiter(self.settings.kube_qps,
                                                                             self.settings.kube_burst))
            self.admission = Admission(self.nc, informers_kube, service=SERVICE, settings=self.settings.decision,
                                       namespace=self.settings.watch_namespace,
                                       wait_s=self.settings.admission_wait_s, max_deliver=self.settings.max_deliver)
            await self.admission.start()
        self._workers = [
            PullWorkers(self.nc, stream=s.STREAM_COMMANDS, config=command_consumer_config(self.bus),
                        handler=self._handle_command, concurrency=self.settings.concurrency,
                        name="commands", nak_delay_s=self.settings.nak_delay_s),
            PullWorkers(self.nc, stream=s.STREAM_STATUS, config=status_consumer_config(self.bus),
                        handler=self._handle_status, concurrency=self.settings.concurrency,
                        name="status", nak_delay_s=self.settings.nak_delay_s),
        ]
        for workers in self._workers:
            await workers.start()

    async def stop(self) -> None:
        for workers in self._workers:
            await workers.stop()
        if self.admission is not None:
            with contextlib.suppress(Exception):
                await self.admission.stop()
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()
        if self._kube is not None:
            with contextlib.suppress(Exception):
                await self._kube.close()

    async def _decode(self, msg: Msg) -> CommandBatch | None:
        batch = await decode_or_dead_letter(CommandBatch, data=msg.data, subject=msg.subject,
                                            nc=self.nc, service=SERVICE)
        if batch is None:
            MESSAGES.labels(SERVICE, "command", "dead_letter").inc()
            await msg.ack()
        return batch

    # --- status writes: level state, last value per object; no ledger needed ---------------------
    async def _handle_status(self, msg: Msg) -> None:
        arrived = asyncio.get_running_loop().time()
        WRITE_PRIORITY.set(arrived)
        batch = await self._decode(msg)
        if batch is None or not await self._admit(msg, batch, status=True):
            return
        assert self.executor is not None
        if batch.controller == s.Controller.CLUSTER.value:
            # Behind every batch that arrived up to status_defer_s later, the span it yields for:
            # ahead of them it would take their tokens after all (pods-exist 1.12x against 1.07x
            # at 100 clusters with its arrival time as priority).
            WRITE_PRIORITY.set(arrived + self.settings.status_defer_s)
            await self._yield_to_commands()
        elif batch.after:
            await self._after_commands(batch.after)
        with tracer.start_as_current_span("apply-status", context=extract_context(msg.headers),
                                          attributes={"raybus.key": str(batch.key)}):
            result = await self.executor.apply(batch)
            if await self._nak_transient(msg, batch, result):
                return
            await self._report(batch, result.results)
            await msg.ack()
            self.applied += 1

    async def _yield_to_commands(self) -> None:
        """A RayCluster status write waits (up to status_defer_s) while command batches are being
        applied: both spend KubeRay's one QPS budget, and creates are what converges a cluster.
        The status is level state on a last-value subject, so while it waits a newer one replaces
        it: a busy executor writes each cluster's status every few seconds, not at every Pod
        change (backpressure). RayJob/RayService statuses are never held: their next decision
        waits for them."""
        # Woken when the batches are done, not polled: 32 statuses polling every 50 ms were
        # 640 wake-ups a second while 1,000 clusters were created.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.status_defer_s):
                await self._workers[0].idle.wait()

    async def _after_commands(self, batch_id: str) -> None:
        """A RayJob/RayService status waits (up to status_after_s) until the command batch of its
        reconcile is done or revoked, as KubeRay's Status().Update follows the reconcile's writes.
        The two travel on different streams, so without this a status could be written first (seen
        on a real API server: a RayService promoted before its serve Service switched)."""
        assert self.ledger is not None
        deadline = time.monotonic() + self.settings.status_after_s
        while time.monotonic() < deadline:
            record, _ = await self.ledger.get(command_key(batch_id))
            if record is not None and record.state in ("done", "revoked"):
                return
            await asyncio.sleep(0.02)

    # --- command batches: through the ledger ---------------------------------------------------------
    async def _handle_command(self, msg: Msg) -> None:
        # KubeRay's order: one batch's creates, then the next's (adapters/priority_limiter.py).
        WRITE_PRIORITY.set(asyncio.get_running_loop().time())
        batch = await self._decode(msg)
        digest = digest_of(msg.data)  # what a ledger record for this batch must have been claimed for
        key = command_key(batch.reconcile_id) if batch is not None else ""
        if batch is None or not await self._admit(msg, batch, status=False,  # before any claim
                                                  known=lambda answer: self._known(key, digest, answer)):
            return
        assert self.ledger is not None
        holder = f"{self.settings.replica_id}/{uuid.uuid4().hex[:8]}"  # one per handling
        lease_s = self.settings.ack_wait_s
        claim = await self.ledger.claim(key, controller=batch.controller, digest=digest, holder=holder,
                                        lease_s=lease_s, now=time.time())
        if claim.foreign:
            await self._foreign(msg, batch)
            return
        if not claim.won:
            await self._answer_unclaimed(msg, batch, claim.record)
            return
        with tracer.start_as_current_span("apply-batch", context=extract_context(msg.headers), attributes={
                "raybus.key": str(batch.key), "raybus.reconcile_id": batch.reconcile_id}):
            result = await self._apply_under_lease(batch, key=key, digest=digest, holder=holder,
                                                   revision=claim.revision, landed=claim.landed)
            if result is None:  # the lease was lost: the replica that took it over reports
                return
            batch_result, revision = result
            # What earlier deliveries landed counts even where this one met an error (ledger.with_landed)
            results = with_landed(claim.landed, batch_result.results)
            if batch_result.transient and self._delivered(msg) < self.settings.max_deliver:
                await self.ledger.release(key, revision=revision, digest=digest, applied=results)
                await self._nak_transient(msg, batch, batch_result)
                return
            if not await self.ledger.finish(key, revision=revision, results=results, now=time.time(),
                                            digest=digest):
                return
            await self._report(batch, results)
            await msg.ack()
            MESSAGES.labels(SERVICE, "command", "failed" if batch_result.failed else "ok").inc()
            self.applied += 1

    async def _admit(self, msg: Msg, batch: CommandBatch, *, status: bool,
                     known: Known | None = None) -> bool:
        """Admission (docs/security.md): only a batch a reconciler could have produced is applied."""
        if self.admission is None:
            return True
        admitted = await self.admission.check(msg, batch, status=status, report=self._report,
                                              known=known)
        if not admitted:
            MESSAGES.labels(SERVICE, "status" if status else "command", "not_admitted").inc()
        return admitted

    async def _known(self, key: str, digest: str,
                     answer: Callable[[list[CommandResult]], list[CommandResult]]) -> bool:
        """Before admission refuses a batch: make the refusal final in the ledger
        (`BatchLedger.refuse`), so no later copy can be claimed. True only where an executor
        claimed this very body before (its record carries the body's digest), i.e. admitted it
        then: the claim path answers it (done: its recorded results, which for a released batch
        are now what landed plus the refusal; applying under a live lease: wait; lapsed: take it
        over and re-apply, idempotent as every takeover). Anything else is refused: only
        executors write the ledger, and a record of another body proves nothing about this one."""
        assert self.ledger is not None
        record = await self.ledger.refuse(key, digest=digest, now=time.time(), answer=answer)
        return record is not None and record.digest == digest and record.state != "revoked"

    async def _foreign(self, msg: Msg, batch: CommandBatch) -> None:
        """A batch whose id the ledger holds for another body: a forged copy of an admitted id.
        Never applied, never answered on the bus (the real batch's Outcome stands)."""
        log.warning("batch reuses the id of another batch in the command ledger; not applied", extra={
            "reconcile_id": batch.reconcile_id, "controller": batch.controller, "key": str(batch.key),
            "subject": msg.subject})
        MESSAGES.labels(SERVICE, "command", "foreign").inc()
        await dead_letter(self.nc, service=SERVICE, subject=msg.subject, data=redacted(batch),
                          error="the command ledger holds another batch under this id")
        await msg.ack()

    async def _answer_unclaimed(self, msg: Msg, batch: CommandBatch, record: BatchRecord | None) -> None:
        """A batch we may not apply: already done (redelivered/duplicated), revoked by its
        reconciler, or being applied by a live replica right now."""
        if record is not None and record.state == "done":
            await self._report(batch, record.results)
            await msg.ack()
            self.answered_from_ledger += 1
            return
        if record is not None and record.state == "revoked":
            log.info("batch revoked by its reconciler; not applied", extra={
                "reconcile_id": batch.reconcile_id, "key": str(batch.key)})
            await self._report(batch, [
                CommandResult(op=c.op, target=describe(target_of(c, batch)), ok=False, expired=True,
                              message="revoked by the reconciler before any executor applied it")
                for c in batch.commands])
            await msg.ack()
            MESSAGES.labels(SERVICE, "command", "expired").inc()
            return
        # Held under a live lease by another replica (or a handler of ours): it reports and acks.
        wait = max(0.2, (record.lease_until - time.time()) if record is not None else 1.0)
        await msg.nak(delay=min(wait + 0.1, self.settings.ack_wait_s))

    async def _apply_under_lease(self, batch: CommandBatch, *, key: str, digest: str, holder: str, revision: int,
                                 landed: tuple[CommandResult, ...]) -> tuple[BatchResult, int] | None:
        """Apply while renewing the claim; None if another replica took the claim over."""
        assert self.executor is not None and self.ledger is not None
        task = asyncio.ensure_future(self.executor.apply(batch))
        lease_s = self.settings.ack_wait_s
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=lease_s / 3)
                if done:
                    return task.result(), revision
                renewed = await self.ledger.renew(key, holder=holder, revision=revision, lease_s=lease_s,
                                                  now=time.time(), digest=digest, landed=landed)
                if renewed is None:
                    log.warning("lost the claim on a batch mid-apply; stopping", extra={
                        "reconcile_id": batch.reconcile_id})
                    await cancel_and_wait([task])
                    return None
                revision = renewed
        except asyncio.CancelledError:
            await cancel_and_wait([task])
            raise

    @staticmethod
    def _delivered(msg: Msg) -> int:
        return msg.metadata.num_delivered if msg.metadata else 1

    async def _nak_transient(self, msg: Msg, batch: CommandBatch, result: BatchResult) -> bool:
        delivered = self._delivered(msg)
        if not result.transient or delivered >= self.settings.max_deliver:
            return False
        delay = min(self.settings.nak_delay_s * 2 ** (delivered - 1), 30.0)
        log.info("transient API error, batch redelivered later", extra={
            "reconcile_id": batch.reconcile_id, "delivered": delivered, "delay_s": delay})
        MESSAGES.labels(SERVICE, "command", "nak").inc()
        await msg.nak(delay=delay)
        return True

    async def _report(self, batch: CommandBatch, results: list[CommandResult]) -> None:
        await publish_outcome(self.nc.jetstream(), Outcome(
            key=batch.key, kind=batch.kind, uid=batch.uid, resource_version=batch.resource_version,
            controller=batch.controller, reconcile_id=batch.reconcile_id, results=results,
            finished_at=datetime.now(UTC)))


def create_app(settings: CommonSettings) -> CommandExecutorService:
    if not isinstance(settings, ExecutorSettings):
        settings = ExecutorSettings(**settings.model_dump())
    return CommandExecutorService(settings)
