"""Typed publishers: every message leaves through here with trace headers and, where replays
are possible, a Nats-Msg-Id so JetStream stores it once."""

from __future__ import annotations

from nats.js import JetStreamContext

from raybus.bus import subjects as s
from raybus.bus.codec import encode, publish_headers
from raybus.bus.envelopes import CommandBatch, ObjectEvent, ObjectKey, Outcome, Trigger


async def publish_object(js: JetStreamContext, event: ObjectEvent, *,
                         msg_id: str | None = None) -> int:
    """Returns the RAYBUS_OBJECTS sequence, which triggers carry as their freshness watermark.

    msg_id (the watcher uses kind/ns/name/resourceVersion) lets JetStream store a version seen by
    two watcher replicas once; a duplicate's ack carries the original's sequence."""
    ack = await js.publish(s.object_subject(event.kind, event.key.namespace, event.key.name),
                           encode(event), headers=publish_headers(msg_id=msg_id))
    return int(ack.seq)


async def publish_trigger(js: JetStreamContext, *, controller: s.Controller, key: ObjectKey,
                          kind: str, cause: str = "", objects_seq: int = 0, cause_kind: str = "",
                          partitions: int = s.DEFAULT_PARTITIONS) -> None:
    trig = Trigger(key=key, kind=kind, controller=controller.value, cause=cause,
                   objects_seq=objects_seq, cause_kind=cause_kind)
    await js.publish(s.trigger_subject(controller, namespace=key.namespace, name=key.name,
                                       partitions=partitions),
                     encode(trig), headers=publish_headers())


async def publish_commands(js: JetStreamContext, batch: CommandBatch) -> None:
    await js.publish(s.command_subject(batch.controller, batch.key.namespace, batch.key.name),
                     encode(batch), headers=publish_headers(msg_id=batch.reconcile_id))


async def publish_status(js: JetStreamContext, batch: CommandBatch) -> None:
    """A batch holding one UpdateStatus, on the object's last-value status subject."""
    await js.publish(s.status_subject(batch.controller, batch.key.namespace, batch.key.name),
                     encode(batch), headers=publish_headers(msg_id=batch.reconcile_id))


async def publish_outcome(js: JetStreamContext, outcome: Outcome) -> None:
    await js.publish(s.outcome_subject(outcome.controller, outcome.key.namespace, outcome.key.name),
                     encode(outcome), headers=publish_headers(msg_id=f"out-{outcome.reconcile_id}"))
