"""The poll scheduler: asks the pure decision (`decide_poll`) for every declared cluster when to
read it, runs due rounds (at most one per head, a bounded number at once), keeps the followed
jobs' log tail streams as `decide_follows` says (follow.py; an ended stream is a poll_now token),
turns job ends pushed by the heads into poll_now tokens too (ray_events.py), and sleeps until the earliest next decision or until an interest changes or a stream ends."""

from __future__ import annotations

import asyncio
import logging
import math
import time

from nats.errors import Error as NatsError

from dashboard_poller.follow import Follower
from dashboard_poller.heads import Heads
from dashboard_poller.ray_events import RayEventsReceiver
from dashboard_poller.view import ClusterKey
from raybus.bus import subjects as s
from raybus.decisions.dashboard import head_ready
from raybus.decisions.dashboard_follow import with_follow_ends
from raybus.decisions.dashboard_poll import (
    ClusterWant,
    PollPlan,
    PollSettings,
    PollState,
    after_head_ready,
    decide_poll,
    with_pushed_ends,
)
from raybus.runtime.cache import ObjectCache
from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)
MAX_SLEEP_S = 1.0  # RayCluster readiness is read from the cache, not signalled: look this often
PAY_RETRY_S = 0.5  # between attempts to publish owed triggers (heads.py) while NATS refuses them


