"""dashboard-poller: the only component that talks to Ray dashboards.

Implemented so far: reachability of every RayJob/RayService-owned cluster's dashboard, probed
with the KubeRay client timeout (2 s), exponential backoff while unreachable, and a
DashboardObservation published on raybus.dash.<ns>.<cluster> only when reachability changes.
On start it reads the last published observation per cluster (RAYBUS_DASHBOARD keeps the last per
subject), so a restart republishes nothing that did not change. Job and Serve status polling
arrive with the RayJob/RayService controllers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime

import httpx
import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from raybus.adapters.dashboard import DashboardError, RayDashboardClient
from raybus.bus import subjects as s
from raybus.bus.codec import encode, publish_headers
from raybus.bus.envelopes import DashboardObservation, ObjectKey
from raybus.bus.streams import ensure_streams
from raybus.decisions.dashboard import next_delay, poll_targets
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.runtime.cache import ObjectCache
from raybus.runtime.service import CommonSettings
from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class DashboardPoller:
    def __init__(self, settings: CommonSettings, *, url_template: str, interval_s: float = 3.0,
                 max_backoff_s: float = 60.0) -> None:
        self.settings = settings
        self._template = url_template
        self._interval = interval_s
        self._cap = max_backoff_s
        self._nc: NATS | None = None
        self._http: httpx.AsyncClient | None = None
        self._cache: ObjectCache | None = None
        self._task: asyncio.Task[None] | None = None
        self._published: dict[tuple[str, str], bool] = {}
        self._failures: dict[tuple[str, str], int] = {}
        self._due: dict[tuple[str, str], float] = {}

    async def start(self) -> None:
        self._nc = await nats.connect(self.settings.nats_url, max_reconnect_attempts=-1)
        await ensure_streams(self._nc.jetstream())
        self._http = httpx.AsyncClient()
        await self._load_published()
        self._cache = ObjectCache(self._nc, kinds=[s.Kind.RAYCLUSTER])
        await self._cache.start()
        self._task = asyncio.create_task(self._loop())

    async def _load_published(self) -> None:
        assert self._nc is not None
        js = self._nc.jetstream()
        last = (await js.stream_info(s.STREAM_DASHBOARD)).state.last_seq
        if last == 0:
            return
        done = asyncio.Event()

        async def on_msg(msg: Msg) -> None:
            with contextlib.suppress(ValidationError):
                obs = DashboardObservation.model_validate_json(msg.data)
                self._published[(obs.key.namespace, obs.key.name)] = obs.observation.reachable
            if msg.metadata.sequence.stream >= last:
                done.set()

        sub = await js.subscribe(s.dashboard_filter(), ordered_consumer=True, cb=on_msg,
                                 deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
        await asyncio.wait_for(done.wait(), 30)
        await sub.unsubscribe()

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        if self._cache is not None:
            await self._cache.stop()
        if self._http is not None:
            await self._http.aclose()
        if self._nc is not None:
            await self._nc.drain()

    async def _loop(self) -> None:
        assert self._cache is not None
        while True:
            targets = poll_targets(self._cache.objects(s.Kind.RAYCLUSTER))
            now = time.monotonic()
            due = [t for t in targets if self._due.get(t, 0.0) <= now]
            await asyncio.gather(*(self._probe(t) for t in due))
            for gone in set(self._due) - set(targets):
                self._due.pop(gone, None)
                self._failures.pop(gone, None)
            await asyncio.sleep(0.5)

    async def _probe(self, target: tuple[str, str]) -> None:
        assert self._http is not None
        namespace, cluster = target
        client = RayDashboardClient.for_cluster(self._http, template=self._template,
                                                namespace=namespace, cluster=cluster, get_attempts=1)
        try:
            await client.get_version()
            reachable = True
            self._failures[target] = 0
        except DashboardError as exc:
            reachable = False
            self._failures[target] = self._failures.get(target, 0) + 1
            log.info("dashboard unreachable", extra={"cluster": f"{namespace}/{cluster}",
                                                      "error": str(exc)[:200]})
        self._due[target] = time.monotonic() + next_delay(
            self._failures[target], base_s=self._interval, cap_s=self._cap)
        if self._published.get(target) != reachable:
            await self._publish(namespace, cluster, reachable=reachable)

    async def _publish(self, namespace: str, cluster: str, *, reachable: bool) -> None:
        assert self._nc is not None
        obs = DashboardObservation(
            key=ObjectKey(namespace=namespace, name=cluster), kind="raycluster",
            observation=ClusterObservation(namespace=namespace, cluster=cluster, reachable=reachable),
            observed_at=datetime.now(UTC))
        await self._nc.jetstream().publish(s.dashboard_subject(namespace, cluster), encode(obs),
                                           headers=publish_headers())
        self._published[(namespace, cluster)] = reachable
        log.info("dashboard reachability changed",
                 extra={"cluster": f"{namespace}/{cluster}", "reachable": reachable})


def create_app(settings: CommonSettings, *, url_template: str, interval_s: float = 3.0) -> DashboardPoller:
    return DashboardPoller(settings, url_template=url_template, interval_s=interval_s)
