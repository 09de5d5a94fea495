"""Job ends pushed by (simulated) heads: the simulator pushes the job supervisor's death the way a
real Ray 2.60 head does when its Pod carries the export address, the poller's receiver checks the
cluster's token and reads the head at once. No follow stream, the safety net 60 s away: only the
push can make the read happen in time. A head using another cluster's path is refused."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NATS

from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.decisions.dashboard_contract import DashboardInterest
from raybus.decisions.ray_events import cluster_token, export_path
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.conftest import Sim
from tests.integration.dashboard.poller_kit import (
    CLUSTER,
    NS,
    ObservationTap,
    Reconciler,
    publish_cluster,
    start_poller,
    until,
)

pytestmark = pytest.mark.integration
KEY = "test-key-not-a-secret"


async def test_a_pushed_job_end_is_read_at_once_and_a_foreign_token_is_refused(
        nats_server: NatsServer, sim: Sim, nc: NATS, tap: ObservationTap) -> None:
    for name in (CLUSTER, "other"):
        sim.registry.head_up(NS, name)
        settings = sim.registry.cluster(NS, name).settings
        settings.job_running_s, settings.log_tail_close_lag_s, settings.events_push_lag_s = 1.5, 3.0, 0.3
    uids = {CLUSTER: "uid-rc", "other": "uid-other"}
    for name, uid in uids.items():
        await publish_cluster(nc, name, uid)
    poller = await start_poller(nats_server.url, sim, slow_interval_s=60.0, fresh_window_s=0.2,
                                ray_events_key=KEY, ray_events_host="127.0.0.1", ray_events_port=0)
    try:
        receiver = poller.ray_events
        assert receiver is not None and receiver.port
        base = f"http://127.0.0.1:{receiver.port}"
        sim.registry.cluster(NS, CLUSTER).events_export_addr = base + export_path(
            NS, CLUSTER, cluster_token(KEY, NS, CLUSTER, uids[CLUSTER]))
        # "other" reports under its own name but with rc's token: refused, nothing read.
        sim.registry.cluster(NS, "other").events_export_addr = base + export_path(
            NS, "other", cluster_token(KEY, NS, CLUSTER, uids[CLUSTER]))
        for name in (CLUSTER, "other"):
            await sim.client(name).submit_job(JobSubmitRequest(entrypoint="python job.py", submission_id="j1"))
        owner, other = Reconciler(nc), Reconciler(nc, owner="rj2")
        await owner.want(jobs=["j1"])
        await other.interests.publish(controller=other.controller, key=other.key, kind=other.kind,
                                      interest=DashboardInterest(cluster="other", jobs=["j1"]))

        def status(cluster: str) -> str | None:
            for _, obs in reversed(tap.seen):
                if obs.observation.cluster == cluster and "j1" in obs.observation.jobs:
                    return obs.observation.jobs["j1"].status
            return None

        async def running(cluster: str) -> bool:
            return status(cluster) == "RUNNING"

        await until(lambda: running(CLUSTER), timeout=10, what="j1 RUNNING on rc")
        await until(lambda: running("other"), timeout=10, what="j1 RUNNING on other")

        async def ended() -> bool:
            return status(CLUSTER) == "SUCCEEDED"

        await until(ended, timeout=10, what=f"j1 SUCCEEDED on rc (seen {tap.jobs('j1')})")
        seen_at = next(o.observed_at.timestamp() for _, o in tap.seen
                       if o.observation.cluster == CLUSTER and o.observation.jobs.get("j1")
                       and o.observation.jobs["j1"].status == "SUCCEEDED")
        info = await sim.client(CLUSTER).get_job_info("j1")
        assert info.end_time is not None
        latency = seen_at - info.end_time / 1000
        assert 0.3 <= latency < 1.5, latency  # the push (0.3 s), not the tail's close (3 s) nor the safety net

        async def refused() -> bool:
            return receiver.rejected >= 1

        await until(refused, timeout=10, what="other's push refused")
        assert status("other") == "RUNNING"  # its job ended, but a refused push reads nothing
        assert receiver.accepted >= 1
    finally:
        await poller.stop()
