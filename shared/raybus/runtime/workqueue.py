"""A per-replica work queue with controller-runtime's semantics.

A key is never processed by two workers at once, and any number of adds while it waits or runs
collapse into one more run (the dirty/processing sets of client-go's workqueue). Bus messages that
asked for the key are acked only after the run that covers them has finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from raybus.observability.controllerruntime import QueueMetrics
from raybus.runtime.ratelimit import ControllerRateLimiter

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")  # what an add carries along, e.g. the bus message to ack afterwards


_PRUNE_AT = 4096


class WorkQueue(Generic[K, T]):
    def __init__(self, limiter: ControllerRateLimiter[K] | None = None, *,
                 min_interval_s: float = 0.0, metrics: QueueMetrics | None = None) -> None:
        self.limiter: ControllerRateLimiter[K] = limiter or ControllerRateLimiter()
        # client-go's workqueue metrics (observability/controllerruntime.py): when each waiting
        # key was added and each running key was handed to a worker, on the metrics' clock.
        self.metrics = metrics
        self._added_at: dict[K, float] = {}
        self._running_since: dict[K, float] = {}
        # Debounced adds of a key that ran less than this long ago wait until this long after
        # that run started (see add_soon).
        self.min_interval_s = min_interval_s
        self._started: dict[K, float] = {}  # loop time each key's last run started
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._acks: dict[K, list[T]] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._soon: dict[K, asyncio.TimerHandle] = {}  # debounced adds (add_soon)

    def add(self, key: K, token: T | None = None) -> None:
        if token is not None:
            self._acks.setdefault(key, []).append(token)
        if key in self._dirty:
            return
        self._dirty.add(key)
        if self.metrics is not None:
            self.metrics.add()
            self._added_at.setdefault(key, self.metrics.clock())
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_soon(self, key: K, token: T | None, delay_s: float) -> None:
        """Add after a short delay, folding in every add that comes meanwhile (a burst of Pod
        events for one cluster becomes one run). The token is kept at once, so the message it
        stands for is acked by the run that covers it."""
        if token is not None:
            self._acks.setdefault(key, []).append(token)
        if delay_s <= 0:
            self.add(key)
            return
        if key in self._dirty or key in self._soon:
            return
        loop = asyncio.get_running_loop()
        started = self._started.get(key)
        if started is not None:
            # A busy key (a cluster whose Pods step through schedule/start/ready one after the
            # other) runs at most once per min_interval_s on events; a quiet key still runs
            # delay_s after its first event. Level-triggered, the later run sees every event
            # the skipped ones would have; KubeRay decides on each event, but its own pace
            # while a cluster changes is the 2 s requeue (deciding on each Pod step, two thirds
            # of the runs decided nothing).
            delay_s = max(delay_s, started + self.min_interval_s - loop.time())
        self._soon[key] = loop.call_later(delay_s, self._fire_soon, key)

    def _fire_soon(self, key: K) -> None:
        self._soon.pop(key, None)
        self.add(key)

    def add_after(self, key: K, delay_s: float, *, earliest: bool = False) -> None:
        """Requeue later (KubeRay's RequeueAfter); a newer request for the key replaces the older,
        unless `earliest` (client-go's delaying queue: the sooner of the two is kept)."""
        loop = asyncio.get_running_loop()
        if self.metrics is not None and delay_s > 0:
            self.metrics.retry()
        old = self._timers.get(key)
        if old is not None and earliest and old.when() <= loop.time() + delay_s:
            return
        if old is not None:
            old.cancel()
        self._timers[key] = loop.call_later(delay_s, self._fire, key)

    def add_rate_limited(self, key: K) -> float:
        """controller-runtime's AddRateLimited: one more failure of key, retried after the
        limiter's delay (an earlier pending retry of the key is replaced). Returns the delay."""
        delay = self.limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget_failures(self, key: K) -> None:
        """controller-runtime's Queue.Forget: the key succeeded; its backoff starts over."""
        self.limiter.forget(key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> tuple[K, list[T]]:
        key = await self._queue.get()
        while key not in self._dirty:  # stale entry left behind by forget()
            key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        if self.metrics is not None:
            now = self.metrics.clock()
            self.metrics.got(self._added_at.pop(key, None), now)
            self._running_since[key] = now
        timer = self._timers.pop(key, None)
        if timer is not None:
            # A requeue asked for by an earlier run: this run reads the state that requeue was
            # waiting for and asks for its own (controller-runtime keeps both; the older one
            # then decided nothing, a fifth of a cluster's runs in bench_clusters).
            timer.cancel()
        if self.min_interval_s > 0:
            now = asyncio.get_running_loop().time()
            if len(self._started) > _PRUNE_AT:  # keys that ran long ago hold nothing back
                self._started = {k: t for k, t in self._started.items()
                                 if t > now - self.min_interval_s}
            self._started[key] = now
        return key, self._acks.pop(key, [])

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if self.metrics is not None:
            self.metrics.done(self._running_since.pop(key, None))
        if key in self._dirty:
            self._queue.put_nowait(key)

    def drop(self, keep: Callable[[K], bool]) -> list[T]:
        """Drop queued keys that no longer belong here; returns their pending acks (to nak)."""
        dropped: list[T] = []
        for key in [k for k in self._dirty if not keep(k)]:
            self._dirty.discard(key)
            self._added_at.pop(key, None)
            dropped.extend(self._acks.pop(key, []))
        for key in [k for k in self._timers if not keep(k)]:
            self._timers.pop(key).cancel()
        for key in [k for k in self._soon if not keep(k)]:
            self._soon.pop(key).cancel()
            dropped.extend(self._acks.pop(key, []))
        for key in [k for k in self._started if not keep(k)]:
            del self._started[key]
        return dropped

    def waiting(self, predicate: Callable[[K], bool]) -> list[K]:
        """Keys with a requeue scheduled, queued or debounced: what only this replica knows it
        must look at (a debounced wake from the replica's own cache has no bus message behind it)."""
        return [k for k in {*self._dirty, *self._timers, *self._soon} if predicate(k)]

    def in_flight(self, predicate: Callable[[K], bool]) -> bool:
        return any(predicate(k) for k in self._processing)

    def __len__(self) -> int:
        return len(self._dirty)

    def depth(self) -> int:
        """client-go's depth: keys waiting for a worker (a dirty key being processed waits for
        its run to end, not in the queue)."""
        return sum(1 for k in list(self._dirty) if k not in self._processing)

    def processing_since(self) -> list[float]:
        return list(self._running_since.values())
