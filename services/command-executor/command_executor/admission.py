"""Executor admission, the I/O half: the live Ray objects from a watch of RAYBUS_OBJECTS, and what
happens to a batch the pure policy (`raybus.decisions.admission`) does not admit.

- The view is an ObjectCache of RayClusters, RayJobs and RayServices (last value per subject, then
  live), plus the uids it saw deleted: admission reads memory only and spends none of the
  Kubernetes QPS budget (no GET per batch).
- A batch whose Ray object (or the owned RayCluster it names) is not in the view yet is not
  refused at once: the executor's watch may trail the reconciler's (a RayCluster a RayJob batch
  just created). It looks again for up to `hold_s` in process, then naks with a delay, until the
  batch is `wait_s` old (its stream timestamp); only then is it refused. Not claimed meanwhile.
- A refused batch is never claimed nor applied: its bytes go to `raybus.dlq.command-executor`
  (Secret values redacted) with the reason in headers, it is counted in
  `raybus_commands_refused_total{controller,reason}`, logged without its body, answered with a
  failed Outcome (so a reconciler whose batch was refused decides again instead of waiting for
  it), and acked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from prometheus_client import Counter

from command_executor.mapping import describe, target_of
from raybus.bus import headers as h
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, CommandResult, ObjectEvent
from raybus.decisions import admission as policy
from raybus.runtime.cache import ObjectCache

log = logging.getLogger(__name__)
REFUSED = Counter("raybus_commands_refused_total",
                  "Command batches the executor's admission refused (never applied)", ["controller", "reason"])
SUBJECT_MISMATCH = "subject_mismatch"
DLQ_REASON = "Raybus-Dlq-Reason"  # the refusal reason token (h.DLQ_ERROR carries the detail)
_KINDS = {"RayCluster": s.Kind.RAYCLUSTER, "RayJob": s.Kind.RAYJOB, "RayService": s.Kind.RAYSERVICE}
GONE_KEPT = 65536  # deleted uids remembered (a batch naming one is refused without waiting)

Report = Callable[[CommandBatch, list[CommandResult]], Awaitable[None]]
Known = Callable[[Callable[[list[CommandResult]], list[CommandResult]]], Awaitable[bool]]


class RayObjects(ObjectCache):
    """The executor's watch of the Ray objects: an ObjectCache that also remembers deleted uids."""

    def __init__(self, nc: NATS) -> None:
        super().__init__(nc, kinds=list(_KINDS.values()))
        self._gone: OrderedDict[str, None] = OrderedDict()

    def apply(self, event: ObjectEvent) -> None:
        if event.type == "DELETED":
            uid = event.uid or str((event.object.get("metadata") or {}).get("uid") or "")
            if uid:
                self._gone[uid] = None
                while len(self._gone) > GONE_KEPT:
                    self._gone.popitem(last=False)
        super().apply(event)

    # raybus.decisions.admission.LiveView
    def lookup(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        token = _KINDS.get(kind)
        return self.get(token, namespace, name) if token is not None else None

    def gone(self, uid: str) -> bool:
        return uid in self._gone


class _View:
    def __init__(self, objects: RayObjects) -> None:
        self._objects = objects

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._objects.lookup(kind, namespace, name)

    def gone(self, uid: str) -> bool:
        return self._objects.gone(uid)


def redacted(batch: CommandBatch) -> bytes:
    """The batch for the DLQ with Secret data/stringData values removed (keys kept)."""
    body = json.loads(batch.model_dump_json())
    for cmd in body.get("commands") or []:
        obj = cmd.get("object") if isinstance(cmd, dict) else None
        if isinstance(obj, dict) and obj.get("kind") == "Secret":
            for field in ("data", "stringData"):
                if isinstance(obj.get(field), dict):
                    obj[field] = {key: "<redacted>" for key in obj[field]}
    return json.dumps(body).encode()


def summary(batch: CommandBatch) -> str:
    """What a refused batch asked for, without bodies: op/kind counts."""
    tally = Tally(f"{c.op} {target_of(c, batch).kind}" for c in batch.commands)
    return ", ".join(f"{n}x {what}" for what, n in sorted(tally.items()))[:500]


def refusal_results(batch: CommandBatch, verdict: policy.Verdict,
                    applied: list[CommandResult]) -> list[CommandResult]:
    """403 for every command, except those `applied` says landed (a released batch's first
    commands, kept by the ledger): their own results stand."""
    landed = {(r.op, r.target): r for r in applied if r.ok}
    message = f"refused by the command-executor's admission ({verdict.reason}): {verdict.detail}"[:1000]
    out: list[CommandResult] = []
    for cmd in batch.commands:
        target = describe(target_of(cmd, batch))
        out.append(landed.get((cmd.op, target))
                   or CommandResult(op=cmd.op, target=target, ok=False, code=403, message=message))
    return out


class Admission:
    def __init__(self, nc: NATS, *, service: str, wait_s: float = 30.0, hold_s: float = 1.0,
                 retry_delay_s: float = 2.0, max_deliver: int = 20) -> None:
        self._nc = nc
        self._service = service
        self.objects = RayObjects(nc)
        self._view = _View(self.objects)
        self.wait_s, self.hold_s, self.retry_delay_s = wait_s, hold_s, retry_delay_s
        self.max_deliver = max_deliver
        self.refused = 0  # observable for tests

    async def start(self) -> None:
        await self.objects.start()  # returns once the snapshot is loaded: no batch judged before

    async def stop(self) -> None:
        await self.objects.stop()

    def verdict(self, batch: CommandBatch, *, subject: str, status: bool) -> policy.Verdict:
        make = s.status_subject if status else s.command_subject
        try:
            expected = make(batch.controller, batch.key.namespace, batch.key.name)
        except ValueError:
            expected = ""
        if subject != expected:
            # The subject is what NATS permissions are granted on: a body naming another object
            # than its subject is forged.
            return policy.Verdict(admitted=False, reason=SUBJECT_MISMATCH,
                                  detail=f"subject {subject} does not match the batch's {batch.controller} "
                                  f"{batch.key}")
        return policy.admit(controller=batch.controller, kind=batch.kind, namespace=batch.key.namespace,
                            name=batch.key.name, uid=batch.uid, commands=batch.commands, view=self._view)

    async def check(self, msg: Msg, batch: CommandBatch, *, status: bool, report: Report,
                    known: Known | None = None) -> bool:
        """True: apply it. False: the message is settled here (nak to look again later, or refused).

        `known` (command batches) is asked right before a refusal, with the refusal's results for
        what the ledger says landed: True when the command ledger already holds the batch
        (claimed earlier, so admitted then: this is a redelivery, e.g. its Outcome publish failed
        in a NATS node restart, or a transient API error released it), and the caller must
        answer it the ledger's way instead. A refusal answers "not applied"; for a batch whose creates landed
        that made the reconciler drop their expectations and create the Pods again
        (tests/integration/boundary/test_admission_ledger.py)."""
        verdict = self.verdict(batch, subject=msg.subject, status=status)
        started = time.monotonic()
        held = verdict.retry
        while verdict.retry and time.monotonic() < started + self.hold_s:
            await asyncio.sleep(0.05)  # the watch delivers in the background; look again
            verdict = self.verdict(batch, subject=msg.subject, status=status)
        if verdict.admitted:
            if held:
                log.info("batch admitted once the executor's watch saw its object", extra={
                    "reconcile_id": batch.reconcile_id, "key": str(batch.key),
                    "waited_s": round(time.monotonic() - started, 3)})
            return True
        # JetStream stops redelivering after max_deliver: decide on the last delivery at the latest.
        delivered = msg.metadata.num_delivered if msg.metadata is not None else 1
        if verdict.retry and self._age(msg) < self.wait_s and delivered < self.max_deliver:
            log.info("batch waits for the executor's watch to see its object", extra={
                "reconcile_id": batch.reconcile_id, "key": str(batch.key), "why": verdict.detail})
            await msg.nak(delay=self.retry_delay_s)
            return False
        if known is not None and await known(lambda applied: refusal_results(batch, verdict, applied)):
            log.info("batch refused by admission is known to the ledger; answered from it", extra={
                "reconcile_id": batch.reconcile_id, "key": str(batch.key), "reason": verdict.reason})
            return True
        await self._refuse(msg, batch, verdict, report)
        return False

    @staticmethod
    def _age(msg: Msg) -> float:
        stored = msg.metadata.timestamp if msg.metadata is not None else None
        return (datetime.now(UTC) - stored).total_seconds() if stored is not None else 0.0

    async def _refuse(self, msg: Msg, batch: CommandBatch, verdict: policy.Verdict, report: Report) -> None:
        controller = batch.controller if batch.controller in policy.PRIMARY else "unknown"
        REFUSED.labels(controller, verdict.reason).inc()
        self.refused += 1
        # A batch for an object deleted meanwhile is a routine race; anything else may be forged.
        level = logging.INFO if verdict.reason == policy.OBJECT_DELETED else logging.WARNING
        log.log(level, "command batch refused by admission; not applied", extra={
            "reconcile_id": batch.reconcile_id, "controller": batch.controller, "key": str(batch.key),
            "subject": msg.subject, "reason": verdict.reason, "detail": verdict.detail,
            "commands": summary(batch)})
        await self._nc.jetstream().publish(s.dead_letter_subject(self._service), redacted(batch), headers={
            h.DLQ_SUBJECT: msg.subject, DLQ_REASON: verdict.reason,
            h.DLQ_ERROR: f"refused by admission: {verdict.reason}: {verdict.detail}"[:1000]})
        if msg.subject == s.command_subject(batch.controller, batch.key.namespace, batch.key.name) or \
                msg.subject == s.status_subject(batch.controller, batch.key.namespace, batch.key.name):
            # Only answer on the subject's own object: a forged body never makes us publish elsewhere.
            await report(batch, refusal_results(batch, verdict, []))
        await msg.ack()
