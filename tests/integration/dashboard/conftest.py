"""The simulated dashboards on a real loopback port, and a real httpx client talking to them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx
import nats
import pytest
from aiohttp import web
from nats.aio.client import Client as NATS

from raybus.adapters.dashboard import RayDashboardClient, RayHttpProxyClient, render_base_url
from raybus.bus.streams import ensure_streams
from raybus_sim.dashboard import ClusterSettings, DashboardRegistry, create_dashboard_app
from raybus_sim.testing.servers import NatsServer

if TYPE_CHECKING:
    from tests.integration.dashboard.poller_kit import ObservationTap

# Fast timings so lifecycle tests finish in well under a second per transition.
FAST = ClusterSettings(
    job_pending_s=0.05,
    job_running_s=0.05,
    stop_delay_s=0.1,
    ghost_window_s=0.5,
    ghost_delay_s=0.2,
    serve_deploy_s=0.3,
    serve_unchanged_blip_s=0.05,
    serve_delete_s=0.1,
    serve_delete_unserved_s=0.5,
    timeout_sleep_s=1.0,
    serve_first_put_s=0.0,  # latency tests set their own (test_latency.py)
    serve_put_s=0.0,
    serve_delete_running_s=0.0,
    serve_delete_idle_s=0.0,
    # The real head's ~3 s log-tail close lag is asserted in test_log_tail.py on its own; the other
    # tests here are about what ends a stream, not when.
    log_tail_close_lag_s=0.0,
)


@dataclass
class Sim:
    registry: DashboardRegistry
    port: int
    http: httpx.AsyncClient

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def template(self) -> str:
        return self.root + "/{namespace}/{cluster}"

    def client(self, cluster: str = "rc", *, namespace: str = "ns", **kwargs: object) -> RayDashboardClient:
        base = render_base_url(self.template, namespace=namespace, cluster=cluster)
        kwargs.setdefault("retry_wait_s", 0.01)
        return RayDashboardClient(self.http, base_url=base, **kwargs)

    def proxy(self, cluster: str = "rc", *, namespace: str = "ns") -> RayHttpProxyClient:
        return RayHttpProxyClient(self.http, base_url=f"{self.root}/{namespace}/{cluster}/serve")

    async def control(self, method: str, path: str, body: object = None) -> httpx.Response:
        response = await self.http.request(method, f"{self.root}/sim/dashboards{path}", json=body)
        assert response.status_code < 300, response.text
        return response


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    registry = DashboardRegistry(defaults=FAST)
    registry.head_up("ns", "rc")
    runner = web.AppRunner(create_dashboard_app(registry))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = int(runner.addresses[0][1])
    async with httpx.AsyncClient() as http:
        yield Sim(registry=registry, port=port, http=http)
    await runner.cleanup()


@pytest.fixture
async def nc(nats_server: NatsServer) -> AsyncIterator[NATS]:
    """A NATS connection with raybus's streams declared, as every process declares them."""
    conn = await nats.connect(nats_server.url)
    await ensure_streams(conn.jetstream())
    yield conn
    await conn.drain()


@pytest.fixture
async def tap(nc: NATS) -> AsyncIterator[ObservationTap]:
    """Every dashboard observation published while the test runs."""
    from tests.integration.dashboard.poller_kit import ObservationTap  # poller_kit imports this module

    t = ObservationTap()
    await t.start(nc)
    yield t
    await t.stop()
