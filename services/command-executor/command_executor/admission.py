"""Executor admission, the I/O half: the API server's objects from the executor's own informers
(command_executor/live.py), and what happens to a batch the pure policy (`raybus.decisions.admission`)
does not admit.

- A batch the view cannot judge yet is not refused at once: the executor's informers may trail the
  reconciler's view (a RayCluster a RayJob batch just created; an owner's newer version). It looks
  again for up to `hold_s` in process, then naks with a delay, until the batch is `wait_s` old (its
  stream timestamp); only then is it refused. Not claimed meanwhile.
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
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from prometheus_client import Counter

from command_executor.live import live_view
from command_executor.mapping import describe, target_of
from raybus.adapters.kube import KubeClient
from raybus.bus import subjects as s
from raybus.bus.codec import dead_letter
from raybus.bus.envelopes import CommandBatch, CommandResult
from raybus.decisions import admission as policy
from raybus.decisions.settings import DecisionSettings

log = logging.getLogger(__name__)
REFUSED = Counter("raybus_commands_refused_total",
                  "Command batches the executor's admission refused (never applied)", ["controller", "reason"])
SUBJECT_MISMATCH = "subject_mismatch"
DLQ_REASON = "Raybus-Dlq-Reason"  # the refusal reason token (h.DLQ_ERROR carries the detail)

Report = Callable[[CommandBatch, list[CommandResult]], Awaitable[None]]
Known = Callable[[Callable[[list[CommandResult]], list[CommandResult]]], Awaitable[bool]]


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
    def __init__(self, nc: NATS, kube: KubeClient, *, service: str, settings: DecisionSettings,
                 namespace: str | None = None, wait_s: float = 30.0, hold_s: float = 1.0,
                 retry_delay_s: float = 2.0, max_deliver: int = 20) -> None:
        self._nc = nc
        self._service = service
        self.settings = settings
        self.view = live_view(kube, namespace=namespace)
        self.wait_s, self.hold_s, self.retry_delay_s = wait_s, hold_s, retry_delay_s
        self.max_deliver = max_deliver
        self.refused = 0  # observable for tests

    async def start(self) -> None:
        await self.view.start()  # returns once every informer listed: no batch judged before

    async def stop(self) -> None:
        await self.view.stop()

    async def verdict(self, batch: CommandBatch, *, subject: str, status: bool) -> policy.Verdict:
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
        view = await self.view.with_targets(batch.commands)
        return policy.admit(controller=batch.controller, kind=batch.kind, namespace=batch.key.namespace,
                            name=batch.key.name, uid=batch.uid, commands=batch.commands, view=view,
                            settings=self.settings, resource_version=batch.resource_version)

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
        verdict = await self.verdict(batch, subject=msg.subject, status=status)
        started = time.monotonic()
        held = verdict.retry
        while verdict.retry and time.monotonic() < started + self.hold_s:
            await asyncio.sleep(0.05)  # the informers deliver in the background; look again
            verdict = await self.verdict(batch, subject=msg.subject, status=status)
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
        level = logging.INFO if verdict.reason in policy.ROUTINE else logging.WARNING
        log.log(level, "command batch refused by admission; not applied", extra={
            "reconcile_id": batch.reconcile_id, "controller": batch.controller, "key": str(batch.key),
            "subject": msg.subject, "reason": verdict.reason, "detail": verdict.detail,
            "commands": summary(batch)})
        await dead_letter(self._nc, service=self._service, subject=msg.subject, data=redacted(batch),
                          error=f"refused by admission: {verdict.reason}: {verdict.detail}",
                          headers={DLQ_REASON: verdict.reason})
        if msg.subject == s.command_subject(batch.controller, batch.key.namespace, batch.key.name) or \
                msg.subject == s.status_subject(batch.controller, batch.key.namespace, batch.key.name):
            # Only answer on the subject's own object: a forged body never makes us publish elsewhere.
            await report(batch, refusal_results(batch, verdict, []))
        await msg.ack()
