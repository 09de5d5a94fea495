"""Writes this replica has asked for whose effect has not reached its cache yet.

KubeRay writes synchronously (client.Create, Status().Update) and reads its informer afterwards;
our writes go reconciler -> bus -> executor -> API -> watcher -> bus -> cache, and a reconcile in
between would ask for the same write again: the same status, or a second create of the same
head Service (409 AlreadyExists: harmless, but a redundant API write). Pods don't need this: scale
expectations (in Redis) already cover them.

- Creates of named objects (Services, RBAC, ...): not re-sent while the earlier create is in
  flight or within `window_s` after its Outcome (watch lag); after that an unseen object counts as
  lost and is asked for again (409 at worst: names are deterministic).
- Status (backpressure): while one status write of an object is in flight, newer statuses are held
  back, not queued behind it; when it settles, `on_ready(key)` asks for one more reconcile, which
  publishes the newest. So an object has at most one status write queued in the executor however
  many times its pods change meanwhile.
`max_wait_s` caps the wait for an Outcome that never comes (an executor lost with its batch);
`status_max_wait_s` the same for a status write, shorter: an Outcome can also be lost on the bus
(RAYBUS_OUTCOMES keeps the last per object, so a command batch's Outcome published right after
a status write's replaces it; an ordered consumer re-created after a NATS node's loss resumes
after it and never sees the status one). Held for max_wait, that RayCluster's status stayed
stale for 300 s (make test beside two hogs, test_nats_leader_killed_mid_convergence). So a status
the cache already shows counts as written, Outcome or not (`status_pending(cached=...)`); the
cap is then only for a write that never happened. It is 120 s, not less: while 1,000 clusters
are created, a RayCluster status waits behind command batches (the executor yields to them)
for over a minute, and at a 30 s cap every cluster sent its status again every 30 s, a third of
the cluster-reconciler's runs. A status is level state: sending the same one again
costs at most one API write.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from raybus.bus.envelopes import ObjectKey
from raybus.decisions.commands import Command, CreateObject

Status = dict[str, Any]


def _differs(old: Status | None, new: Status) -> bool:
    return old != new


class InFlightWrites:
    def __init__(self, window_s: float = 10.0, max_wait_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic, *, status_max_wait_s: float = 120.0,
                 differs: Callable[[Status | None, Status], bool] = _differs) -> None:
        self._window = window_s
        self._max_wait = max_wait_s
        self._status_max_wait = min(status_max_wait_s, max_wait_s)
        self._clock = clock
        self._differs = differs
        self._status: dict[ObjectKey, tuple[Status, str]] = {}
        self._held: set[ObjectKey] = set()
        self._status_batches: dict[str, ObjectKey] = {}
        self._bases: dict[ObjectKey, str] = {}  # resourceVersion the last status was computed on
        self._status_at: dict[ObjectKey, float] = {}  # when the last status was sent
        self._written: dict[ObjectKey, tuple[str, str]] = {}  # (base rv, rv after the write)
        self._creates: dict[ObjectKey, dict[tuple[str, str, str], str]] = {}
        self._sent: dict[str, float] = {}  # batch id -> when sent
        self._settled: dict[str, float] = {}  # batch id -> when its Outcome arrived
        self._prune_at = 1024
        self.on_ready: Callable[[ObjectKey], None] | None = None
        self.on_status_failed: Callable[[ObjectKey], None] | None = None
        self.on_status_written: Callable[[ObjectKey], None] | None = None

    def settle(self, batch_id: str, *, written_rv: str | None = None, status_failed: bool = False) -> None:
        """The executor finished this batch (successfully or not); `written_rv`: the object's
        resourceVersion after a successful status write; `status_failed`: its status write was
        not applied (refused, or skipped): `on_status_failed(key)` asks for a reconcile, which
        finds the same status still held back for `window_s` and requeues for when it is not
        (runtime.status_writes.after_write), so a failed write is sent again after the window,
        as before, and a write that keeps failing costs one API call per window, not a loop."""
        if batch_id in self._sent:
            self._settled[batch_id] = self._clock()
        key = self._status_batches.pop(batch_id, None)
        if key is not None and written_rv and key in self._bases:
            self._written[key] = (self._bases[key], written_rv)
        if key is not None and written_rv and self.on_status_written is not None:
            self.on_status_written(key)
        if key is not None and status_failed and self.on_status_failed is not None:
            self.on_status_failed(key)
        if key is not None and key in self._held:
            self._held.discard(key)
            if self.on_ready is not None:
                self.on_ready(key)
        if len(self._sent) > self._prune_at:
            self._prune()
            # Amortized: when most batches are still fresh, a scan per Outcome would be quadratic.
            self._prune_at = max(1024, 2 * len(self._sent))

    def _prune(self) -> None:
        """Forget batches that can no longer be fresh (an unknown batch id reads as expired)."""
        for batch_id in [b for b in self._sent if not self._fresh(b)]:
            self._sent.pop(batch_id, None)
            self._settled.pop(batch_id, None)
            self._status_batches.pop(batch_id, None)

    def _in_flight(self, batch_id: str, max_wait: float | None = None) -> bool:
        return batch_id not in self._settled and self._clock() - self._sent.get(
            batch_id, float("-inf")) <= (self._max_wait if max_wait is None else max_wait)

    def _fresh(self, batch_id: str, max_wait: float | None = None) -> bool:
        settled = self._settled.get(batch_id)
        if settled is not None:
            return self._clock() - settled <= self._window
        return self._in_flight(batch_id, max_wait)

    def _mark(self, batch_id: str) -> None:
        self._sent.setdefault(batch_id, self._clock())

    def status_pending(self, key: ObjectKey, status: Status, *, cached: Status | None = None) -> bool:
        """True: do not publish `status` now (the same one was just written, or another status
        write of `key` is still in flight: it is held back and asked for again once that settles).
        `cached`: the status the cache shows; the one in flight showing there means it was written,
        whether or not its Outcome ever arrives."""
        sent = self._status.get(key)
        if sent is None:
            return False
        previous, batch_id = sent
        if cached is not None and batch_id not in self._settled and not self._differs(previous, cached):
            self._settled[batch_id] = self._clock()
            self._held.discard(key)
        if self._in_flight(batch_id, self._status_max_wait):
            if self._differs(previous, status):
                self._held.add(key)
            return True
        return self._fresh(batch_id, self._status_max_wait) and not self._differs(previous, status)

    def mark_status(self, key: ObjectKey, status: Status, *, batch_id: str, base_rv: str = "") -> None:
        self._mark(batch_id)
        self._status[key] = (status, batch_id)
        self._status_at[key] = self._clock()
        self._status_batches[batch_id] = key
        self._bases[key] = base_rv
        self._held.discard(key)

    def status_not_sent(self, key: ObjectKey, batch_id: str) -> None:
        """Undo `mark_status`: the publish of that status write failed (e.g. no JetStream leader
        during a NATS node's loss), so no Outcome will ever settle it; left marked, every later
        reconcile would hold the same status back as in flight for status_max_wait."""
        sent = self._status.get(key)
        if sent is None or sent[1] != batch_id:
            return
        self._status.pop(key, None)
        self._status_at.pop(key, None)
        self._status_batches.pop(batch_id, None)
        self._sent.pop(batch_id, None)
        self._held.discard(key)

    def creates_not_sent(self, key: ObjectKey, batch_id: str) -> None:
        """Undo `drop_pending_creates`' marks: that batch's publish failed, so no Outcome will
        settle its creates; left marked, every later round would skip them for max_wait."""
        sent = self._creates.get(key) or {}
        for target in [t for t, b in sent.items() if b == batch_id]:
            del sent[target]
        self._sent.pop(batch_id, None)

    def last_status(self, key: ObjectKey) -> Status | None:
        sent = self._status.get(key)
        return sent[0] if sent is not None else None

    def status_wait(self, key: ObjectKey, *, urgent: bool, interval_s: float) -> float:
        """Seconds until a non-urgent status change of `key` may be written (0: now): at most one
        such write per interval, so a converging cluster's counters do not cost a write each."""
        if urgent:
            return 0.0
        last = self._status_at.get(key)
        return 0.0 if last is None else max(0.0, last + interval_s - self._clock())

    def status_expires_in(self, key: ObjectKey) -> float | None:
        """Seconds until `key`'s last status write stops holding back the same status (the window
        after its Outcome, or status_max_wait while it has none): then an unseen one is sent
        again."""
        sent = self._status.get(key)
        if sent is None:
            return None
        settled = self._settled.get(sent[1])
        start, span = (settled, self._window) if settled is not None else \
            (self._sent.get(sent[1], self._clock()), self._status_max_wait)
        return max(0.0, start + span - self._clock())

    def since_status(self, key: ObjectKey) -> float | None:
        """Seconds since `key`'s last status write was sent (None: none remembered)."""
        last = self._status_at.get(key)
        return None if last is None else self._clock() - last

    def since_written(self, key: ObjectKey) -> float | None:
        """Seconds since the Outcome of `key`'s last status write arrived (None: none remembered,
        or still in flight)."""
        sent = self._status.get(key)
        settled = None if sent is None else self._settled.get(sent[1])
        return None if settled is None else self._clock() - settled

    def status_rv(self, key: ObjectKey, cache_rv: str) -> str:
        """The resourceVersion to write the next status over: our own last status write's result
        when the cache still shows the version that write replaced (the watch has not delivered it
        yet), so the write does not fail on our own previous one; else the cache's."""
        written = self._written.get(key)
        if written is not None and written[0] == cache_rv:
            return written[1]
        return cache_rv

    @staticmethod
    def _create_key(cmd: CreateObject) -> tuple[str, str, str]:
        meta = cmd.object.get("metadata") or {}
        return (str(cmd.object.get("kind")), str(meta.get("namespace")), str(meta.get("name")))

    def drop_pending_creates(self, key: ObjectKey, commands: list[Command], *,
                             batch_id: str) -> list[Command]:
        """`key`'s commands minus non-Pod creates already in flight; marks the remaining ones
        as sent in `batch_id`."""
        sent = self._creates.setdefault(key, {})
        out: list[Command] = []
        for cmd in commands:
            if isinstance(cmd, CreateObject) and cmd.object.get("kind") != "Pod":
                target = self._create_key(cmd)
                earlier = sent.get(target)
                if earlier is not None and self._fresh(earlier):
                    continue
                self._mark(batch_id)
                sent[target] = batch_id
            out.append(cmd)
        return out

    def create_failed(self, key: ObjectKey, target: str, *, batch_id: str) -> None:
        """The create of `target` ("Kind/namespace/name") sent in `batch_id` failed: the next
        decision may ask for it again at once (a failed create is not "in flight")."""
        kind, _, rest = target.partition("/")
        namespace, _, name = rest.partition("/")
        sent = self._creates.get(key) or {}
        if sent.get((kind, namespace, name)) == batch_id:
            sent.pop((kind, namespace, name), None)

    def forget(self, key: ObjectKey) -> None:
        """The object is gone: drop what was remembered for it, and batches nobody else refers to."""
        self._status.pop(key, None)
        self._held.discard(key)
        self._creates.pop(key, None)
        self._bases.pop(key, None)
        self._written.pop(key, None)
        self._status_at.pop(key, None)
        live = {batch_id for _, batch_id in self._status.values()} | {
            b for targets in self._creates.values() for b in targets.values()}
        for batch_id in [b for b in self._sent if b not in live]:
            self._sent.pop(batch_id, None)
            self._settled.pop(batch_id, None)
            self._status_batches.pop(batch_id, None)
