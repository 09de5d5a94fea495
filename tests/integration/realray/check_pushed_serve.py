"""A measurement, not part of `make test` (`make measure-serve-push`, inside the same loopback
network namespace): a Serve replica's death pushed by a real Ray 2.60 head makes the poller read
Serve at the fast cadence, so the app's change reaches the bus about one read after the head shows
it. Beside two CPU hogs Serve itself took over 60 s to mark the app (one run), so this stays out of
the suite; its numbers are in the README ("Job ends pushed by Ray")."""

from __future__ import annotations

import contextlib
import time

import httpx
import pytest
from nats.aio.client import Client as NATS

from dashboard_poller.app import DashboardPollerService
from dashboard_poller.settings import PollerSettings
from raybus.adapters.dashboard import DashboardTransientError, RayDashboardClient
from raybus.bus import subjects as s
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.poller_kit import FAST_POLLER, ObservationTap, Reconciler, until

from .conftest import RayHead

pytestmark = pytest.mark.integration

async def _async(value: bool) -> bool:
    return value


async def test_a_pushed_serve_replica_death_makes_the_poller_see_the_app_change(
        nats_server: NatsServer, ray_head: RayHead, dashboard: RayDashboardClient, nc: NATS,
        tap: ObservationTap) -> None:
    """A replica's process dies: the head pushes the death (namespace "serve") at once, Serve's own
    status turns UNHEALTHY seconds later; the poller, fast for fresh_window_s after the push, sees it
    within about a read interval of the head's change, not at the 120 s safety net."""
    settings = PollerSettings(
        nats_url=nats_server.url, replica_id="p0", dashboard_url_template=ray_head.dashboard,
        proxy_url_template=ray_head.proxy,
        **{**FAST_POLLER, "fast_interval_s": 1.0, "read_timeout_s": 10.0, "slow_interval_s": 120.0,
           "fresh_window_s": 20.0, "backoff_cap_s": 30.0, "lease_ttl_s": 10.0,
           "serve_interval_s": 0.0,  # the push alone: no Serve cadence
           "ray_events_key": ray_head.events_key, "ray_events_host": "127.0.0.1",
           "ray_events_port": ray_head.events_port})
    config = {"applications": [{"name": "app1", "route_prefix": "/", "import_path": "realray_app:app"}]}

    async def deployed() -> bool:
        # Serve's cold start on a loaded machine may answer 500 "The actor never ran - it was
        # cancelled before it started running" (seen in a run beside two CPU hogs): as raybus's
        # service reconciler does, put the config again.
        try:
            await dashboard.update_deployments(config)
        except DashboardTransientError:
            return False
        return True

    async def running_on_head() -> bool:
        app = (await dashboard.get_multi_application_status()).get("app1")
        return app is not None and app.status == "RUNNING"

    poller: DashboardPollerService | None = None
    try:
        await until(deployed, timeout=240, what="the cold-start Serve PUT accepted")
        await until(running_on_head, timeout=240, what="app1 RUNNING on the head")
        poller = DashboardPollerService(settings)
        await poller.start()
        owner = Reconciler(nc, owner="rs", controller=s.Controller.SERVICE)
        await owner.want(serve=True)

        def app_status() -> str | None:
            for _, obs in reversed(tap.seen):
                if obs.observation.serve_apps is not None and "app1" in obs.observation.serve_apps:
                    return obs.observation.serve_apps["app1"].status
            return None

        await until(lambda: _async(app_status() == "RUNNING"), timeout=60, what="app1 RUNNING on the bus")
        # Wait until the first reads are over and Serve sits at the slow cadence.
        await until(lambda: _async(
            poller.heads is not None and ("ns", "rc") in poller.heads.states and
            poller.heads.states[("ns", "rc")].last_success_at is not None), timeout=30, what="a read")
        seen_before = len(tap.seen)
        killed_at = time.time()
        async with httpx.AsyncClient() as http:
            with contextlib.suppress(httpx.HTTPError):
                await http.get(ray_head.proxy + "/?die=1", timeout=10)
        head_changed_at: list[float] = []

        async def changed_on_head() -> bool:  # the head's own status, read beside the poller
            app = (await dashboard.get_multi_application_status()).get("app1")
            if app is None or app.status != "RUNNING":
                head_changed_at.append(time.time())
                return True
            return False

        await until(changed_on_head, timeout=60, what="app1 no longer RUNNING on the head")

        async def changed_on_bus() -> bool:
            return any(o.observation.serve_apps and "app1" in o.observation.serve_apps
                       and o.observation.serve_apps["app1"].status != "RUNNING" for _, o in tap.seen[seen_before:])

        await until(changed_on_bus, timeout=60, what="the change on the bus")
        seen_at = next(o.observed_at.timestamp() for _, o in tap.seen[seen_before:]
                       if o.observation.serve_apps and o.observation.serve_apps["app1"].status != "RUNNING")
        print(f"\nreal head, Serve replica killed: head status changed {head_changed_at[0] - killed_at:.2f} s "
              f"after the kill (read every 0.05 s), the poller published it "
              f"{seen_at - head_changed_at[0]:.2f} s after that ({seen_at - killed_at:.2f} s after the kill); "
              f"POSTs {poller.ray_events.accepted if poller.ray_events else 0}")
        assert seen_at - killed_at < 60  # the safety net is 120 s away: the push made it
        assert seen_at - head_changed_at[0] < 5  # fast after the push: about one read interval
    finally:
        if poller is not None:
            await poller.stop()
        await dashboard.shutdown_serve()

        async def proxy_gone() -> bool:
            async with httpx.AsyncClient() as http:
                try:
                    await http.get(ray_head.proxy + "/-/healthz", timeout=2)
                except httpx.HTTPError:
                    return True
            return False

        await until(proxy_gone, timeout=120, what="Serve shut down (test_serve starts without it)")
