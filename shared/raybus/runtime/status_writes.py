"""When a reconciler sends the status it decided: the in-flight memo, the write throttle and the
requeues that Outcomes ask for.

KubeRay's Status().Update returns once the API server answered, and it requeues 2 s later. Ours
returns when the executor's Outcome arrives: until then the same status is not sent again (the
in-flight memo, runtime.inflight), a newer one waits behind it (asked for again once it settles),
and a change that only moves counters waits at most `interval_s` (folded into the next write), so
a converging cluster's Pods turning ready one by one do not cost one API write each. The Outcome
then asks for KubeRay's requeue (`requeue_s` after it landed), or for a retry when the write
failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raybus.bus.envelopes import ObjectKey, Outcome
from raybus.decisions.commands import Command
from raybus.runtime.inflight import InFlightWrites
from raybus.runtime.outcomes import OutcomeTracker, real_failures

Status = dict[str, Any]
# A status change that only moves counters, desired resources or endpoints is written at most
# this often per object (KubeRay requeues every 2 s while a cluster changes); changes `urgent`
# names are written at once. At 1,000 clusters the executor's one QPS budget would otherwise go
# to a write per Pod turning ready.
STATUS_INTERVAL_S = 2.0


def after_write(unchanged: float | None, since_written: float | None, expires_in: float | None,
                *, requeue_s: float) -> float | None:
    """The requeue of a round whose status is already on its way: `requeue_s` after the status
    write (from when its Outcome arrived); while it is in flight or after that, when the in-flight
    memo stops holding the status back (so one the cache never shows is sent again); at the latest
    the unchanged-status requeue."""
    if since_written is not None and since_written < requeue_s:
        left: float | None = requeue_s - since_written
    else:
        left = expires_in
    if left is None:
        return unchanged
    return left if unchanged is None else min(unchanged, left)


class StatusWrites:
    """One controller's status writes and named creates in flight, settled by its Outcomes."""

    def __init__(self, outcomes: OutcomeTracker, *, urgent: Callable[[Status, Status], bool],
                 differs: Callable[[Status | None, Status], bool], requeue_s: float,
                 interval_s: float = STATUS_INTERVAL_S) -> None:
        self.memo = InFlightWrites(differs=differs)
        self._urgent = urgent
        self._requeue_s = requeue_s
        self._interval_s = interval_s
        outcomes.hooks.append(self.settle)

    def settle(self, outcome: Outcome) -> None:
        written = next((r.resource_version for r in outcome.results
                        if r.op == "update_status" and r.ok and r.code == 200), None)
        failed = any(r.op == "update_status" and not r.ok for r in outcome.results)
        self.memo.settle(outcome.reconcile_id, written_rv=written, status_failed=failed)
        for r in real_failures(outcome.results):
            if r.op == "create" and r.target:  # e.g. a PodGroup whose CRD is missing: retry it
                self.memo.create_failed(outcome.key, r.target, batch_id=outcome.reconcile_id)

    def bind(self, look_again: Callable[[ObjectKey], None], *, retry: Callable[[ObjectKey], None],
             requeue_after: Callable[[ObjectKey, float], None]) -> None:
        """A status held back behind an in-flight one is asked for again once that settles
        (`look_again`); a failed status write asks for a reconcile (`retry`), which requeues for
        when it may be sent again; one that landed asks for the requeue `requeue_s` later."""
        self.memo.on_ready = look_again
        self.memo.on_status_failed = retry
        self.memo.on_status_written = lambda key: requeue_after(key, self._requeue_s)

    def hold(self, key: ObjectKey, status: Status | None, *, cached: Status | None,
             requeue: float | None, unchanged: float | None) -> tuple[Status | None, float | None]:
        """The status to send now (None: held back) and the round's requeue."""
        if status is None:
            return None, requeue
        if self.memo.status_pending(key, status, cached=cached):
            # That status is on its way (or just written, not yet in the cache), or waits behind
            # one that is (asked for again when it settles): this round keeps its deadline and
            # otherwise asks for what an unchanged status asks for.
            return None, after_write(unchanged, self.memo.since_written(key),
                                     self.memo.status_expires_in(key), requeue_s=self._requeue_s)
        previous = self.memo.last_status(key) or (cached or {})
        wait = self.memo.status_wait(key, urgent=self._urgent(previous, status), interval_s=self._interval_s)
        if wait > 0:  # only counters/resources changed: fold into the next write
            return None, wait if requeue is None else min(requeue, wait)
        return status, requeue

    def send(self, key: ObjectKey, status: Status, *, batch_id: str, cache_rv: str,
             requeue: float | None, unchanged: float | None) -> tuple[str, float | None]:
        """Mark `status` as sent in `batch_id`: the resourceVersion to write it over, and the
        round's requeue. The status-write requeue counts from when the write lands (its Outcome),
        not from the send: a busy executor holds a status for seconds (it yields to command
        batches), and a requeue counted from the send found it still pending. Until the Outcome
        comes, only the memo's expiry, in case it never does."""
        base = self.memo.status_rv(key, cache_rv)
        self.memo.mark_status(key, status, batch_id=batch_id, base_rv=base)
        if requeue == self._requeue_s != unchanged:
            requeue = after_write(unchanged, None, self.memo.status_expires_in(key), requeue_s=self._requeue_s)
        return base, requeue

    def drop_pending_creates(self, key: ObjectKey, commands: list[Command], *, batch_id: str) -> list[Command]:
        """Named creates already in flight are dropped only right before the publish: marked
        earlier, a round that then failed or returned early would leave them "in flight" under a
        batch never published, and every later round would skip them for the memo's max wait."""
        return self.memo.drop_pending_creates(key, commands, batch_id=batch_id)

    def not_sent(self, key: ObjectKey, batch_id: str, status_batch_id: str) -> None:
        """The publish failed: the retry must send them again."""
        self.memo.status_not_sent(key, status_batch_id)
        self.memo.creates_not_sent(key, batch_id)

    def forget(self, key: ObjectKey) -> None:
        self.memo.forget(key)
