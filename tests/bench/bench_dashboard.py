"""Issue 10 harness: dashboard requests/minute of the dashboard-poller vs KubeRay's fixed cadence,
and the poller's share of the change -> observation lag.

Setup, in one process against one real nats-server: simulated Ray heads (raybus_sim.dashboard on a
loopback port) for N jobs (one RayCluster each, as a RayJob has) and M RayServices (one cluster
each, 2 apps); a dashboard-poller with its production settings; synthetic interests as the
RayJob/RayService reconcilers would declare them. The RayJob/RayService controllers are not
involved (this measures the gateway alone; the end-to-end numbers of issue 10 need them).

Reported side by side, same run:
- requests/minute in steady state vs KubeRay's cadence for the same objects
  (jobs x 20/min [GetJobInfo every 3 s] + services x 30/min x 2 [serve details + proxy health]);
- lag from a job ending in the simulator to its observation being published, p50/p95, for jobs
  whose end Kubernetes signals (K8sJobMode/SidecarMode: the submitter container ends; modelled by
  the reconciler bumping `poll_now`) and for jobs it does not (HTTPMode/InteractiveMode);
- lag from an app changing status to its observation, against KubeRay's 2 s.
Run: `python -m tests.bench.bench_dashboard [--jobs 100 --services 20 --duration 60]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import nats
from aiohttp import web
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from dashboard_poller.app import DashboardPollerService
from dashboard_poller.settings import PollerSettings
from raybus.adapters.dashboard import RayDashboardClient
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.bus import subjects as s
from raybus.bus.envelopes import DashboardObservation, ObjectKey
from raybus.bus.publish import DashboardInterestPublisher
from raybus.bus.streams import ensure_streams
from raybus.decisions.dashboard_contract import DashboardInterest
from raybus.testing.servers import start_nats
from raybus_sim.dashboard import ClusterSettings, DashboardRegistry, create_dashboard_app

NS = "bench"
SERVE_CONFIG = {"applications": [
    {"name": "app1", "route_prefix": "/", "import_path": "hello:app"},
    {"name": "app2", "route_prefix": "/greet", "import_path": "hello:composed"}]}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Tap:
    """When each (cluster, predicate) first became true in a published observation."""

    def __init__(self) -> None:
        self.latest: dict[str, DashboardObservation] = {}
        self.arrived: dict[str, float] = {}
        self.changed = asyncio.Event()

    async def on_msg(self, msg: Msg) -> None:
        obs = DashboardObservation.model_validate_json(msg.data)
        self.latest[obs.key.name] = obs
        self.arrived[obs.key.name] = time.monotonic()
        self.changed.set()

    async def wait(self, cluster: str, check: Any, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            obs = self.latest.get(cluster)
            if obs is not None and check(obs):
                return self.arrived[cluster]
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 0.5)
            except TimeoutError:
                pass
        raise TimeoutError(f"{cluster}: no matching observation in {timeout} s")


async def bench(args: argparse.Namespace) -> None:
    server = start_nats(Path(tempfile.mkdtemp(prefix="bench-dash-")))
    registry = DashboardRegistry(defaults=ClusterSettings(serve_first_put_s=0.0, serve_deploy_s=1.0))
    runner = web.AppRunner(create_dashboard_app(registry))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    root = f"http://127.0.0.1:{runner.addresses[0][1]}"
    nc = await nats.connect(server.url)
    poller: DashboardPollerService | None = None
    try:
        js = nc.jetstream()
        await ensure_streams(js)
        jobs = [f"job-{i}" for i in range(args.jobs)]
        services = [f"svc-{i}" for i in range(args.services)]
        async with httpx.AsyncClient() as http:
            for cluster in jobs + services:
                registry.head_up(NS, cluster)
            for cluster in jobs:  # running until the harness finishes them
                client = RayDashboardClient(http, base_url=f"{root}/{NS}/{cluster}")
                await client.submit_job(JobSubmitRequest(entrypoint="python run.py RAYBUS_SIM_HANG",
                                                         submission_id=f"{cluster}-id"))
            for cluster in services:
                await RayDashboardClient(http, base_url=f"{root}/{NS}/{cluster}").update_deployments(SERVE_CONFIG)

            tap = Tap()
            await js.subscribe(s.dashboard_filter(), ordered_consumer=True, cb=tap.on_msg,
                               deliver_policy=DeliverPolicy.NEW)
            settings = PollerSettings(nats_url=server.url, replica_id="bench",
                                      dashboard_url_template=root + "/{namespace}/{cluster}",
                                      proxy_url_template=root + "/{namespace}/{cluster}/serve",
                                      slow_interval_s=args.slow_interval)
            poller = DashboardPollerService(settings)
            await poller.start()
            interests = DashboardInterestPublisher(js)
            for cluster in jobs:
                await interests.publish(controller=s.Controller.JOB, key=ObjectKey(namespace=NS, name=cluster),
                                        kind="rayjob", interest=DashboardInterest(cluster=cluster,
                                                                                  jobs=[f"{cluster}-id"]))

            def service_interest(cluster: str) -> DashboardInterest:
                return DashboardInterest(cluster=cluster, serve=True, proxy_pods={f"{cluster}-head": "10.0.0.1"})

            for cluster in services:
                await interests.publish(controller=s.Controller.SERVICE, key=ObjectKey(namespace=NS, name=cluster),
                                        kind="rayservice", interest=service_interest(cluster))
            for cluster in jobs:
                await tap.wait(cluster, lambda o: bool(o.observation.jobs), 60)
            for cluster in services:
                await tap.wait(cluster, lambda o: o.observation.serve_apps and all(
                    a.status == "RUNNING" for a in o.observation.serve_apps.values()), 60)
            # Past the "just submitted" window: steady state from here on.
            await asyncio.sleep(settings.fresh_window_s + 2)

            for state in registry.clusters():
                state.requests.clear()
            t0 = time.monotonic()
            await asyncio.sleep(args.duration)
            elapsed_min = (time.monotonic() - t0) / 60
            total = sum(st.requests["total"] for st in registry.clusters())
            ours = total / elapsed_min
            kuberay = args.jobs * 20 + args.services * 30 * 2
            print(f"jobs={args.jobs} services={args.services} window={args.duration:.0f}s "
                  f"slow_interval={args.slow_interval}s")
            print(f"dashboard requests/min: raybus={ours:.0f}  KubeRay cadence={kuberay}  "
                  f"ratio={kuberay / max(ours, 1e-9):.1f}x fewer")

            # Job end -> observation. Half the jobs signal their end (submitter container ended:
            # the reconciler bumps poll_now), half do not (HTTPMode/InteractiveMode).
            signalled, silent = [], []
            sample = jobs[: args.lag_samples]
            for n, cluster in enumerate(sample):
                with_signal = n % 2 == 0
                state = registry.get(NS, cluster)
                assert state is not None
                job = state.jobs.jobs[f"{cluster}-id"]
                now = registry.clock()
                job.plan.running_s = now - job.submitted_at - job.plan.pending_s  # ends now
                ended = time.monotonic()
                if with_signal:
                    await interests.publish(
                        controller=s.Controller.JOB, key=ObjectKey(namespace=NS, name=cluster), kind="rayjob",
                        interest=DashboardInterest(cluster=cluster, jobs=[f"{cluster}-id"], poll_now="ended"))
                seen = await tap.wait(cluster, lambda o, c=cluster: o.observation.jobs[f"{c}-id"].status
                                      == "SUCCEEDED", args.slow_interval * 3)
                (signalled if with_signal else silent).append(seen - ended)
            serve_lags = []
            for cluster in services[: args.lag_samples]:
                state = registry.get(NS, cluster)
                assert state is not None
                state.serve.apps["app1"].status_override = "UNHEALTHY"
                changed = time.monotonic()
                seen = await tap.wait(cluster, lambda o: o.observation.serve_apps["app1"].status == "UNHEALTHY",
                                      args.slow_interval * 3)
                serve_lags.append(seen - changed)
            for name, lags in (("job end, signalled (K8sJobMode/SidecarMode)", signalled),
                               ("job end, unsignalled (HTTPMode/InteractiveMode)", silent),
                               ("Serve app status change", serve_lags)):
                print(f"lag {name}: n={len(lags)} p50={statistics.median(lags) if lags else float('nan'):.2f}s "
                      f"p95={pct(lags, 0.95):.2f}s")
            print("KubeRay: job status every 3 s (lag <= 3 s), Serve every 2 s (lag <= 2 s)")
    finally:
        if poller is not None:
            await poller.stop()
        await nc.close()
        await runner.cleanup()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60.0, help="steady-state window, seconds")
    parser.add_argument("--slow-interval", type=float, default=30.0, help="poller safety-net interval")
    parser.add_argument("--lag-samples", type=int, default=10)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
