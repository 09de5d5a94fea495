"""Writes this replica has asked for whose effect has not reached its cache yet.

KubeRay writes synchronously (client.Create, Status().Update) and reads its informer afterwards;
our writes go reconciler -> bus -> executor -> API -> watcher -> bus -> cache, and a reconcile in
between would ask for the same write again: the same status, or a second create of the same
head Service (409 AlreadyExists: harmless, but a redundant API write). Pods don't need this: scale
expectations (in Redis) already cover them. After `window_s` an unseen write counts as lost and
may be asked for again, which also covers a failed executor. The window starts when the executor
reports the batch done (its Outcome), not when it was sent: under KubeRay's QPS limit a batch may
wait in the executor for longer than any fixed window. `max_wait_s` caps the wait for an Outcome
that never comes (an executor lost with its batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from raybus.bus.envelopes import ObjectKey
from raybus.decisions.cluster.status import inconsistent_status
from raybus.decisions.commands import Command, CreateObject


class InFlightWrites:
    def __init__(self, window_s: float = 10.0, max_wait_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_s
        self._max_wait = max_wait_s
        self._clock = clock
        self._status: dict[ObjectKey, tuple[dict[str, Any], str]] = {}
        self._creates: dict[ObjectKey, dict[tuple[str, str, str], str]] = {}
        self._sent: dict[str, float] = {}  # batch id -> when sent
        self._settled: dict[str, float] = {}  # batch id -> when its Outcome arrived
        self._prune_at = 1024

    def settle(self, batch_id: str) -> None:
        """The executor finished this batch (successfully or not)."""
        if batch_id in self._sent:
            self._settled[batch_id] = self._clock()
        if len(self._sent) > self._prune_at:
            self._prune()
            # Amortized: when most batches are still fresh, a scan per Outcome would be quadratic.
            self._prune_at = max(1024, 2 * len(self._sent))

    def _prune(self) -> None:
        """Forget batches that can no longer be fresh (an unknown batch id reads as expired)."""
        for batch_id in [b for b in self._sent if not self._fresh(b)]:
            self._sent.pop(batch_id, None)
            self._settled.pop(batch_id, None)

    def _fresh(self, batch_id: str) -> bool:
        now = self._clock()
        settled = self._settled.get(batch_id)
        if settled is not None:
            return now - settled <= self._window
        return now - self._sent.get(batch_id, float("-inf")) <= self._max_wait

    def _mark(self, batch_id: str) -> None:
        self._sent.setdefault(batch_id, self._clock())

    def status_pending(self, key: ObjectKey, status: dict[str, Any]) -> bool:
        sent = self._status.get(key)
        return sent is not None and self._fresh(sent[1]) and not inconsistent_status(sent[0], status)

    def mark_status(self, key: ObjectKey, status: dict[str, Any], *, batch_id: str) -> None:
        self._mark(batch_id)
        self._status[key] = (status, batch_id)

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

    def forget(self, key: ObjectKey) -> None:
        self._status.pop(key, None)
        self._creates.pop(key, None)
        live = {b for b, _ in self._status.values()} | {
            b for targets in self._creates.values() for b in targets.values()}
        for batch_id in [b for b in self._sent if b not in live]:
            self._sent.pop(batch_id, None)
            self._settled.pop(batch_id, None)
