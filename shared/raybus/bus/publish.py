"""Typed publishers: every message leaves through here with trace headers and, where replays
are possible, a Nats-Msg-Id so JetStream stores it once."""

from __future__ import annotations

import hashlib
import re

from nats.js import JetStreamContext
from nats.js.api import PubAck
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from raybus.bus import subjects as s
from raybus.bus.codec import encode, publish_headers
from raybus.bus.envelopes import (
    CommandBatch,
    DashboardCommandMessage,
    DashboardInterestMessage,
    DashboardObservation,
    DashboardResultMessage,
    ObjectEvent,
    ObjectKey,
    Outcome,
    Trigger,
)
from raybus.decisions.dashboard_contract import DashboardInterest
from raybus.observability.tracing import send_span


async def _send(js: JetStreamContext, subject: str, data: bytes, *, msg_id: str | None = None) -> PubAck:
    """One publish in its PRODUCER span; the headers carry that span's context."""
    with send_span(subject, msg_id=msg_id, size=len(data)):
        return await js.publish(subject, data, headers=publish_headers(msg_id=msg_id))


# Trigger.cause_kind of the dashboard-poller's triggers: objects_seq is then a sequence of
# RAYBUS_DASHBOARD (an observation changed) or of RAYBUS_DASHBOARD_RESULTS (a command ended).
DASHBOARD_KIND = "dashboard"
DASHBOARD_RESULT_KIND = "dashresult"


async def publish_object(js: JetStreamContext, event: ObjectEvent, *,
                         msg_id: str | None = None) -> int:
    """Returns the RAYBUS_OBJECTS sequence, which triggers carry as their freshness watermark.

    msg_id (the watcher uses kind/ns/name/resourceVersion) lets JetStream store a version seen by
    two watcher replicas once; a duplicate's ack carries the original's sequence."""
    ack = await _send(js, s.object_subject(event.kind, event.key.namespace, event.key.name, event.scope),
                           encode(event), msg_id=msg_id)
    return int(ack.seq)


async def publish_trigger(js: JetStreamContext, *, controller: s.Controller, key: ObjectKey,
                          kind: str, cause: str = "", objects_seq: int = 0, cause_kind: str = "",
                          cause_scope: str = "", partitions: int = s.DEFAULT_PARTITIONS) -> None:
    trig = Trigger(key=key, kind=kind, controller=controller.value, cause=cause,
                   objects_seq=objects_seq, cause_kind=cause_kind, cause_scope=cause_scope)
    await _send(js, s.trigger_subject(controller, namespace=key.namespace, name=key.name,
                                       partitions=partitions),
                     encode(trig))


async def publish_commands(js: JetStreamContext, batch: CommandBatch) -> None:
    await _send(js, s.command_subject(batch.controller, batch.key.namespace, batch.key.name),
                     encode(batch), msg_id=batch.reconcile_id)


async def publish_status(js: JetStreamContext, batch: CommandBatch) -> None:
    """A batch holding one UpdateStatus, on the object's last-value status subject."""
    await _send(js, s.status_subject(batch.controller, batch.key.namespace, batch.key.name),
                     encode(batch), msg_id=batch.reconcile_id)


async def publish_outcome(js: JetStreamContext, outcome: Outcome) -> None:
    await _send(js, s.outcome_subject(outcome.controller, outcome.key.namespace, outcome.key.name,
                                       status=outcome.is_status),
                     encode(outcome), msg_id=f"out-{outcome.reconcile_id}")


# --- dashboard gateway ----------------------------------------------------------------------------
async def publish_dashboard_observation(js: JetStreamContext, obs: DashboardObservation) -> int:
    """Returns the RAYBUS_DASHBOARD sequence (triggers carry it with cause_kind "dashboard")."""
    ack = await _send(js, s.dashboard_subject(obs.key.namespace, obs.key.name), encode(obs))
    return int(ack.seq)


