"""Log tail streams of followed jobs: the job-end signal of HTTPMode/InteractiveMode.

What to open and close, and when to retry, is decided in pure code (`decide_follows`,
`after_follow_end` in decisions/dashboard_poll.py); this module holds the connections. Each
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
import time
from collections.abc import Mapping

import aiohttp

from dashboard_poller.heads import Heads
from dashboard_poller.view import ClusterKey
from raybus.adapters.dashboard import DashboardError, render_base_url
from raybus.adapters.dashboard_tail import open_log_tail
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.decisions.dashboard_poll import ClusterWant, FollowState, after_follow_end, decide_follows
from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)
FollowKey = tuple[ClusterKey, str]  # (namespace, cluster), job id


class Follower:
    def __init__(self, heads: Heads, session: aiohttp.ClientSession) -> None:
        self._heads = heads
        self._session = session
        self._streams: dict[FollowKey, asyncio.Task[None]] = {}
        self.states: dict[FollowKey, FollowState] = {}
        self._ends: dict[ClusterKey, dict[str, int]] = {}
        self.opened = 0  # handshakes attempted, observable for tests and the benchmark

    def streaming(self, key: ClusterKey) -> frozenset[str]:
        return frozenset(job for (k, job) in self._streams if k == key)

    def ends(self, key: ClusterKey) -> Mapping[str, int]:
        return self._ends.get(key, {})

    def clusters(self) -> set[ClusterKey]:
        return {k for k, _ in self._streams} | {k for k, _ in self.states} | set(self._ends)

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def reconcile(self, key: ClusterKey, want: ClusterWant | None, observation: ClusterObservation | None,
                  *, head_ready: bool | None, now: float) -> float:
        """Open/close this cluster's streams as decided; returns when to decide again at the latest."""
        followed = set(want.follow) if want is not None else set()
        for stale in [fk for fk in self.states if fk[0] == key and fk[1] not in followed]:
            del self.states[stale]
        ends = self._ends.get(key)
        if ends is not None:
            for job in [j for j in ends if j not in followed]:
                del ends[job]
            if not ends:
                del self._ends[key]
        plan = decide_follows(want, observation, streaming=self.streaming(key),
                              follows={job: st for (k, job), st in self.states.items() if k == key},
                              now=now, head_ready=head_ready)
        for job in plan.close:
            task = self._streams.pop((key, job), None)
            if task is not None:
                task.cancel()
        limit = self._heads.settings.max_follow_streams
        for job in plan.open:
            if len(self._streams) >= limit:
                log.warning("follow stream limit reached; the job's end is seen by polling",
                            extra={"cluster": f"{key[0]}/{key[1]}", "job_id": job, "limit": limit})
                break
            self._streams[(key, job)] = asyncio.create_task(self._follow(key, job))
        return plan.at

    async def _follow(self, key: ClusterKey, job: str) -> None:
        heads, settings = self._heads, self._heads.settings
        base = render_base_url(settings.dashboard_url_template, namespace=key[0], cluster=key[1])
        opened_at = time.monotonic()
        try:
            async with heads.locks[key]:  # the handshake is one request, never beside another
                heads.requests += 1
                self.opened += 1
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
        self.states[(key, job)] = after_follow_end(self.states.get((key, job), FollowState()),
                                                   opened_at=opened_at, now=now, settings=settings.poll())
        ends = self._ends.setdefault(key, {})
        ends[job] = ends.get(job, 0) + 1
        if self._streams.get((key, job)) is asyncio.current_task():
            del self._streams[(key, job)]
        log.info("log tail stream ended: reading the cluster", extra={
            "cluster": f"{key[0]}/{key[1]}", "job_id": job, "how": how[:300],
            "open_s": round(now - opened_at, 1)})
        heads.view.changed.set()

    async def stop(self) -> None:
        tasks = list(self._streams.values())
        self._streams.clear()
        await cancel_and_wait(tasks)
