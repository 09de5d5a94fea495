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

    def _head_ready(self, key: ClusterKey) -> bool | None:
        """The RayCluster's HeadPodReady condition; None when the cluster object is unknown (e.g.
        no watcher in a test): then the head is simply tried."""
        if self._clusters is None:
            return None
        obj = self._clusters.get(s.Kind.RAYCLUSTER, *key)
        ready = None if obj is None else head_ready(obj)
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
        heads, settings = self._heads, self._heads.settings.poll()
        wake = math.inf
        now, wall_ms = time.monotonic(), int(time.time() * 1000)
        wants = heads.view.wants()
        wanted = set(wants)
        for gone in set(heads.states) - wanted - set(self._busy):  # every owner withdrew
            heads.states.pop(gone, None)
            heads.deleted_jobs.pop(gone, None)
            heads.owed.pop(gone, None)  # no owner left to tell
            self._ready_seen.pop(gone, None)
        if self._pushed is not None:
            self._pushed.forget(wanted)
        follower = self._follower
        if follower is not None:
            for gone in follower.clusters() - wanted:
                follower.reconcile(gone, None, None, head_ready=None, now=now)
        for key, want in wants.items():
            ready = self._head_ready(key)
            obs, _ = heads.view.observation(*key)
            streaming: frozenset[str] = frozenset()
            if follower is not None:
                wake = min(wake, follower.reconcile(key, want, obs, head_ready=ready, now=now))
                want = with_follow_ends(want, follower.ends(key))
                streaming = follower.streaming(key)
            if self._pushed is not None:
                want = with_pushed_ends(want, self._pushed.ends(key), self._pushed.serve_deaths(key))
            if key in self._busy:
                continue
            if key in heads.owed:  # a trigger a NATS error kept from its owners: send it first
                self._busy[key] = asyncio.create_task(self._pay(key))
                continue
            state = heads.states.get(key, PollState())
            decision = decide_poll(want, state, obs, now=now, wall_ms=wall_ms, settings=settings,
                                   head_ready=ready, streaming=streaming)
            if decision.due and decision.plan is not None:
                task = asyncio.create_task(self._poll(key, want, decision.plan, decision.reason))
                self._busy[key] = task
            else:
                wake = min(wake, decision.at)
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