class PollScheduler:
    def __init__(self, heads: Heads, *, clusters: ObjectCache | None, max_in_flight: int,
                 follower: Follower | None = None, pushed: RayEventsReceiver | None = None) -> None:
        self._heads = heads
        self._pushed = pushed
        self._follower = follower
        self._clusters = clusters
        self._slots = asyncio.Semaphore(max_in_flight)
        self._busy: dict[ClusterKey, asyncio.Task[None]] = {}
        self._ready_seen: dict[ClusterKey, bool | None] = {}
        self._ready_of: dict[ClusterKey, tuple[object, bool | None]] = {}  # cluster object, its ready
        # The last decision per cluster: its inputs, and when it said to decide again. A pass runs
        # at every round's end, many times a second once Serve is read every 2 s per RayService;
        # deciding every cluster again each time was most of the poller's CPU (py-spy).
        self._decided: dict[ClusterKey, tuple[tuple[object, ...], float]] = {}
        self.decisions = 0  # clusters actually decided (observable for tests and the benchmark)

    def _head_ready(self, key: ClusterKey) -> bool | None:
        """The RayCluster's HeadPodReady condition; None when the cluster object is unknown (e.g.
        no watcher in a test): then the head is simply tried."""
        if self._clusters is None:
            return None
        obj = self._clusters.get(s.Kind.RAYCLUSTER, *key)
        seen = self._ready_of.get(key)
        if seen is not None and seen[0] is obj:  # the cache replaces an object on every change
            return seen[1]
        ready = None if obj is None else head_ready(obj)
        self._ready_of[key] = (obj, ready)
        if ready and self._ready_seen.get(key) is False:
            # The head just became Ready: the backoff earned by the head that was not there
            # yet must not delay the first read of the new one.
            self._heads.states[key] = after_head_ready(self._heads.states.get(key, PollState()))
        self._ready_seen[key] = ready
        return ready

    async def run(self) -> None:
        view = self._heads.view
        try:
            while True:
                view.changed.clear()
                wake = self._round_of_decisions()
                timeout = max(0.0, min(wake - time.monotonic(), MAX_SLEEP_S))
                try:
                    await asyncio.wait_for(view.changed.wait(), timeout)
                except TimeoutError:
                    pass
        finally:
            await cancel_and_wait(list(self._busy.values()))
            if self._follower is not None:
                await self._follower.stop()

    def _round_of_decisions(self) -> float:
        heads = self._heads
        settings = heads.settings.poll()
        wake = math.inf
        now, wall_ms = time.monotonic(), int(time.time() * 1000)
        wants = heads.view.wants()
        wanted = set(wants)
        for gone in set(heads.states) - wanted - set(self._busy):  # every owner withdrew
            heads.states.pop(gone, None)
            heads.deleted_jobs.pop(gone, None)
            heads.owed.pop(gone, None)  # no owner left to tell
            self._ready_seen.pop(gone, None)
        for gone in set(self._decided) - wanted:
            del self._decided[gone]
        for gone in set(self._ready_of) - wanted:
            del self._ready_of[gone]
        if self._pushed is not None:
            self._pushed.forget(wanted)
        follower = self._follower
        if follower is not None:
            for gone in follower.clusters() - wanted:
                follower.reconcile(gone, None, None, head_ready=None, now=now)
        for key, want in wants.items():
            wake = min(wake, self._decide(key, want, settings, now=now, wall_ms=wall_ms))
        return wake

    def _inputs(self, key: ClusterKey, want: ClusterWant, ready: bool | None) -> tuple[object, ...]:
        """What a cluster's decision depends on besides the clock. Interests, observations and poll
        states are immutable and replaced on change, so they are compared by identity; the
        follower's and the receiver's counters are mutable and copied."""
        obs, _ = self._heads.view.observation(*key)
        follower, pushed = self._follower, self._pushed
        return (want, ready, obs, self._heads.states.get(key), key in self._heads.owed,
                tuple(follower.ends(key).items()) if follower is not None else (),
                follower.streaming(key) if follower is not None else (),
                tuple(pushed.ends(key).items()) if pushed is not None else (),
                pushed.serve_deaths(key) if pushed is not None else 0)

    def _decide(self, key: ClusterKey, want: ClusterWant, settings: PollSettings, *, now: float,
                wall_ms: int) -> float:
        """Decide one cluster and start its round if due; returns when to decide it again at the
        latest. With the same inputs before that time the decision is the same (its `at` already
        covers what the clock alone changes): nothing to do."""
        heads, follower = self._heads, self._follower
        ready = self._head_ready(key)
        inputs = self._inputs(key, want, ready)
        seen = self._decided.get(key)
        if seen is not None and now < seen[1] and all(
                a is b or a == b for a, b in zip(inputs, seen[0], strict=True)):
            return seen[1]
        self._decided.pop(key, None)
        self.decisions += 1
        obs, _ = heads.view.observation(*key)
        wake, streaming = math.inf, frozenset[str]()
        if follower is not None:
            wake = follower.reconcile(key, want, obs, head_ready=ready, now=now)
            want = with_follow_ends(want, follower.ends(key))
            streaming = follower.streaming(key)
        if self._pushed is not None:
            want = with_pushed_ends(want, self._pushed.ends(key), self._pushed.serve_deaths(key))
        if key in self._busy:
            return wake  # decided again when its round ends
        if key in heads.owed:  # a trigger a NATS error kept from its owners: send it first
            self._busy[key] = asyncio.create_task(self._pay(key))
            return wake
        state = heads.states.get(key, PollState())
        decision = decide_poll(want, state, obs, now=now, wall_ms=wall_ms, settings=settings,
                               head_ready=ready, streaming=streaming)
        if decision.due and decision.plan is not None:
            self._busy[key] = asyncio.create_task(self._poll(key, want, decision.plan, decision.reason))
            return wake
        wake = min(wake, decision.at)
        self._decided[key] = (inputs, wake)
        return wake

    async def _pay(self, key: ClusterKey) -> None:
        try:
            async with self._heads.locks[key]:
                await self._heads.pay(key)
        except NatsError as err:
            log.warning("owed dashboard triggers not published yet", extra={
                "cluster": f"{key[0]}/{key[1]}", "error": repr(err)})
            await asyncio.sleep(PAY_RETRY_S)  # NATS answers "no responders" at once: no spin
        finally:
            self._busy.pop(key, None)
            self._heads.view.changed.set()

    async def _poll(self, key: ClusterKey, want: ClusterWant, plan: PollPlan, reason: str) -> None:
        try:
            async with self._slots:
                await self._heads.poll(want, plan, reason=reason)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("poll round failed", extra={"cluster": f"{key[0]}/{key[1]}"})
            state = self._heads.states.get(key, PollState())
            self._heads.states[key] = state.model_copy(update={
                "last_attempt_at": time.monotonic(), "failures": state.failures + 1})
        finally:
            self._busy.pop(key, None)
            self._heads.view.changed.set()  # decide again for this cluster

