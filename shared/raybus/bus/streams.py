"""JetStream streams, consumers and KV buckets, declared in code and idempotently.

Design (docs/architecture.md "Bus contract"):
- RAYBUS_OBJECTS keeps only the last message per subject, so it *is* the current state of every
  watched object: a replica that starts reads it (deliver last-per-subject) as its full snapshot.
- RAYBUS_TRIGGERS is a work queue holding at most one pending trigger per object subject, so a
  burst of events for one object collapses server-side into one pending "look again".
- RAYBUS_COMMANDS is a work queue with a duplicate window (Nats-Msg-Id) so a republished batch is
  stored once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError
from nats.js.kv import KeyValue

from raybus.bus import subjects as s

log = logging.getLogger(__name__)

DAY = 24 * 3600.0
COMMAND_MAX_AGE_S = 3600.0
OUTCOMES_PER_OBJECT = 16


@dataclass(frozen=True)
class BusSettings:
    partitions: int = s.DEFAULT_PARTITIONS
    ack_wait_s: float = 30.0  # trigger consumers: reconcilers ack after the covering run
    # Executor consumers (commands, status, dashboard commands): a handler in progress sends
    # in-progress acks (runtime/pull.py), so ack_wait only bounds how long a dead executor's
    # batch waits before another replica gets it (failover in seconds, not 30 s).
    executor_ack_wait_s: float = 5.0
    max_deliver: int = 20
    lease_ttl_s: float = 10.0
    duplicate_window_s: float = 120.0
    # How many NATS servers keep each stream and KV bucket (CommonSettings.stream_replicas,
    # RAYBUS_STREAM_REPLICAS): a property of the NATS deployment, the same for every process.
    replicas: int = 1
    # False on a secured bus: only `bus-admin` may create or change streams and buckets
    # (bus/permissions.py), so a service waits for them instead of declaring them.
    declare: bool = True


async def wait_for_stream(js: JetStreamContext, name: str) -> None:
    """Wait until `name` exists, saying so every few seconds (a service started before the bus was
    declared must tell its operator what it waits for, not hang silently)."""
    started = last_said = time.monotonic()
    while True:
        try:
            await js.stream_info(name)
            return
        except NotFoundError:
            pass
        if time.monotonic() - last_said >= 5.0:
            last_said = time.monotonic()
            log.warning("waiting for the bus to be declared (raybus bus-init)",
                        extra={"stream": name, "waited_s": round(last_said - started)})
        await asyncio.sleep(0.5)


def _stream(settings: BusSettings, **kwargs: Any) -> StreamConfig:
    return StreamConfig(storage=StorageType.FILE, num_replicas=settings.replicas, **kwargs)


def stream_configs(settings: BusSettings) -> list[StreamConfig]:
    return [
        _stream(settings, name=s.STREAM_OBJECTS, subjects=[s.objects_filter()],
                     retention=RetentionPolicy.LIMITS, max_msgs_per_subject=1,
                     discard=DiscardPolicy.OLD),
        *(_stream(settings, name=s.trigger_stream(c), subjects=[s.triggers_filter(c)],
                  retention=RetentionPolicy.WORK_QUEUE, max_msgs_per_subject=1, discard=DiscardPolicy.OLD)
          for c in s.Controller),
        # max_age below the command ledger's TTL (bus/ledger.py): a batch never outlives the
        # record that says it was revoked.
        _stream(settings, name=s.STREAM_COMMANDS, subjects=[s.commands_filter()],
                retention=RetentionPolicy.WORK_QUEUE, duplicate_window=settings.duplicate_window_s,
                max_age=COMMAND_MAX_AGE_S),
        # A status write is level state: a newer one for the same object replaces an older one
        # still queued (e.g. behind KubeRay's QPS limit), so only the latest is ever applied.
        _stream(settings, name=s.STREAM_STATUS, subjects=[s.status_filter()],
                retention=RetentionPolicy.WORK_QUEUE, max_msgs_per_subject=1,
                discard=DiscardPolicy.OLD, duplicate_window=settings.duplicate_window_s),
        # A few per object, not one: a reconciler that falls behind must still see the Outcome
        # of a batch followed quickly by its status write's (or a next batch's). A restarted
        # one reads the last per object, and asks the command ledger for older batches.
        _stream(settings, name=s.STREAM_OUTCOMES, subjects=[s.outcomes_filter()],
                retention=RetentionPolicy.LIMITS, max_msgs_per_subject=OUTCOMES_PER_OBJECT),
        _stream(settings, name=s.STREAM_DASHBOARD, subjects=[s.dashboard_filter()],
                     retention=RetentionPolicy.LIMITS, max_msgs_per_subject=1),
        _stream(settings, name=s.STREAM_DASHBOARD_INTEREST, subjects=[s.dashboard_interest_filter()],
                retention=RetentionPolicy.LIMITS, max_msgs_per_subject=1),
        # Through the command ledger too (key = command_id): same max_age reasoning as commands.
        _stream(settings, name=s.STREAM_DASHBOARD_COMMANDS, subjects=[s.dashboard_commands_filter()],
                retention=RetentionPolicy.WORK_QUEUE, duplicate_window=settings.duplicate_window_s,
                max_age=COMMAND_MAX_AGE_S),
        _stream(settings, name=s.STREAM_DASHBOARD_RESULTS, subjects=[s.dashboard_results_filter()],
                retention=RetentionPolicy.LIMITS, max_msgs_per_subject=1),
        _stream(settings, name=s.STREAM_DEAD_LETTERS, subjects=[s.dead_letter_filter()],
                     retention=RetentionPolicy.LIMITS, max_age=7 * DAY),
    ]


async def ensure_streams(js: JetStreamContext, settings: BusSettings | None = None) -> None:
    """Create or update every stream; safe to call from every process on every start."""
    settings = settings or BusSettings()
    if settings.declare:
        with contextlib.suppress(NotFoundError):
            # One trigger stream for all controllers, as an older bus had: its subjects overlap the
            # per-controller streams. What it held are "look again" hints; every partition's new
            # owner resyncs all its objects anyway.
            await js.delete_stream(s.STREAM_TRIGGERS_PREFIX)
    for config in stream_configs(settings):
        if not settings.declare:
            await wait_for_stream(js, config.name or "")
            continue
        try:
            await js.stream_info(config.name or "")
        except NotFoundError:
            with contextlib.suppress(BadRequestError):  # another process created it meanwhile
                await js.add_stream(config)
            continue
        await js.update_stream(config)


async def ensure_leases(js: JetStreamContext, settings: BusSettings | None = None) -> KeyValue:
    settings = settings or BusSettings()
    if not settings.declare:
        await wait_for_stream(js, f"KV_{s.KV_LEASES}")
        return await js.key_value(s.KV_LEASES)
    try:
        return await js.key_value(s.KV_LEASES)
    except Exception:  # noqa: BLE001 - nats-py raises BucketNotFoundError or NotFoundError
        return await js.create_key_value(
            KeyValueConfig(bucket=s.KV_LEASES, ttl=settings.lease_ttl_s, history=1,
                           storage=StorageType.FILE, replicas=settings.replicas)
        )


def trigger_consumer_config(controller: s.Controller, partition: int,
                            settings: BusSettings) -> ConsumerConfig:
    """One durable pull consumer per (controller, partition); only the lease holder pulls it."""
    return ConsumerConfig(
        durable_name=s.trigger_consumer_name(controller, partition),
        filter_subject=s.trigger_partition_filter(controller, partition),
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.ack_wait_s,
        max_deliver=settings.max_deliver,
        max_ack_pending=10_000,
    )


def status_consumer_config(settings: BusSettings) -> ConsumerConfig:
    """Executors share one durable consumer for status writes, as for commands."""
    return ConsumerConfig(
        durable_name=s.STATUS_CONSUMER,
        filter_subject=s.status_filter(),
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.executor_ack_wait_s,
        max_deliver=settings.max_deliver,
        max_ack_pending=1_000,
    )


def command_consumer_config(settings: BusSettings) -> ConsumerConfig:
    """Executors share one durable consumer: commands are idempotent, any replica may apply."""
    return ConsumerConfig(
        durable_name=s.COMMAND_CONSUMER,
        filter_subject=s.commands_filter(),
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.executor_ack_wait_s,
        max_deliver=settings.max_deliver,
        max_ack_pending=1_000,
    )


def dashboard_command_consumer_config(settings: BusSettings) -> ConsumerConfig:
    """The dashboard-poller's one durable consumer of dashboard commands. Only the replica holding
    the poller lease pulls it; ack_wait stays short (a crashed poller's commands come back fast)
    because a slow write (the first Serve PUT takes up to 9 s) sends in-progress acks."""
    return ConsumerConfig(
        durable_name=s.DASHBOARD_COMMAND_CONSUMER,
        filter_subject=s.dashboard_commands_filter(),
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.executor_ack_wait_s,
        max_deliver=settings.max_deliver,
        max_ack_pending=1_000,
    )
