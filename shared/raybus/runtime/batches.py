"""Resolves the state of a reconciler's published batches for its decision code.

Sources, cheapest first: the executor's Outcomes seen by this process (`OutcomeTracker`), batches
this process published itself (queued: wait), then the command ledger (`raybus.bus.ledger`) for
batches a previous incarnation or another replica published. A batch the ledger has never heard
of may be queued or may never have been published (a crash between saving expectations and
publishing): the resolver revokes it. That is always safe, because revocation is a
compare-and-set that fails once an executor has claimed the batch; after a successful revoke the
batch can never be applied, so its expectations are dropped and its names reused. (A queued batch
revoked this way costs one re-decision, never a duplicate.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from raybus.bus.envelopes import CommandResult
from raybus.bus.ledger import BatchLedger, BatchRecord, command_key
from raybus.decisions.batches import IN_FLIGHT, BatchState
from raybus.runtime.outcomes import OutcomeTracker

log = logging.getLogger(__name__)
# A batch this process published that no executor has claimed after this long is presumed lost
# (its message purged or dead): revoke it. Only a liveness fallback; queue waits are far shorter.
LOST_AFTER_S = 900.0
# Our own batch with no Outcome after this long: ask the ledger (an Outcome message can be lost,
# e.g. missed across a NATS restart; the ledger keeps the result).
RECHECK_AFTER_S = 5.0


def state_from_results(results: list[CommandResult], finished_at: datetime) -> BatchState:
    return BatchState(
        settled=True,
        finished_at=finished_at,
        revoked=bool(results) and all(r.expired for r in results),
        not_applied=frozenset(r.target for r in results if not r.ok),
        created_rv={r.target: int(r.resource_version) for r in results
                    if r.op == "create" and r.ok and r.resource_version and r.resource_version.isdigit()},
    )


def state_from_record(record: BatchRecord) -> BatchState:
    finished = datetime.fromtimestamp(record.finished_at or time.time(), UTC)
    if record.state == "revoked":
        return BatchState(settled=True, finished_at=finished, revoked=True)
    if record.state == "done":
        return state_from_results(record.results, finished)
    return IN_FLIGHT


class PublishedBatches:
    """Batch ids this process published (and when): these are known to be in the stream."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._at: dict[str, float] = {}

    def add(self, batch_id: str) -> None:
        self._at[batch_id] = self._clock()
        if len(self._at) > 200_000:  # keep it bounded: oldest first (dicts keep insertion order)
            for old in list(self._at)[:50_000]:
                del self._at[old]

    def age(self, batch_id: str) -> float | None:
        at = self._at.get(batch_id)
        return None if at is None else self._clock() - at

    def discard(self, batch_id: str) -> None:
        self._at.pop(batch_id, None)


class BatchResolver:
    def __init__(self, *, tracker: OutcomeTracker, ledger: BatchLedger, published: PublishedBatches,
                 controller: str, clock: Callable[[], float] = time.time, lost_after_s: float = LOST_AFTER_S,
                 recheck_after_s: float = RECHECK_AFTER_S) -> None:
        self._tracker = tracker
        self._ledger = ledger
        self._controller = controller
        self._published = published
        self._clock = clock
        self._lost_after = lost_after_s
        self._recheck_after = recheck_after_s
        self.revoked = 0  # batches this process took back (observable for tests)
        self._checked: dict[str, float] = {}  # our queued batches: when the ledger was last asked

    async def states(self, batch_ids: Iterable[str]) -> dict[str, BatchState]:
        out: dict[str, BatchState] = {}
        for batch_id in batch_ids:
            out[batch_id] = await self.state(batch_id)
        return out

    async def state(self, batch_id: str) -> BatchState:
        outcome = self._tracker.by_batch.get(batch_id)
        if outcome is not None:
            return state_from_results(outcome.results, outcome.finished_at)
        age = self._published.age(batch_id)
        if age is not None and age < self._recheck_after:
            return IN_FLIGHT  # just published: its Outcome is on its way
        checked = self._checked.get(batch_id)
        if age is not None and checked is not None and self._clock() - checked < self._recheck_after:
            return IN_FLIGHT  # ours, asked the ledger a moment ago: queued behind others
        self._checked[batch_id] = self._clock()
        if len(self._checked) > 100_000:
            self._checked.clear()
        record, _ = await self._ledger.get(command_key(batch_id))
        if record is None:
            if age is not None and age < self._lost_after:
                return IN_FLIGHT  # ours, in the stream, not claimed yet: queued, not lost
            record = await self._ledger.revoke(command_key(batch_id), controller=self._controller,
                                               now=self._clock())
            if record is not None and record.state == "revoked":
                self.revoked += 1
                log.info("revoked a batch no executor had claimed", extra={"batch": batch_id})
        if record is None:
            return IN_FLIGHT
        if record.state != "applying":
            self._published.discard(batch_id)
        return state_from_record(record)
