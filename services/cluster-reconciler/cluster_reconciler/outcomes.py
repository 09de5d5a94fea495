"""Last executor outcome per RayCluster, so a reconcile sees what failed in its previous round
(KubeRay sees its own create/delete errors directly; ours come back over the bus)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey, Outcome
from raybus.decisions.cluster.reconcile import CommandFailure

log = logging.getLogger(__name__)


class OutcomeCache:
    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        self._last: dict[ObjectKey, Outcome] = {}
        self._sub: Any = None
        self.on_outcome: list[Callable[[str], None]] = []  # called with each batch's reconcile_id

    async def start(self) -> None:
        self._sub = await self._nc.jetstream().subscribe(
            s.outcomes_filter(s.Controller.CLUSTER), ordered_consumer=True, cb=self._on_msg,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def _on_msg(self, msg: Msg) -> None:
        try:
            outcome = Outcome.model_validate_json(msg.data)
        except ValidationError:
            log.warning("undecodable outcome skipped", extra={"subject": msg.subject})
            return
        # Status writes have their own subject and Outcomes; they must not hide the failure of
        # the command batch before them (ReplicaFailure comes from create/delete failures).
        if any(r.op != "update_status" for r in outcome.results):
            self._last[outcome.key] = outcome
        for hook in self.on_outcome:
            hook(outcome.reconcile_id)

    def failures(self, key: ObjectKey) -> list[CommandFailure]:
        outcome = self._last.get(key)
        if outcome is None:
            return []
        # target lets a failed create drop its expectation at once (KubeRay records one only
        # after a successful API call) instead of holding the group for the 30 s timeout.
        return [CommandFailure(reason=r.error_reason or "", message=r.message, target=r.target)
                for r in outcome.results if not r.ok]

    def forget(self, key: ObjectKey) -> None:
        self._last.pop(key, None)
