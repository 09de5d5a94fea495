"""The Serve cadence (`serve_interval_s`) against the simulated heads: an app that turns UNHEALTHY
with nothing else to tell the poller is published at that cadence, while the proxy and the jobs
keep their own (here: the safety net, far away); and a round's end decides its own cluster again,
not every declared cluster."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NATS

from dashboard_poller.app import DashboardPollerService
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.bus import subjects as s
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.conftest import Sim
from tests.integration.dashboard.poller_kit import (
    CLUSTER,
    NS,
    ObservationTap,
    Reconciler,
    requests,
    start_poller,
    until,
)

pytestmark = pytest.mark.integration
SERVE_GET = "GET /api/serve/applications/"
CONFIG = {"applications": [{"name": "a1", "route_prefix": "/", "import_path": "hello:app"}]}
SAFETY_NET_S = 120.0  # nothing here may be explained by the slow round


def _app(tap: ObservationTap, status: str, since: int = 0) -> bool:
    return any(o.observation.serve_apps is not None and o.observation.serve_apps.get("a1") is not None
               and o.observation.serve_apps["a1"].status == status for _, o in tap.seen[since:])


async def _serve_reads(sim: Sim, n: int, cluster: str = CLUSTER) -> bool:
    return (await requests(sim, cluster)).get(SERVE_GET, 0) >= n


async def test_an_unhealthy_app_is_read_at_the_serve_cadence_and_nothing_else_is(
        nats_server: NatsServer, sim: Sim, nc: NATS, tap: ObservationTap) -> None:
    await sim.client().update_deployments(CONFIG)
    owner = Reconciler(nc, "svc", s.Controller.SERVICE)
    await owner.want(serve=True, proxy_pods={"head": "127.0.0.1"})
    poller = await start_poller(nats_server.url, sim, slow_interval_s=SAFETY_NET_S, serve_interval_s=0.3)
    try:
        async def steady() -> bool:
            last = tap.last()
            return last is not None and last.observation.proxy_healthy == {"head": True} and _app(tap, "RUNNING")

        await until(steady, what="a1 RUNNING and the proxy healthy on the bus")
        await sim.control("DELETE", f"/{NS}/{CLUSTER}/requests")
        await until(lambda: _serve_reads(sim, 3), what="Serve read again")  # the cadence alone
        since = len(tap.seen)
        await sim.control("PUT", f"/{NS}/{CLUSTER}/serve/apps/a1/status", {"status": "UNHEALTHY"})

        async def unhealthy() -> bool:
            return _app(tap, "UNHEALTHY", since)

        await until(unhealthy, timeout=SAFETY_NET_S / 4, what="a1 UNHEALTHY on the bus")
        await sim.control("PUT", f"/{NS}/{CLUSTER}/serve/apps/a1/status", {"status": None})

        async def running() -> bool:
            return _app(tap, "RUNNING", since)

        await until(running, timeout=SAFETY_NET_S / 4, what="a1 RUNNING again on the bus")
        counts = await requests(sim)
        # Serve alone was read: the proxy health waits for the full round, far away.
        assert counts.get(SERVE_GET, 0) >= 5 and "GET /serve/-/healthz" not in counts, counts
    finally:
        await poller.stop()


async def test_a_round_end_decides_its_own_cluster_again_not_every_cluster(
        nats_server: NatsServer, sim: Sim, nc: NATS, tap: ObservationTap) -> None:
    """Ten steady job clusters beside one Serve cluster read every 0.2 s: the scheduler decides
    about the Serve cluster at each of its rounds, and leaves the others' decisions as they were."""
    await sim.client().update_deployments(CONFIG)
    job_clusters = [f"jobs{i}" for i in range(10)]
    for cluster in job_clusters:
        sim.registry.head_up(NS, cluster)
        await sim.client(cluster).submit_job(JobSubmitRequest(entrypoint="sleep 600", submission_id="j"))
        await Reconciler(nc, f"rj-{cluster}").want(cluster=cluster, jobs=["j"])
    await Reconciler(nc, "svc", s.Controller.SERVICE).want(serve=True)
    poller: DashboardPollerService = await start_poller(
        nats_server.url, sim, slow_interval_s=SAFETY_NET_S, fresh_window_s=0.5, serve_interval_s=0.2)
    try:
        async def steady() -> bool:
            last = {o.key.name: o.observation for _, o in tap.seen}
            return _app(tap, "RUNNING") and all(
                c in last and "j" in last[c].jobs and last[c].jobs["j"].status == "RUNNING" for c in job_clusters)

        await until(steady, what="every job RUNNING and a1 RUNNING on the bus")
        # past the jobs' "just started" fast reads (fresh_window_s): every job cluster is slow now
        await until(lambda: _serve_reads(sim, (0.5 + 1.0) / 0.2), what="Serve read past the fresh window")
        scheduler = poller.scheduler
        assert scheduler is not None
        for cluster in job_clusters:
            await sim.control("DELETE", f"/{NS}/{cluster}/requests")
        decided, reads = scheduler.decisions, (await requests(sim)).get(SERVE_GET, 0)
        await until(lambda: _serve_reads(sim, reads + 10), what="ten more Serve reads")
        serve_rounds = (await requests(sim)).get(SERVE_GET, 0) - reads
        # Each Serve round is decided when due and again when it ends; deciding every declared
        # cluster at each pass would be 11 per pass.
        assert scheduler.decisions - decided <= 3 * serve_rounds, (scheduler.decisions - decided, serve_rounds)
        for cluster in job_clusters:  # steady jobs wait for the safety net, Serve's cadence is not theirs
            assert (await requests(sim, cluster)).get("total", 0) == 0, cluster
    finally:
        await poller.stop()
