"""Read-your-writes for state-machine controllers (RayJob, RayService).

KubeRay's RayJob/RayService reconciles write synchronously and the next reconcile starts from
what they wrote (a stale read fails its Status().Update with a conflict). raybus's writes go
through the bus, so without care the next reconcile would decide again on the state before them:
a second transition, a counter bumped twice, a second submission. The barrier holds an object's
next decision until every write of its previous one has an answer:
- each Kubernetes command batch has an Outcome and, if it wrote the object itself (a finalizer
  patch, its own deletion), the snapshot no longer shows the version the decision read;
- the status write has an Outcome and, if it succeeded, the snapshot no longer shows the version
  the decision read (the watcher has delivered the write), or it failed (409: decide again on
  the newer version);
- each dashboard command has a result, and the snapshot holds the observation the poller read
  back after it.
Outcomes share one last-value subject per object, so a reconciler that falls behind can miss one
(the batch's, overwritten by the status write's): a batch without an Outcome is looked up in the
command ledger after a few seconds (BatchResolver), and a status write is answered as soon as the
snapshot shows a newer version. A write whose answer does not come within `patience_s` is resolved
through the command ledger (revoked if no executor claimed it, so it can never apply late); a
status write is then simply let go: it carries the resourceVersion it was computed on, so it can
never apply over a newer state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey, Outcome
from raybus.bus.ledger import BatchLedger
from raybus.bus.publish import dashboard_ledger_key
from raybus.runtime.batches import BatchResolver
from raybus.runtime.cache import ObjectCache
from raybus.runtime.outcomes import OutcomeTracker

PATIENCE_S = 30.0


@dataclass
class _Pending:
    since: float
    batches: set[str] = field(default_factory=set)
    status: tuple[str, str] | None = None  # (status batch id, resourceVersion it was computed on)
    dashboard: set[str] = field(default_factory=set)  # command ids
    base_rv: str = ""  # the object's resourceVersion the decision read


class WriteBarrier:
    def __init__(self, *, cache: ObjectCache, outcomes: OutcomeTracker, batches: BatchResolver,
                 ledger: BatchLedger, kind: s.Kind, controller: str, clock: Callable[[], float] = time.monotonic,
                 patience_s: float = PATIENCE_S) -> None:
        self._cache = cache
        self._controller = controller
        self._outcomes = outcomes
        self._batches = batches
        self._ledger = ledger
        self._kind = kind
        self._clock = clock
        self._patience = patience_s
        self._pending: dict[ObjectKey, _Pending] = {}
        self.waits = 0  # reconciles held back (observable for tests)

    def wrote(self, key: ObjectKey, *, batch: str | None, status: tuple[str, str] | None,
              dashboard: list[str], base_rv: str = "") -> None:
        if batch is None and status is None and not dashboard:
            return
        self._pending[key] = _Pending(since=self._clock(), batches={batch} if batch else set(),
                                      status=status, dashboard=set(dashboard), base_rv=base_rv)

    def forget(self, key: ObjectKey) -> None:
        self._pending.pop(key, None)

    def holds(self, key: ObjectKey) -> bool:
        return key in self._pending

    async def ready(self, key: ObjectKey) -> bool:
        """True when the previous decision's writes are all answered and visible."""
        pending = self._pending.get(key)
        if pending is None:
            return True
        overdue = self._clock() - pending.since > self._patience
        for batch in list(pending.batches):
            outcome = self._outcomes.by_batch.get(batch)
            if outcome is not None:
                if overdue or not self._wrote_self(key, outcome) or self._moved_on(key, pending.base_rv):
                    pending.batches.discard(batch)
            elif (await self._batches.state(batch)).settled:  # the ledger knows (Outcome missed)
                pending.batches.discard(batch)
        if pending.status is not None and self._status_answered(key, *pending.status, overdue=overdue):
            pending.status = None
        for command_id in list(pending.dashboard):
            if await self._dashboard_answered(key, command_id, overdue=overdue):
                pending.dashboard.discard(command_id)
        if pending.batches or pending.status is not None or pending.dashboard:
            self.waits += 1
            return False
        del self._pending[key]
        return True

    def _wrote_self(self, key: ObjectKey, outcome: Outcome) -> bool:
        """Did the batch change the object itself (e.g. the RayJob's finalizer)? Its next decision
        must see that write: a patch carrying the old resourceVersion would only conflict."""
        own = f"{key.namespace}/{key.name}"
        return any(r.ok and r.op != "update_status" and r.target.partition("/")[2] == own
                   and r.target.partition("/")[0].lower() == self._kind.value for r in outcome.results)

    def _moved_on(self, key: ObjectKey, base_rv: str) -> bool:
        obj = self._cache.get(self._kind, key.namespace, key.name)
        return obj is None or ((obj.get("metadata") or {}).get("resourceVersion") or "") != base_rv

    def _status_answered(self, key: ObjectKey, batch: str, base_rv: str, *, overdue: bool) -> bool:
        outcome = self._outcomes.by_batch.get(batch)
        if outcome is not None and (not all(r.ok for r in outcome.results) or any(r.code == 404 for r in outcome.results)):
            return True  # 409 (moved on meanwhile) or gone: decide again on what is there now
        # Written and visible, or the object moved on anyway (a pending write can then only 409):
        # optimistic concurrency means a late write can never land over newer state.
        return self._moved_on(key, base_rv) or overdue

    async def _dashboard_answered(self, key: ObjectKey, command_id: str, *, overdue: bool) -> bool:
        result = self._cache.dashboard_result(key.namespace, key.name, command_id)
        if result is not None:
            seq = result.observation_seq
            # The poller read the state back before answering: decide on that observation.
            return seq <= 0 or await self._cache.wait_for(seq, kind="dashboard", timeout=0)
        if not overdue:
            return False
        record = await self._ledger.revoke(dashboard_ledger_key(command_id), controller=self._controller,
                                           now=time.time())
        return record is not None and record.state != "applying"
