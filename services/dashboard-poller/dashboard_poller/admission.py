"""Dashboard-poller admission, the I/O half: the RayJobs, RayServices and RayClusters from the
poller's own read-only informers (never the bus), and what happens to a command the pure policy
(`raybus.decisions.admission.dashboard`) does not admit.

A command the view cannot judge yet (its owner or cluster not seen, the owner's version behind the
one the command was decided on) is looked at again for up to `hold_s`, then nak'ed with a delay
until it is `wait_s` old; only then refused. A refused command is never sent to a head: it is made
final in the command ledger, dead-lettered with its reason, counted, and answered `failed`, so its
reconciler decides again instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from nats.aio.msg import Msg
from prometheus_client import Counter

from raybus.adapters.api_view import ApiView, Watched
from raybus.adapters.kube import KubeClient
from raybus.bus.envelopes import DashboardCommandMessage
from raybus.decisions.admission import verdict as v
from raybus.decisions.admission.dashboard import admit_dashboard_command

log = logging.getLogger(__name__)
REFUSED = Counter("raybus_dashboard_commands_refused_total",
                  "Dashboard commands the poller's admission refused (never sent)", ["controller", "reason"])
WATCHED = (Watched("raycluster", "ray.io/v1", "RayCluster"), Watched("rayjob", "ray.io/v1", "RayJob"),
           Watched("rayservice", "ray.io/v1", "RayService"))


class DashboardAdmission:
    def __init__(self, kube: KubeClient, *, namespace: str | None = None, wait_s: float = 30.0,
                 hold_s: float = 1.0, retry_delay_s: float = 2.0, max_deliver: int = 20) -> None:
        self.view = ApiView(kube, WATCHED, namespace=namespace)
        self.wait_s, self.hold_s, self.retry_delay_s, self.max_deliver = wait_s, hold_s, retry_delay_s, max_deliver
        self.refused = 0  # observable for tests

    async def start(self) -> None:
        await self.view.start()

    async def stop(self) -> None:
        await self.view.stop()

    def verdict(self, command: DashboardCommandMessage) -> v.Verdict:
        return admit_dashboard_command(controller=command.controller, namespace=command.key.namespace,
                                       name=command.key.name, uid=command.uid, command=command.command,
                                       view=self.view, resource_version=command.resource_version)

    async def check(self, msg: Msg, command: DashboardCommandMessage) -> v.Verdict | None:
        """The verdict to act on, or None when the message was nak'ed to be judged again later."""
        verdict = self.verdict(command)
        started = time.monotonic()
        while verdict.retry and time.monotonic() < started + self.hold_s:
            await asyncio.sleep(0.05)  # the informers deliver in the background; look again
            verdict = self.verdict(command)
        delivered = msg.metadata.num_delivered if msg.metadata is not None else 1
        stored = msg.metadata.timestamp if msg.metadata is not None else None
        age = (datetime.now(UTC) - stored).total_seconds() if stored is not None else 0.0
        if verdict.retry and age < self.wait_s and delivered < self.max_deliver:
            log.info("dashboard command waits for the poller's informers to see its owner",
                     extra={"command_id": command.command_id, "why": verdict.detail})
            await msg.nak(delay=self.retry_delay_s)
            return None
        if not verdict.admitted:
            controller = command.controller if command.controller in ("job", "service") else "unknown"
            REFUSED.labels(controller, verdict.reason).inc()
            self.refused += 1
            level = logging.INFO if verdict.reason in v.ROUTINE else logging.WARNING
            log.log(level, "dashboard command refused by admission; not sent", extra={
                "command_id": command.command_id, "controller": command.controller, "key": str(command.key),
                "subject": msg.subject, "op": command.command.op, "reason": verdict.reason,
                "detail": verdict.detail})
        return verdict
