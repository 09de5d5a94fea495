"""The command executor: the only raybus component with Kubernetes write access.

Consumes CommandBatch messages from RAYBUS_COMMANDS (a work queue) with FastStream, through the
shared durable pull consumer `command-executor` (streams.command_consumer_config): any number of
replicas share it, each batch goes to one of them.

Acknowledgement is manual (AckPolicy.MANUAL), because FastStream's JetStream default
(REJECT_ON_ERROR) would `term` a batch whose handler raised, i.e. drop a reconcile's commands:
- decoded and applied (success or permanent failure) -> publish Outcome (+ Trigger on failure) -> ack;
- a transient API error (429/5xx/connection) -> nak with a growing delay: the whole batch is
  redelivered, which is safe because every command is idempotent; on the last allowed delivery
  the failure is reported (Outcome + Trigger) and acked instead, so the reconciler decides again;
- undecodable -> dead-letter subject (raybus.dlq.command-executor), counted, then ack;
- an unexpected exception in the handler -> nak with delay, never a silent drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

from faststream import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsMessage, PullSub
from nats.aio.client import Client as NATS
from opentelemetry import trace

from command_executor.executor import BatchResult, Executor
from raybus.adapters.kube import KubeClient, new_api_client, rate_limiter
from raybus.bus import subjects as s
from raybus.bus.codec import decode_or_dead_letter
from raybus.bus.envelopes import CommandBatch, Outcome
from raybus.bus.publish import publish_outcome, publish_trigger
from raybus.bus.streams import (
    BusSettings,
    command_consumer_config,
    ensure_streams,
    status_consumer_config,
)
from raybus.observability.metrics import MESSAGES
from raybus.observability.tracing import extract_context
from raybus.runtime.service import CommonSettings

log = logging.getLogger(__name__)
tracer = trace.get_tracer("raybus.command-executor")
SERVICE = "command-executor"


class ExecutorSettings(CommonSettings):
    service: str = SERVICE
    kube_qps: float = 100.0  # KubeRay's --kube-api-qps default
    kube_burst: int = 200  # KubeRay's --kube-api-burst default
    # Batches applied at once (FastStream max_workers; without it a pull subscriber handles one
    # message at a time). Batches for one object still run one after another (Executor's lock).
    concurrency: int = 32
    ack_wait_s: float = 30.0
    max_deliver: int = 20
    nak_delay_s: float = 1.0  # first redelivery delay after a transient error; doubles, capped
    status_retries: int = 5


def _idle_fetch_timeout(record: logging.LogRecord) -> bool:
    """Drop FastStream's "raised an exception, retrying" for an idle pull fetch.

    nats-py's fetch sometimes ends an empty wait with a bare asyncio TimeoutError instead of
    nats.errors.TimeoutError (nats-io/nats.py#709); FastStream only suppresses the latter, so
    its supervisor restarts the fetch task (which is right) and logs an ERROR (which is not)."""
    exc = record.exc_info[1] if record.exc_info else None
    return not (type(exc) is TimeoutError and "retrying" in record.getMessage())


class CommandExecutorService:
    def __init__(self, settings: ExecutorSettings, *, kube: KubeClient | None = None) -> None:
        self.settings = settings
        self._kube = kube
        self.executor: Executor | None = None
        self.bus = BusSettings(partitions=settings.partitions, ack_wait_s=settings.ack_wait_s,
                               max_deliver=settings.max_deliver)
        # FastStream logs every message at INFO with its own handler; per-batch logging is ours
        # (with reasons), so its logs go through the service's JSON handler, below INFO. Its task
        # supervisor also logs each stopped fetch/worker task at INFO: only warnings are kept.
        fs_logger = logging.getLogger("faststream.command_executor")
        fs_logger.setLevel(logging.WARNING)
        fs_logger.addFilter(_idle_fetch_timeout)
        self.broker = NatsBroker(settings.nats_url, max_reconnect_attempts=-1,
                                 name=f"{SERVICE}-{settings.replica_id}", log_level=logging.DEBUG,
                                 logger=fs_logger)
        self.applied = 0  # batches finished (observable for tests / bench)
        # Commands, and status writes on their own last-value stream (a newer status replaces a
        # queued one): same handler, same concurrency.
        for subject, stream, config in (
                (s.commands_filter(), s.STREAM_COMMANDS, command_consumer_config(self.bus)),
                (s.status_filter(), s.STREAM_STATUS, status_consumer_config(self.bus))):
            self.broker.subscriber(
                subject,
                stream=JStream(name=stream, declare=False),
                durable=config.durable_name,
                config=config,
                pull_sub=PullSub(batch_size=settings.concurrency, timeout=1.0),
                max_workers=settings.concurrency,
                ack_policy=AckPolicy.MANUAL,
            )(self._handle)

    @property
    def nc(self) -> NATS:
        return self.broker.connection

    async def start(self) -> None:
        if self._kube is None:
            api = await new_api_client(self.settings.kubeconfig)
            self._kube = KubeClient(api, limiter=rate_limiter(self.settings.kube_qps,
                                                              self.settings.kube_burst))
        events_kube = KubeClient(self._kube.api, limiter=rate_limiter(self.settings.kube_qps,
                                                                      self.settings.kube_burst))
        self.executor = Executor(self._kube, status_retries=self.settings.status_retries,
                                 host=self.settings.replica_id or None, events_kube=events_kube)
        await self.broker.connect()
        await ensure_streams(self.nc.jetstream(), self.bus)  # JStream(declare=False): we own streams
        await self.broker.start()

    async def stop(self) -> None:
        await self.broker.stop()
        if self._kube is not None:
            with contextlib.suppress(Exception):
                await self._kube.close()

    async def _handle(self, msg: NatsMessage) -> None:
        raw = msg.raw_message
        try:
            batch = await decode_or_dead_letter(CommandBatch, data=raw.data, subject=raw.subject,
                                                nc=self.nc, service=SERVICE)
            if batch is None:
                MESSAGES.labels(SERVICE, "command", "dead_letter").inc()
                await msg.ack()
                return
            await self._apply_and_ack(batch, msg)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("command batch handler failed; redelivering", extra={"subject": raw.subject})
            await msg.nack(delay=self.settings.nak_delay_s)

    async def _apply_and_ack(self, batch: CommandBatch, msg: NatsMessage) -> None:
        assert self.executor is not None
        raw = msg.raw_message
        delivered = raw.metadata.num_delivered if raw.metadata else 1
        # Continue the reconcile's trace across the NATS hop; Outcome/Trigger publishes carry it on.
        with tracer.start_as_current_span("apply-batch", context=extract_context(raw.headers), attributes={
                "raybus.key": str(batch.key), "raybus.reconcile_id": batch.reconcile_id}):
            result = await self._apply_with_heartbeat(batch, msg)
            if result.transient and delivered < self.settings.max_deliver:
                delay = min(self.settings.nak_delay_s * 2 ** (delivered - 1), 30.0)
                log.info("transient API error, batch redelivered later", extra={
                    "reconcile_id": batch.reconcile_id, "delivered": delivered, "delay_s": delay})
                MESSAGES.labels(SERVICE, "command", "nak").inc()
                await msg.nack(delay=delay)
                return
            await self._report(batch, result)
            await msg.ack()
            MESSAGES.labels(SERVICE, "command", "failed" if result.failed else "ok").inc()
            self.applied += 1

    async def _apply_with_heartbeat(self, batch: CommandBatch, msg: NatsMessage) -> BatchResult:
        """Long batches (rate limited) tell JetStream they are still in progress, so ack_wait
        does not hand the same batch to another replica mid-apply."""
        assert self.executor is not None
        task = asyncio.ensure_future(self.executor.apply(batch))
        while True:
            done, _ = await asyncio.wait({task}, timeout=self.settings.ack_wait_s / 3)
            if done:
                return task.result()
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _report(self, batch: CommandBatch, result: BatchResult) -> None:
        js = self.nc.jetstream()
        await publish_outcome(js, Outcome(
            key=batch.key, kind=batch.kind, uid=batch.uid, resource_version=batch.resource_version,
            controller=batch.controller, reconcile_id=batch.reconcile_id, results=result.results,
            finished_at=datetime.now(UTC)))
        if result.failed:
            first = next(r for r in result.results if not r.ok)
            # The reconciler looks again with the failure visible in the Outcome (KubeRay
            # requeues a reconcile that returned an error the same way).
            await publish_trigger(js, controller=s.Controller(batch.controller), key=batch.key,
                                  kind=batch.kind, partitions=self.settings.partitions,
                                  cause=f"command failed: {first.op} {first.target} "
                                        f"{first.error_reason or ''} {first.message}"[:300])


def create_app(settings: CommonSettings) -> CommandExecutorService:
    if not isinstance(settings, ExecutorSettings):
        settings = ExecutorSettings(**settings.model_dump())
    return CommandExecutorService(settings)
