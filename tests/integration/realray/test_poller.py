"""The dashboard-poller against a real Ray 2.60 head: a followed job's observations, and how long
after the job's end_time its end reaches the bus when only the log tail's close can tell (the
safety-net poll is 60 s away). The real head closes the tail ~3 s after end_time, so this is the
floor of an HTTPMode RayJob's end latency."""

from __future__ import annotations

import time
import uuid

import pytest
from nats.aio.client import Client as NATS

from dashboard_poller.app import DashboardPollerService
from dashboard_poller.settings import PollerSettings
from raybus.adapters.dashboard import RayDashboardClient
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.poller_kit import FAST_POLLER, ObservationTap, Reconciler, until

from .conftest import RayHead

pytestmark = pytest.mark.integration


async def test_a_followed_job_end_reaches_the_bus_after_the_tail_closes(
        nats_server: NatsServer, ray_head: RayHead, dashboard: RayDashboardClient, nc: NATS,
        tap: ObservationTap) -> None:
    job_id = f"realray-{uuid.uuid4().hex[:8]}"
    await dashboard.submit_job(JobSubmitRequest(entrypoint='python -c "import time; time.sleep(15)"',
                                                submission_id=job_id))

    async def running() -> bool:
        return (await dashboard.get_job_info(job_id)).status == "RUNNING"

    await until(running, timeout=120, what="the job RUNNING on the head")
    owner = Reconciler(nc)
    await owner.want(jobs=[job_id], follow_jobs=[job_id])
    settings = PollerSettings(
        nats_url=nats_server.url, replica_id="p0", dashboard_url_template=ray_head.dashboard,
        proxy_url_template=ray_head.proxy,
        **{**FAST_POLLER, "read_timeout_s": 10.0, "slow_interval_s": 60.0, "fresh_window_s": 60.0})
    poller = DashboardPollerService(settings)
    await poller.start()
    try:
        async def observed(status: str) -> bool:
            return bool(tap.jobs(job_id)) and tap.jobs(job_id)[-1] == status

        async def streaming() -> bool:
            return poller.follower is not None and poller.follower.open_streams == 1

        await until(lambda: observed("RUNNING"), timeout=30, what=f"RUNNING observed (seen {tap.jobs(job_id)})")
        await until(streaming, timeout=30, what="the job's log tail open")
        await until(lambda: observed("SUCCEEDED"), timeout=50, what="SUCCEEDED observed")
        seen_at = time.time()
        info = await dashboard.get_job_info(job_id)
        assert info.end_time is not None
        latency = seen_at - info.end_time / 1000
        print(f"\nreal head: job end_time -> SUCCEEDED on the bus: {latency:.2f} s")
        assert 0 < latency < 15, latency  # well before the 60 s safety net: the tail's close did it
        statuses = tap.jobs(job_id)
        assert "FAILED" not in statuses and statuses[-1] == "SUCCEEDED"
    finally:
        await poller.stop()
    await dashboard.delete_job(job_id)
