"""dashboard-poller: the only raybus component that talks to Ray dashboards and Serve proxies.

Reconcilers never call a dashboard. They declare what they need observed (DashboardInterest, last
value per owner on raybus.dashwant.<ctl>.<ns>.<owner>) and ask for writes (DashboardCommand on the
work queue raybus.dashcmd.<ctl>.<ns>.<owner>). This service:
- follows every interest and the last published observation per cluster (view.py);
- reads each declared head when the pure schedule says so (decisions/dashboard_poll.py via
  polling.py), one request at a time per head, with backoff while it does not answer;
- publishes a DashboardObservation on raybus.dash.<ns>.<cluster> only when it changed, and
  triggers every interested owner (heads.py);
- executes commands at most once through the command ledger, reads the state back, publishes
  one DashboardResultMessage per command on raybus.dashresult.<ctl>.<ns>.<owner> and triggers the
  owner (commands.py).
One replica is active at a time (leader.py); standbys keep their view current and take over
within the lease TTL, republishing nothing unchanged and repeating no finished command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta

import aiohttp
import httpx
from nats.aio.client import Client as NATS

from dashboard_poller.admission import DashboardAdmission
from dashboard_poller.commands import CommandRunner
from dashboard_poller.follow import Follower
from dashboard_poller.heads import Heads
from dashboard_poller.leader import LeaderLease
from dashboard_poller.polling import PollScheduler
from dashboard_poller.ray_events import RayEventsReceiver
from dashboard_poller.settings import SERVICE, PollerSettings
from dashboard_poller.view import BusView
from raybus.adapters.kube import KubeClient, new_api_client
from raybus.bus import subjects as s
from raybus.bus.connect import connect_nats
from raybus.bus.ledger import BatchLedger
from raybus.bus.streams import dashboard_command_consumer_config, ensure_leases, ensure_streams
from raybus.observability.tracing import traced_handler
from raybus.runtime.cache import ObjectCache
from raybus.runtime.pull import PullWorkers
from raybus.runtime.settings import CommonSettings
from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)
TAKEOVER_MARGIN_S = 30.0


class DashboardPollerService:
    def __init__(self, settings: PollerSettings) -> None:
        self.settings = settings
        self._nc: NATS | None = None
        self._http: httpx.AsyncClient | None = None
        self._ws: aiohttp.ClientSession | None = None  # log tail streams (httpx has no WebSockets)
        self.follower: Follower | None = None
        self.view: BusView | None = None
        self.clusters: ObjectCache | None = None
        self.heads: Heads | None = None
        self.commands: CommandRunner | None = None
        self.scheduler: PollScheduler | None = None  # while active
        self.lease: LeaderLease | None = None
        self._lease_task: asyncio.Task[None] | None = None
        self._scheduler: asyncio.Task[None] | None = None
        self._workers: PullWorkers | None = None
        self.ray_events: RayEventsReceiver | None = None
        self.admission: DashboardAdmission | None = None
        self._kube: KubeClient | None = None

    @property
    def nc(self) -> NATS:
        assert self._nc is not None
        return self._nc

    @property
    def active(self) -> bool:
        return self._scheduler is not None

    async def start(self) -> None:
        bus = self.settings.bus()
        self._nc = await connect_nats(self.settings.nats_url, self.settings.auth, max_reconnect_attempts=-1,
                                      name=f"{SERVICE}-{self.settings.replica_id}")
        js = self.nc.jetstream()
        await ensure_streams(js, bus)
        kv = await ensure_leases(js, bus)
        ledger = await BatchLedger.open(js, declare=bus.declare, replicas=bus.replicas)
        # Keep-alive pool (README §5: a new connection per request costs ~20 ms client-side).
        self._http = httpx.AsyncClient(limits=httpx.Limits(max_connections=512,
                                                           max_keepalive_connections=256))
        self._ws = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None),
                                         connector=aiohttp.TCPConnector(limit=0))
        self.view = BusView(self.nc)
        await self.view.start()
        self.clusters = ObjectCache(self.nc, kinds=[s.Kind.RAYCLUSTER])
        await self.clusters.start()
        self.heads = Heads(settings=self.settings, http=self._http, js=js, view=self.view)
        if self.settings.admission:
            # Read-only credentials of its own (RBAC: get/list/watch of the Ray kinds): what may be
            # sent to a head is judged on the API server's objects, never on the bus's.
            self._kube = KubeClient(await new_api_client(self.settings.kubeconfig))
            self.admission = DashboardAdmission(self._kube, namespace=self.settings.watch_namespace or None,
                                                wait_s=self.settings.admission_wait_s,
                                                max_deliver=self.settings.max_deliver)
            await self.admission.start()
        self.commands = CommandRunner(self.heads, nc=self.nc, ledger=ledger,
                                      replica_id=self.settings.replica_id,
                                      lease_s=self.settings.ack_wait_s, admission=self.admission)
        if self.settings.ray_events_key:
            self.ray_events = RayEventsReceiver(self.view, key=self.settings.ray_events_key,
                                                active=lambda: self.active, live_uid=self._live_uid)
            await self.ray_events.start(self.settings.ray_events_host, self.settings.ray_events_port)
        self.lease = LeaderLease(kv, replica_id=self.settings.replica_id, ttl_s=self.settings.lease_ttl_s)
        await self._lease_round()
        self._lease_task = asyncio.create_task(self._lease_loop())

    def _live_uid(self, namespace: str, name: str) -> str | None:
        """The RayCluster's uid a head's events token is checked against: the API server's, as the
        poller's own informers hold it (the bus's copy only where admission is off, in tests)."""
        if self.admission is not None:
            live = self.admission.view.get("RayCluster", namespace, name)
        else:
            assert self.clusters is not None
            live = self.clusters.get(s.Kind.RAYCLUSTER, namespace, name)
        uid = ((live or {}).get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.lease_ttl_s / 5)
            try:
                await self._lease_round()
            except Exception:  # never let the loop die: it is what renews the lease
                log.warning("poller lease round failed", exc_info=True)

    async def _lease_round(self) -> None:
        assert self.lease is not None
        try:
            leader = await self.lease.tick()
        except Exception:  # NATS unavailable: act only while the last renewal is fresh
            log.warning("poller lease round failed", exc_info=True)
            leader = self.lease.valid()
        if leader and not self.active:
            try:
                await self._activate()
            except Exception:
                # e.g. the commands consumer's creation timed out in a NATS election. This
                # killed the lease loop, so the poller kept polling but never consumed a
                # dashboard command again (a deleted RayJob's stop_job waited for good). Back to standby; the next round tries again.
                log.warning("activation failed; trying again at the next lease round", exc_info=True)
                await self._deactivate()
        elif not leader and self.active:
            await self._deactivate()

    async def _activate(self) -> None:
        assert self.heads is not None and self.commands is not None
        log.info("active: polling and executing dashboard commands")
        assert self._ws is not None
        # The previous leader (or this process before a restart) acted until at most ttl/2 after
        # its last renewal, and the lease expires ttl after it: twice the TTL plus a margin for
        # clock skew covers every observation whose triggers it may not have sent (heads.py).
        since = datetime.now(UTC) - timedelta(seconds=2 * self.settings.lease_ttl_s + TAKEOVER_MARGIN_S)
        owed = self.heads.owe_recent(since)
        if owed:
            log.info("triggering owners of recent observations again", extra={"clusters": owed})
        self.follower = Follower(self.heads, self._ws)
        self.scheduler = PollScheduler(self.heads, clusters=self.clusters, follower=self.follower,
                                       pushed=self.ray_events, max_in_flight=self.settings.max_rounds_in_flight)
        self._scheduler = asyncio.create_task(self.scheduler.run())
        self._workers = PullWorkers(self.nc, stream=s.STREAM_DASHBOARD_COMMANDS,
                                    config=dashboard_command_consumer_config(self.settings.bus()),
                                    handler=traced_handler("process dashboard command", self.commands.handle),
                                    concurrency=self.settings.max_commands_in_flight, name="dashcmd")
        await self._workers.start()

    async def _deactivate(self) -> None:
        if self.active:
            log.info("inactive: not (or no longer) holding the poller lease")
        if self._workers is not None:
            await self._workers.stop()
            self._workers = None
        if self._scheduler is not None:
            await cancel_and_wait([self._scheduler])
            self._scheduler = self.scheduler = None

    async def stop(self) -> None:
        if self._lease_task is not None:
            await cancel_and_wait([self._lease_task])
        await self._deactivate()
        if self.ray_events is not None:
            await self.ray_events.stop()
        if self.lease is not None:
            with contextlib.suppress(Exception):
                await self.lease.release()  # a standby takes over now, not after the TTL
        for part in (self.view, self.clusters, self.admission):
            if part is not None:
                with contextlib.suppress(Exception):
                    await part.stop()
        if self._kube is not None:
            with contextlib.suppress(Exception):
                await self._kube.close()
        if self._http is not None:
            await self._http.aclose()
        if self._ws is not None:
            await self._ws.close()
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()


def create_app(settings: CommonSettings) -> DashboardPollerService:
    if not isinstance(settings, PollerSettings):
        settings = PollerSettings(**settings.model_dump())
    return DashboardPollerService(settings)
