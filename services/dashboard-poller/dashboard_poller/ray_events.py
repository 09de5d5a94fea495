"""The receiver of events pushed by Ray heads (HTTP POST from the head's aggregator agent).

`POST /v1/ray-events/<namespace>/<cluster>/<token>` with a JSON list of RayEvents (see
decisions/ray_events.py for the format and why the job supervisor actor's death is the signal).
The token is checked against HMAC(key, "<namespace>/<cluster>"), so a head can only report its
own cluster's jobs; a wrong token is 403 and nothing is read. A job end counts as a `push/<job>`
poll_now token for that cluster (`with_pushed_ends`): the scheduler reads the head at once through
the usual path (its lock, one request per part), so a pushed event never makes the poller trust
the head's word for a status, it only says "read now". Jobs nobody declared are ignored.

Answers: 204 taken (also while this replica is a standby: the active replica's log tail and
safety net cover the job, and a non-2xx answer would make the head retry the batch forever), 403
bad token, 400 not a list of events. Paths and tokens are never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from aiohttp import web
from pydantic import ValidationError

from dashboard_poller.view import BusView, ClusterKey
from raybus.decisions.ray_events import (
    PATH_PREFIX,
    RayEventBatch,
    ended_submissions,
    serve_actor_deaths,
    token_ok,
)
from raybus.observability.metrics import RAY_EVENTS_RECEIVED

log = logging.getLogger(__name__)


class RayEventsReceiver:
    def __init__(self, view: BusView, *, key: str, active: Callable[[], bool]) -> None:
        self._view = view
        self._key = key
        self._active = active
        self._ends: dict[ClusterKey, dict[str, int]] = {}
        self._serve: dict[ClusterKey, int] = {}  # pushed deaths of Serve actors per cluster
        self.accepted = 0  # POSTs with a valid token (observable for tests)
        self.rejected = 0
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
        app = web.Application(client_max_size=16 * 1024 * 1024)  # Ray sends up to 1000 events a POST
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

    async def _post(self, request: web.Request) -> web.Response:
        namespace, cluster = request.match_info["namespace"], request.match_info["cluster"]
        if not token_ok(self._key, namespace, cluster, request.match_info["token"]):
            self.rejected += 1
            RAY_EVENTS_RECEIVED.labels(outcome="bad_token").inc()
            log.warning("ray events with a wrong token refused", extra={"cluster": f"{namespace}/{cluster}"})
            return web.Response(status=403)
        try:
            batch = RayEventBatch(events=await request.json())
        except (ValueError, ValidationError):
            RAY_EVENTS_RECEIVED.labels(outcome="garbage").inc()
            return web.Response(status=400)
        self.accepted += 1
        ended, serve = ended_submissions(batch.events), serve_actor_deaths(batch.events)
        RAY_EVENTS_RECEIVED.labels(outcome="job_end" if ended else "serve" if serve else "other").inc()
        if (ended or serve) and self._active():
            key = (namespace, cluster)
            counts = self._ends.setdefault(key, {})
            for job in ended:
                counts[job] = counts.get(job, 0) + 1
            if serve:
                self._serve[key] = self._serve.get(key, 0) + serve
            log.info("job end or Serve actor death pushed by the head: reading the cluster",
                     extra={"cluster": f"{namespace}/{cluster}", "jobs": sorted(ended)[:10],
                            "serve_deaths": serve})
            self._view.changed.set()
        return web.Response(status=204)
