"""What the executor did with this controller's batches, as the reconciler needs it.

KubeRay sees the result of every API call inside its reconcile; raybus's results come back over
the bus as Outcomes (one per batch, RAYBUS_OUTCOMES keeps the last per object). The tracker:
- remembers recent outcomes by batch id (so expectations can tell a finished batch from one still
  queued) and the last command outcome per object (its failures feed the next decision, as a
  KubeRay reconcile error feeds calculateStatus);
- feeds the work queue's rate limiter: a failed command is the round's error (AddRateLimited),
  a fully successful batch resets the key's backoff (Forget), a batch that was never applied
  (revoked, or skipped after a failure) asks for a fresh decision;
- calls hooks (in-flight write memos, read-your-writes barriers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from cachetools import TTLCache
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandResult, ObjectKey, Outcome

log = logging.getLogger(__name__)
KEEP_S = 3600.0


class QueueHooks(Protocol):
    def command_failed(self, key: ObjectKey) -> None: ...
    def commands_succeeded(self, key: ObjectKey) -> None: ...
    def look_again(self, key: ObjectKey) -> None: ...


def is_status_outcome(outcome: Outcome) -> bool:
    return outcome.is_status


def real_failures(results: list[CommandResult]) -> list[CommandResult]:
    """Failed API calls; not commands that were never attempted (expired/skipped)."""
    return [r for r in results if not r.ok and not r.expired]


class OutcomeTracker:
    def __init__(self, nc: NATS, controller: s.Controller) -> None:
        self._nc = nc
        self._controller = controller
        self.by_batch: TTLCache[str, Outcome] = TTLCache(maxsize=500_000, ttl=KEEP_S)
        self._last: dict[ObjectKey, Outcome] = {}
        self._sub: Any = None
        self.queue: QueueHooks | None = None
        self.hooks: list[Callable[[Outcome], None]] = []

    async def start(self) -> None:
        self._sub = await self._nc.jetstream().subscribe(
            s.outcomes_filter(self._controller), ordered_consumer=True, cb=self._on_msg,
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
        self.record(outcome)

    def record(self, outcome: Outcome) -> None:
        self.by_batch[outcome.reconcile_id] = outcome
        if not is_status_outcome(outcome):
            # Status writes have their own subject and Outcomes; they must not hide the failure
            # of the command batch before them (ReplicaFailure comes from create/delete failures).
            self._last[outcome.key] = outcome
            if self.queue is not None:
                if real_failures(outcome.results):
                    self.queue.command_failed(outcome.key)
                elif all(r.ok for r in outcome.results):
                    self.queue.commands_succeeded(outcome.key)
                else:  # some commands never ran (revoked/skipped): decide them again
                    self.queue.look_again(outcome.key)
        for hook in self.hooks:
            hook(outcome)

    def last(self, key: ObjectKey) -> Outcome | None:
        return self._last.get(key)

    def forget(self, key: ObjectKey) -> None:
        self._last.pop(key, None)
