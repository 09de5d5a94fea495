"""Job ends pushed by a real Ray 2.60 head: the head exports its events to the dashboard-poller's
receiver (the env raybus's head Pods carry, set by conftest at `ray start`), and the poller reads a
job the moment its supervisor actor's death is pushed. No follow stream is held and the safety
net is 120 s away, so nothing but the push can make the poller read in time. Measures the job's
end_time (the head's own clock) -> the observation published on the bus (observed_at)."""

from __future__ import annotations

import statistics
import uuid

import httpx
import pytest
from nats.aio.client import Client as NATS

from dashboard_poller.app import DashboardPollerService
from dashboard_poller.settings import PollerSettings
from raybus.adapters.dashboard import RayDashboardClient
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.decisions.dashboard_poll import TERMINAL_JOB
from raybus.decisions.ray_events import cluster_token, export_path
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.poller_kit import (
    FAST_POLLER,
    ObservationTap,
    Reconciler,
    publish_cluster,
    until,
)

from .conftest import EVENTS_CLUSTER, EVENTS_NS, EVENTS_UID, RayHead

pytestmark = pytest.mark.integration
JOBS = 6


def _first_terminal(tap: ObservationTap, job_id: str) -> tuple[str, float] | None:
    for _, obs in tap.seen:
        job = obs.observation.jobs.get(job_id)
        if job is not None and job.status in TERMINAL_JOB:
            return job.status, obs.observed_at.timestamp()
    return None


async def test_pushed_job_ends_reach_the_bus_within_a_second(
        nats_server: NatsServer, ray_head: RayHead, dashboard: RayDashboardClient, nc: NATS,
        tap: ObservationTap) -> None:
    settings = PollerSettings(
        nats_url=nats_server.url, replica_id="p0", dashboard_url_template=ray_head.dashboard,
        proxy_url_template=ray_head.proxy,
        **{**FAST_POLLER, "fast_interval_s": 1.0, "read_timeout_s": 10.0, "slow_interval_s": 120.0,
           "fresh_window_s": 1.0, "backoff_cap_s": 30.0, "lease_ttl_s": 10.0, "ray_events_key": ray_head.events_key,
           "ray_events_host": "127.0.0.1", "ray_events_port": ray_head.events_port})
    await publish_cluster(nc, EVENTS_CLUSTER, EVENTS_UID, namespace=EVENTS_NS)  # its token's uid
    poller = DashboardPollerService(settings)
    await poller.start()
    receiver = poller.ray_events
    assert receiver is not None and poller.active
    owner = Reconciler(nc)
    run = uuid.uuid4().hex[:6]
    # One job at a time (this head shares 2 busy cores): four SUCCEEDED, one FAILED, one STOPPED.
    entrypoints = {f"push-{run}-{i}": f'python -c "import time, sys; time.sleep(3); sys.exit({int(i == 3)})"'
                   for i in range(JOBS)}
    stopped = f"push-{run}-{JOBS - 1}"
    try:
        base = f"http://127.0.0.1:{ray_head.events_port}"
        async with httpx.AsyncClient() as http:
            # Another cluster's path with this cluster's token (or no valid token) is refused.
            token = cluster_token(ray_head.events_key, EVENTS_NS, EVENTS_CLUSTER, EVENTS_UID)
            for path in (export_path(EVENTS_NS, "other", token), export_path(EVENTS_NS, EVENTS_CLUSTER, "x" * 40)):
                assert (await http.post(base + path, json=[])).status_code == 403
        assert receiver.rejected == 2
        for job_id, entrypoint in entrypoints.items():
            if job_id == stopped:
                entrypoint = 'python -c "import time; time.sleep(300)"'
            await dashboard.submit_job(JobSubmitRequest(entrypoint=entrypoint, submission_id=job_id))
            await owner.want(jobs=sorted(j for j in entrypoints if j <= job_id))
            # The head's publisher backs off (up to 5 s) while nobody listened: wait for a POST.
            await until(lambda: _async(receiver.accepted > 0), timeout=60, what="the head's first POST")
            if job_id == stopped:
                async def stoppable() -> bool:
                    return (await dashboard.get_job_info(stopped)).status == "RUNNING"

                await until(stoppable, timeout=180, what="the last job RUNNING")
                await dashboard.stop_job(stopped)

            async def ended(job_id: str = job_id) -> bool:
                return _first_terminal(tap, job_id) is not None

            await until(ended, timeout=240, what=f"{job_id} terminal on the bus (seen {tap.jobs(job_id)})")
        latencies, statuses = [], {}
        for job_id in entrypoints:
            status, seen_at = _first_terminal(tap, job_id) or ("", 0.0)
            info = await dashboard.get_job_info(job_id)
            assert info.end_time is not None and info.status == status
            statuses[job_id] = status
            latencies.append(seen_at - info.end_time / 1000)
        latencies.sort()
        p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
        print(f"\nreal head, pushed events: job end_time -> terminal on the bus, {len(latencies)} jobs: "
              f"p50 {statistics.median(latencies):.2f} s, p95 {p95:.2f} s, max {latencies[-1]:.2f} s "
              f"({', '.join(f'{x:.2f}' for x in latencies)}); POSTs {receiver.accepted}, "
              f"head requests {poller.heads.requests if poller.heads else '?'}")
        assert statuses[f"push-{run}-3"] == "FAILED" and statuses[stopped] == "STOPPED"
        assert sorted(set(statuses.values())) == ["FAILED", "STOPPED", "SUCCEEDED"]
        assert all(x > -0.5 for x in latencies), latencies  # no observation before the head's end
        assert p95 <= 1.0, latencies
    finally:
        await poller.stop()
    for job_id in entrypoints:
        await dashboard.delete_job(job_id)


async def _async(value: bool) -> bool:
    return value
