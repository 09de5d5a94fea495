"""Log tail streams of followed jobs: the job-end signal of HTTPMode/InteractiveMode.

What to open and close, and when to retry, is decided in pure code (`decide_follows`,
`after_follow_end` in decisions/dashboard_follow.py); this module holds the connections. Each
stream's handshake takes the head's lock like every other request, so a head still never sees two
raybus requests at once; the open stream is then a passive connection (the head pushes log lines
and closes it when the job is terminal), exactly the one `ray job submit` holds in K8sJobMode's
submitter container. When a stream ends the scheduler is woken and `ends(key)` has grown, which
`with_follow_ends` turns into a poll_now token: the cluster is read at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Mapping

import aiohttp

from dashboard_poller.heads import Heads
from dashboard_poller.view import ClusterKey
from raybus.adapters.dashboard import DashboardError, render_base_url
from raybus.adapters.dashboard_tail import open_log_tail
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.decisions.dashboard_follow import FollowState, after_follow_end, decide_follows
from raybus.decisions.dashboard_poll import ClusterWant
from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class Follower:
    def __init__(self, heads: Heads, session: aiohttp.ClientSession) -> None:
        self._heads = heads
        self._session = session
        # Per cluster, so a round's per-cluster work does not scan every stream of every cluster.
        self._streams: dict[ClusterKey, dict[str, asyncio.Task[None]]] = {}
        self.states: dict[ClusterKey, dict[str, FollowState]] = {}
        self._ends: dict[ClusterKey, dict[str, int]] = {}

    def streaming(self, key: ClusterKey) -> frozenset[str]:
        return frozenset(self._streams.get(key, ()))

    def ends(self, key: ClusterKey) -> Mapping[str, int]:
        return self._ends.get(key, {})

    def clusters(self) -> set[ClusterKey]:
        return set(self._streams) | set(self.states) | set(self._ends)

    @property
    def open_streams(self) -> int:
        return sum(len(jobs) for jobs in self._streams.values())

    def reconcile(self, key: ClusterKey, want: ClusterWant | None, observation: ClusterObservation | None,
                  *, head_ready: bool | None, now: float) -> float:
        """Open/close this cluster's streams as decided; returns when to decide again at the latest."""
        followed = set(want.follow) if want is not None else set()
        if not followed and key not in self._streams and key not in self.states and key not in self._ends:
            return math.inf  # nothing followed here, nothing held
        for table in (self.states, self._ends):
            jobs = table.get(key)
            if jobs is not None:
                for job in [j for j in jobs if j not in followed]:
                    del jobs[job]
                if not jobs:
                    del table[key]
        plan = decide_follows(want, observation, streaming=self.streaming(key),
                              follows=self.states.get(key, {}), now=now, head_ready=head_ready)
        streams = self._streams.get(key, {})
        for job in plan.close:
            task = streams.pop(job, None)
            if task is not None:
                task.cancel()
        limit = self._heads.settings.max_follow_streams
        for job in plan.open:
            if self.open_streams >= limit:
                log.warning("follow stream limit reached; the job's end is seen by polling",
                            extra={"cluster": f"{key[0]}/{key[1]}", "job_id": job, "limit": limit})
                break
            streams[job] = asyncio.create_task(self._follow(key, job))
        if streams:
            self._streams[key] = streams
        else:
            self._streams.pop(key, None)
        return plan.at

    async def _follow(self, key: ClusterKey, job: str) -> None:
        heads, settings = self._heads, self._heads.settings
        base = render_base_url(settings.dashboard_url_template, namespace=key[0], cluster=key[1])
        opened_at = time.monotonic()
        try:
            async with heads.locks[key]:  # the handshake is one request, never beside another
                heads.requests += 1
                tail = await open_log_tail(self._session, base_url=base, job_id=job,
                                           connect_timeout_s=settings.read_timeout_s,
                                           heartbeat_s=settings.follow_heartbeat_s or None)
            opened_at = time.monotonic()
            try:
                end = await tail.wait_closed()
            finally:
                with contextlib.suppress(Exception):
                    await tail.close()
            how = f"{end.detail} (code {end.code}, {end.frames} log frames)"
        except DashboardError as exc:
            how = f"could not open: {exc}"
        except (aiohttp.ClientError, OSError) as exc:
            how = f"broken: {type(exc).__name__}: {exc}"
        now = time.monotonic()
        states = self.states.setdefault(key, {})
        states[job] = after_follow_end(states.get(job, FollowState()), opened_at=opened_at, now=now,
                                       settings=settings.poll())
        ends = self._ends.setdefault(key, {})
        ends[job] = ends.get(job, 0) + 1
        streams = self._streams.get(key, {})
        if streams.get(job) is asyncio.current_task():
            del streams[job]
            if not streams:
                del self._streams[key]
        log.info("log tail stream ended: reading the cluster", extra={
            "cluster": f"{key[0]}/{key[1]}", "job_id": job, "how": how[:300],
            "open_s": round(now - opened_at, 1)})
        heads.view.changed.set()

    async def stop(self) -> None:
        tasks = [task for jobs in self._streams.values() for task in jobs.values()]
        self._streams.clear()
        await cancel_and_wait(tasks)