async def publish_dashboard_interest(js: JetStreamContext, msg: DashboardInterestMessage) -> int:
    ack = await _send(js, s.dashboard_interest_subject(msg.controller, msg.key.namespace, msg.key.name),
                           encode(msg))
    return int(ack.seq)


async def publish_dashboard_command(js: JetStreamContext, msg: DashboardCommandMessage) -> int:
    """Nats-Msg-Id = command_id: a command re-published within the duplicate window (120 s) is
    stored once. Returns the RAYBUS_DASHBOARD_COMMANDS sequence."""
    ack = await _send(js, s.dashboard_command_subject(msg.controller, msg.key.namespace, msg.key.name),
                           encode(msg), msg_id=msg.command_id)
    return int(ack.seq)


async def publish_dashboard_result(js: JetStreamContext, msg: DashboardResultMessage) -> int:
    """One result per command_id: a poller that re-runs a command after a crash publishes it once."""
    ack = await _send(js, s.dashboard_result_subject(msg.controller, msg.key.namespace, msg.key.name),
                           encode(msg), msg_id=f"dres-{msg.result.command_id}")
    return int(ack.seq)


_KV_KEY = re.compile(r"[-_=a-zA-Z0-9]+")


def dashboard_ledger_key(command_id: str) -> str:
    """The command ledger key (bus/ledger.py) of a dashboard command. A reconciler that gives up
    on a command revokes it with `BatchLedger.revoke(dashboard_ledger_key(command_id), ...)`; the
    poller then never executes it and answers it `failed` with `expired=True`."""
    if _KV_KEY.fullmatch(command_id):
        return f"dash.{command_id}"
    return "dash." + hashlib.blake2b(command_id.encode(), digest_size=16).hexdigest()


def dashboard_command_id(owner_uid: str, op: str, *parts: str) -> str:
    """A deterministic command id (no randomness in names: a re-decision yields the same id, and
    JetStream's duplicate window stores it once). Put in `parts` whatever makes a deliberate
    repeat different: the job id, the serve-config hash, the head pod's uid (a new head needs its
    config again)."""
    digest = hashlib.blake2b("/".join((owner_uid, op, *parts)).encode(), digest_size=10).hexdigest()
    return f"{op.replace('_', '-')}-{digest}"


class DashboardInterestPublisher:
    """Publishes an owner's DashboardInterest only when it differs from the last one published.

    The last value per owner lives on RAYBUS_DASHBOARD_INTEREST, so after a restart the first
    publish per owner reads it back once (one get_last_msg) instead of republishing. One instance
    per reconciler process; an owner is reconciled by one worker at a time, so no lock is needed.
    Withdraw an interest (owner deleted, nothing to observe) by publishing `DashboardInterest()`.
    """

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._last: dict[str, list[DashboardInterest] | None] = {}

    async def _stored(self, subject: str) -> list[DashboardInterest] | None:
        try:
            raw = await self._js.get_last_msg(s.STREAM_DASHBOARD_INTEREST, subject)
        except NotFoundError:
            return None
        try:
            return DashboardInterestMessage.model_validate_json(raw.data or b"").all()
        except ValidationError:
            return None

    async def publish(self, *, controller: s.Controller, key: ObjectKey, kind: str,
                      interest: DashboardInterest, uid: str | None = None,
                      more: list[DashboardInterest] | None = None) -> bool:
        """True if published, False if the stream already holds this interest (+ `more`)."""
        subject = s.dashboard_interest_subject(controller, key.namespace, key.name)
        wanted = [interest, *(more or [])]
        if subject not in self._last:
            self._last[subject] = await self._stored(subject)
        if self._last[subject] == wanted:
            return False
        await publish_dashboard_interest(self._js, DashboardInterestMessage(
            key=key, kind=kind, uid=uid, controller=controller.value, interest=interest,
            more=list(more or [])))
        self._last[subject] = wanted
        return True

    def forget(self, controller: s.Controller, key: ObjectKey) -> None:
        """Drop the memo of an owner that is gone (after publishing its empty interest)."""
        self._last.pop(s.dashboard_interest_subject(controller, key.namespace, key.name), None)
