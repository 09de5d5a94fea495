"""The receiver of events pushed by Ray heads (HTTP POST from the head's aggregator agent).

`POST /v1/ray-events/<namespace>/<cluster>/<token>` with a JSON list of RayEvents (see
decisions/ray_events.py for the format and why the job supervisor actor's death is the signal).
The token is checked against HMAC(key, "<namespace>/<cluster>/<uid>") with the live RayCluster's
uid, so a head can only report its own cluster's jobs, and a token dies with its RayCluster. A job
end counts as a `push/<job>` poll_now token for that cluster (`with_pushed_ends`): the scheduler
reads the head at once through the usual path (its lock, one request per part), so a pushed event
never makes the poller trust the head's word for a status, it only says "read now". Only jobs an
owner declared are remembered.

A token sits in the head Pod's env, so its holder is not trusted either; what one can cost is
bounded, in this order, before anything is read: a wrong token or an unknown cluster is 403; a
declared body over MAX_BODY_BYTES is 413 (a chunked one is cut off at that size, 413 too); more
than `rate_per_s` POSTs a second per cluster (burst `burst`) is 429; at most `max_reads` bodies are
read at once. What it remembers is per live cluster (and dropped with it): at most
`max_jobs_per_cluster` job ends and one count of Serve actor deaths.

Answers: 204 taken (also while this replica is a standby: the active replica's log tail and
safety net cover the job, and a non-2xx answer would make the head retry the batch forever), 400
not a list of events. Paths and tokens are never logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from aiohttp import web
from cachetools import LRUCache
from pydantic import ValidationError

from dashboard_poller.view import BusView, ClusterKey
from raybus.decisions.ray_events import (
    MAX_BODY_BYTES,
    PATH_PREFIX,
    RayEventBatch,
    ended_submissions,
    serve_actor_deaths,
    token_ok,
)
from raybus.observability.metrics import RAY_EVENTS_RECEIVED

log = logging.getLogger(__name__)
LiveUid = Callable[[str, str], "str | None"]  # (namespace, cluster) -> the live RayCluster's uid


class _Bucket:
    """A token bucket: `rate` per second, at most `burst` at once."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate, self.burst, self.tokens, self.at = rate, burst, burst, now

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class RayEventsReceiver:
    def __init__(self, view: BusView, *, key: str, active: Callable[[], bool], live_uid: LiveUid,
                 rate_per_s: float = 20.0, burst: float = 40.0, max_reads: int = 4,
                 max_jobs_per_cluster: int = 256, max_clusters: int = 65536) -> None:
        self._view = view
        self._key = key
        self._active = active
        self._live_uid = live_uid
        self._rate, self._burst = rate_per_s, burst
        self._buckets: LRUCache[ClusterKey, _Bucket] = LRUCache(maxsize=max_clusters)
        self._reads = asyncio.Semaphore(max_reads)
        self._max_jobs = max_jobs_per_cluster
        self._ends: dict[ClusterKey, dict[str, int]] = {}
        self._serve: dict[ClusterKey, int] = {}  # pushed deaths of Serve actors per cluster
        self.accepted = 0  # POSTs with a valid token (observable for tests)
        self.rejected = 0
        self.limited = 0  # 413 and 429 answers
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def ends(self, key: ClusterKey) -> Mapping[str, int]:
        return self._ends.get(key, {})

    def serve_deaths(self, key: ClusterKey) -> int:
        return self._serve.get(key, 0)

    def forget(self, keep: set[ClusterKey]) -> None:
        """Drop the counts of clusters nobody wants any more."""
        for gone in set(self._ends) - keep:
            del self._ends[gone]
        for gone in set(self._serve) - keep:
            del self._serve[gone]

    def app(self) -> web.Application:
        # Ray's aggregator sends at most SEND_BATCH_SIZE events a POST (decisions/ray_events.py).
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post(PATH_PREFIX + "/{namespace}/{cluster}/{token}", self._post)
        return app

    async def start(self, host: str, port: int) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)  # the access log would hold tokens
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = self._runner.addresses[0][1] if self._runner.addresses else port  # port 0: the one bound
        log.info("ray events receiver listening", extra={"host": host, "port": self.port})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _refuse(self, status: int, outcome: str) -> web.Response:
        RAY_EVENTS_RECEIVED.labels(outcome=outcome).inc()
        response = web.Response(status=status)
        if status != 400:
            response.force_close()  # the body (or its rest) is never read: no lingering over it
        return response

    async def _post(self, request: web.Request) -> web.Response:
        namespace, cluster = request.match_info["namespace"], request.match_info["cluster"]
        key = (namespace, cluster)
        if not token_ok(self._key, namespace, cluster, self._live_uid(namespace, cluster),
                        request.match_info["token"]):
            self.rejected += 1
            log.warning("ray events with a wrong token refused", extra={"cluster": f"{namespace}/{cluster}"})
            return self._refuse(403, "bad_token")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            self.limited += 1
            return self._refuse(413, "too_large")
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self._rate, self._burst, now)
        if not bucket.take(now):
            self.limited += 1
            return self._refuse(429, "rate_limited")
        async with self._reads:
            try:
                batch = RayEventBatch(events=await request.json())
            except web.HTTPRequestEntityTooLarge:
                self.limited += 1
                return self._refuse(413, "too_large")
            except (ValueError, ValidationError):
                return self._refuse(400, "garbage")
        self.accepted += 1
        ended, serve = ended_submissions(batch.events), serve_actor_deaths(batch.events)
        RAY_EVENTS_RECEIVED.labels(outcome="job_end" if ended else "serve" if serve else "other").inc()
        want = self._view.wants().get(key)
        ended &= set(want.jobs) if want is not None else set()  # only declared jobs are remembered
        if (ended or serve) and self._active():
            self._remember(key, ended, serve)
            log.info("job end or Serve actor death pushed by the head: reading the cluster",
                     extra={"cluster": f"{namespace}/{cluster}", "jobs": sorted(ended)[:10],
                            "serve_deaths": serve})
            self._view.changed.set()
        return web.Response(status=204)

    def _remember(self, key: ClusterKey, ended: set[str], serve: int) -> None:
        counts = self._ends.setdefault(key, {})
        for job in ended:
            counts[job] = counts.pop(job, 0) + 1  # re-inserted: the oldest ends are dropped first
        while len(counts) > self._max_jobs:
            del counts[next(iter(counts))]
        if serve:
            self._serve[key] = self._serve.get(key, 0) + serve
