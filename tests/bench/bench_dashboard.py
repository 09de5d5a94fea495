"""The dashboard-poller end to end on the local stack (`raybus_sim.devstack.stack.LocalStack`: every raybus
process, the local API server, simulated kubelet and simulated Ray heads), one run, every poller
setting side by side.

Objects: `--jobs` running RayJobs (default 100, the four submission modes in turn, entrypoint
`sleep 900`: InteractiveMode jobs are submitted by hand to their cluster's dashboard, as a user
does, then named in spec.jobId) and `--services` copies of deploy/samples/ray-service.sample.yaml
(default 20), all Ready. For each `--serve-intervals` value (the poller's `--serve-interval-s`,
default "0,2": the change-driven Serve reads, then KubeRay's 2 s cadence; the poller is restarted
with it, everything else stays):

- dashboard requests per minute counted by the simulated heads over `--window` seconds of steady
  state (the dashboard gateway's only: the submitter containers' own `ray job submit` requests are
  counted apart, under "submitter ..." keys) against KubeRay's fixed cadence for the same objects
  (GetJobInfo every 3 s per RayJob, Serve details + proxy health every 2 s per RayService:
  jobs x 20 + services x 30 x 2 per minute), and the CPU of the poller and of the simulator over
  that window;
- lag from a Serve app changing status in the simulator (fruit_app set UNHEALTHY, then back to
  RUNNING, `--serve-rounds` times per service) to the RayService's applicationStatuses showing it,
  p50/p95 (KubeRay: <= 2 s plus its status write), and to the poller publishing it (its own part,
  read on the bus with the `tap` user);
- lag from a job ending in the simulator (the control API finishes `--lag-samples` jobs per mode,
  `--stagger` seconds apart) to its RayJob's status.jobStatus showing SUCCEEDED, p50/p95 per mode
  (KubeRay: <= 3 s, its polling period). Measured after every request window (an ended job is
  read by neither KubeRay nor raybus any more), a fresh batch of jobs per setting.
Status changes are timed from a watch on RayJobs and RayServices. Run:
`python -m tests.bench.bench_dashboard [--jobs 100 --services 20 --window 60]` (about 10 minutes);
`--profile DIR` adds a py-spy summary of the poller per window.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

from raybus.adapters.kube import KubeClient, KubeError, new_api_client, resource_for
from raybus_sim.devstack.stack import LocalStack, wait_for_line
from tests.bench import machine, pct
from tests.bench.dashboard_watch import (
    APP,
    NS,
    RJ,
    RS,
    BusTap,
    StatusLog,
    app_status,
    running,
    service_ready,
)
from tests.bench.profile import Profiler

Json = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
CM = resource_for("v1", "ConfigMap")
MODES = {"K8sJobMode": "k8s", "HTTPMode": "http", "SidecarMode": "sidecar", "InteractiveMode": "interactive"}
SERVE_ENV = "RAYBUS_SERVE_INTERVAL_S"  # the dashboard-poller's Serve cadence
# The poller, and the process serving the simulated heads (with the local API server and node).
CPU_OF = ("dashboard-poller", "kube-sim")
SLOW_STATUS_S = 1.5  # a status shown this long after the poller published it is printed


def _docs(name: str) -> list[Json]:
    return [d for d in yaml.safe_load_all((REPO / "deploy/samples" / name).read_text()) if isinstance(d, dict)]


def summary(values: list[float]) -> str:
    if not values:
        return "n=0"
    return (f"n={len(values)} p50={statistics.median(values):.2f}s p95={pct(values, 0.95):.2f}s "
            f"max={max(values):.2f}s")


class Bench:
    def __init__(self, stack: LocalStack, kube: KubeClient, http: httpx.AsyncClient, log: StatusLog,
                 bus: BusTap) -> None:
        self.stack, self.kube, self.http, self.log, self.bus = stack, kube, http, log, bus

    async def sim(self, method: str, path: str, body: Json | None = None) -> Json:
        r = await self.http.request(method, f"{self.stack.dashboard_url}/sim/dashboards{path}", json=body)
        r.raise_for_status()
        return dict(r.json())

    async def raybus_requests(self) -> Counter[str]:
        """Requests per endpoint over every head, the submitter containers' excluded."""
        counts: Counter[str] = Counter()
        for per_cluster in (await self.sim("GET", "/requests")).values():
            for key, n in per_cluster.items():
                if key != "total" and not key.startswith("submitter"):
                    counts[key] += n
        return counts

    async def apply(self, jobs: int, services: int) -> tuple[dict[str, list[str]], list[str]]:
        job_doc = next(d for d in _docs("ray-job.sample.yaml") if d.get("kind") == "RayJob")
        for doc in _docs("ray-job.sample.yaml"):
            if doc.get("kind") == "ConfigMap":
                body = {**copy.deepcopy(doc), "metadata": {**doc["metadata"], "namespace": NS}}
                with contextlib.suppress(KubeError):
                    await self.kube.create(CM, body, namespace=NS)
        service_doc = next(d for d in _docs("ray-service.sample.yaml") if d.get("kind") == "RayService")
        by_mode: dict[str, list[str]] = {mode: [] for mode in MODES}
        bodies: list[tuple[Any, Json]] = []
        for i in range(jobs):
            mode = list(MODES)[i % len(MODES)]
            name = f"bench-{MODES[mode]}-{i}"
            body = copy.deepcopy(job_doc)
            body["metadata"] = {"name": name, "namespace": NS}
            body["spec"].update(submissionMode=mode, entrypoint="sleep 900")
            by_mode[mode].append(name)
            bodies.append((RJ, body))
        service_names = [f"bench-svc-{i}" for i in range(services)]
        for name in service_names:
            body = copy.deepcopy(service_doc)
            body["metadata"] = {"name": name, "namespace": NS}
            bodies.append((RS, body))
        gate = asyncio.Semaphore(16)

        async def create(res: Any, body: Json) -> None:
            async with gate:
                await self.kube.create(res, body, namespace=NS)

        await asyncio.gather(*(create(res, body) for res, body in bodies))
        return by_mode, service_names

    async def submit_interactive(self, names: list[str], timeout: float) -> None:
        """InteractiveMode: once Waiting, the user submits to the cluster's dashboard and names the job."""
        await self.log.wait("RayJob", names, lambda st: st.get("jobDeploymentStatus") == "Waiting"
                            and bool(st.get("rayClusterName")), timeout=timeout, what="Waiting")
        for name in names:
            cluster = self.log.latest("RayJob", name)["rayClusterName"]
            job_id = f"{name}-by-hand"
            r = await self.http.post(f"{self.stack.dashboard_url}/{NS}/{cluster}/api/jobs/",
                                     json={"entrypoint": "sleep 900", "submission_id": job_id})
            r.raise_for_status()
            await self.kube.merge_patch(RJ, namespace=NS, name=name, patch={"spec": {"jobId": job_id}})

    async def job_end_lags(self, by_mode: dict[str, list[str]], samples: int, stagger: float) -> dict[str, list[float]]:
        ended: dict[str, float] = {}
        order = [names[k] for k in range(samples) for names in by_mode.values() if k < len(names)]
        for name in order:
            st = self.log.latest("RayJob", name)
            await self.sim("PUT", f"/{NS}/{st['rayClusterName']}/jobs/{st['jobId']}/plan", {"finish_now": True})
            ended[name] = time.monotonic()
            await asyncio.sleep(stagger)
        await self.log.wait("RayJob", order, lambda st: st.get("jobStatus") == "SUCCEEDED", timeout=120,
                            what="SUCCEEDED")
        lags: dict[str, list[float]] = {mode: [] for mode in by_mode}
        for mode, names in by_mode.items():
            for name in names:
                if name in ended:
                    seen = self.log.first("RayJob", name, lambda st: st.get("jobStatus") == "SUCCEEDED",
                                          since=ended[name])
                    assert seen is not None
                    lags[mode].append(seen - ended[name])
        return lags

    async def serve_lags(self, services: list[str], stagger: float,
                         to: str | None) -> tuple[list[float], list[float]]:
        """Set fruit_app's status in each head (None: back to what Serve reports); the time until
        the poller published it, and until the RayService shows it."""
        shown = to or "RUNNING"
        changed: dict[str, tuple[str, float]] = {}
        for name in services:
            cluster = (self.log.latest("RayService", name).get("activeServiceStatus") or {})["rayClusterName"]
            await self.sim("PUT", f"/{NS}/{cluster}/serve/apps/{APP}/status", {"status": to, "message": None})
            changed[name] = cluster, time.monotonic()
            await asyncio.sleep(stagger)
        await self.log.wait("RayService", services, lambda st: app_status(st) == shown, timeout=120,
                            what=f"{APP} {shown}")
        published, status = [], []
        for name, (cluster, at) in changed.items():
            seen = self.log.first("RayService", name, lambda st: app_status(st) == shown, since=at)
            on_bus = self.bus.first(cluster, shown, since=at)
            assert seen is not None and on_bus is not None, (name, cluster)
            published.append(on_bus - at)
            status.append(seen - at)
            if seen - on_bus > SLOW_STATUS_S:  # the status path after the poller, not its detection
                print(f"  {name}: {shown} published {on_bus - at:.2f} s, status {seen - at:.2f} s after the change",
                      flush=True)
        return published, status


@dataclass
class Phase:
    """One poller setting's numbers, all taken from the same stack."""

    serve_interval_s: float
    per_minute: float = 0.0
    by_endpoint: dict[str, float] = field(default_factory=dict)
    down: list[float] = field(default_factory=list)  # the sim's change -> the RayService status
    up: list[float] = field(default_factory=list)
    down_bus: list[float] = field(default_factory=list)  # the sim's change -> the poller published it
    up_bus: list[float] = field(default_factory=list)
    job_ends: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # process -> share of one core in the window

    @property
    def label(self) -> str:
        if self.serve_interval_s <= 0:
            return "change-driven Serve reads (--serve-interval-s 0)"
        return f"Serve status every {self.serve_interval_s:g} s (--serve-interval-s {self.serve_interval_s:g})"


def p50_p95(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} / {pct(values, 0.95):.2f} s" if values else "n=0"


async def use_poller(stack: LocalStack, serve_interval_s: float) -> None:
    """Run the dashboard-poller with this Serve cadence (a restart; every other process stays)."""
    if stack.env.get(SERVE_ENV) == f"{serve_interval_s:g}":
        return
    stack.env[SERVE_ENV] = f"{serve_interval_s:g}"
    proc = await asyncio.to_thread(stack.restart, "dashboard-poller")
    await asyncio.to_thread(wait_for_line, proc, "acquired the dashboard-poller lease", 60.0)


async def measure_phase(bench: Bench, phase: Phase, services: list[str], args: argparse.Namespace) -> None:
    await use_poller(bench.stack, phase.serve_interval_s)
    await asyncio.sleep(args.settle)  # past the start-up's reads: steady state
    procs = {name: psutil.Process(bench.stack.proc(name).popen.pid) for name in CPU_OF}
    before = await bench.raybus_requests()
    cpu_before = {name: sum(p.cpu_times()[:2]) for name, p in procs.items()}
    profiler = Profiler(Path(args.profile) / f"serve-interval-{phase.serve_interval_s:g}", {
        "dashboard-poller": bench.stack.proc("dashboard-poller").popen.pid}) if args.profile else None
    started = time.monotonic()
    await asyncio.sleep(args.window)
    elapsed = time.monotonic() - started
    if profiler is not None:
        profiler.stop()
        profiler.report()
    minutes = elapsed / 60
    spent = await bench.raybus_requests() - before
    phase.cpu = {name: (sum(p.cpu_times()[:2]) - cpu_before[name]) / elapsed for name, p in procs.items()}
    phase.per_minute = sum(spent.values()) / minutes
    phase.by_endpoint = {k: v / minutes for k, v in sorted(spent.items())}
    for _ in range(args.serve_rounds):
        for to, bus_lags, status_lags in (("UNHEALTHY", phase.down_bus, phase.down),
                                          (None, phase.up_bus, phase.up)):
            published, status = await bench.serve_lags(services, args.stagger, to)
            bus_lags += published
            status_lags += status
    print(f"{phase.label}: {phase.per_minute:.0f} requests/min "
          f"({', '.join(f'{k} {v:.1f}' for k, v in phase.by_endpoint.items())}); CPU "
          f"{', '.join(f'{k} {100 * v:.1f}%' for k, v in phase.cpu.items())}; "
          f"RUNNING -> UNHEALTHY published {summary(phase.down_bus)}, status {summary(phase.down)}; "
          f"UNHEALTHY -> RUNNING published {summary(phase.up_bus)}, status {summary(phase.up)}", flush=True)


def report(phases: list[Phase], args: argparse.Namespace) -> None:
    kuberay = args.jobs * 20 + args.services * 30 * 2
    print(machine())
    print(f"{args.jobs} running RayJobs ({args.jobs // len(MODES)} per submission mode) + {args.services} steady "
          f"RayServices; requests over {args.window:.0f} s of steady state; Serve lags over {args.serve_rounds} "
          f"round(s) x {args.services} services; job ends {args.lag_samples} per mode")
    print("| poller | dashboard requests/min | KubeRay's cadence | fewer | Serve RUNNING -> UNHEALTHY, RayService "
          "status p50 / p95 | UNHEALTHY -> RUNNING, status p50 / p95 | the same, published by the poller: down "
          "| up | job end -> SUCCEEDED p50 / p95 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for ph in phases:
        every = [v for values in ph.job_ends.values() for v in values]
        fewer = f"{kuberay / ph.per_minute:.1f}x" if ph.per_minute else "-"
        print(f"| {ph.label} | {ph.per_minute:.0f} | {kuberay} | {fewer} | {p50_p95(ph.down)} | {p50_p95(ph.up)} "
              f"| {p50_p95(ph.down_bus)} | {p50_p95(ph.up_bus)} | {p50_p95(every)} |")
    for ph in phases:
        print(f"  {ph.label}: by endpoint/min: " + ", ".join(f"{k} {v:.1f}" for k, v in ph.by_endpoint.items()))
        print(f"  {ph.label}: CPU in the window (share of one core): "
              + ", ".join(f"{k} {100 * v:.1f}%" for k, v in ph.cpu.items()))
        for mode, values in ph.job_ends.items():
            print(f"  {ph.label}: job end -> SUCCEEDED, {mode}: {summary(values)}")
    print("goals: Serve p95 <= 2.5 s both ways (KubeRay reads Serve every 2 s), requests >= 3x fewer than "
          "KubeRay's; job end p95 <= 3 s")


async def run(args: argparse.Namespace) -> None:
    phases = [Phase(serve_interval_s=float(v)) for v in args.serve_intervals.split(",")]
    stack = LocalStack(home=Path(tempfile.mkdtemp(prefix="bench-dashboard-")),
                       extra_env={SERVE_ENV: f"{phases[0].serve_interval_s:g}"})
    await asyncio.to_thread(stack.start)  # start() runs its own event loop (declare_bus)
    kube = KubeClient(await new_api_client(str(stack.kubeconfig)))
    log, bus = StatusLog(kube), BusTap()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            await log.start()
            await bus.start(stack)
            bench = Bench(stack, kube, http, log, bus)
            t0 = time.monotonic()
            by_mode, services = await bench.apply(args.jobs, args.services)
            await bench.submit_interactive(by_mode["InteractiveMode"], timeout=args.setup_timeout)
            every_job = [n for names in by_mode.values() for n in names]
            await log.wait("RayJob", every_job, running, timeout=args.setup_timeout, what="Running/RUNNING")
            await log.wait("RayService", services, service_ready, timeout=args.setup_timeout, what="Ready")
            print(f"setup: {args.jobs} RayJobs Running ({', '.join(f'{len(v)} {k}' for k, v in by_mode.items())}) "
                  f"and {args.services} RayServices Ready in {time.monotonic() - t0:.0f}s", flush=True)
            # Every setting's request window first, while every job still runs (an ended job is
            # not read any more, by KubeRay nor by raybus), then the job ends, newest setting first.
            for phase in phases:
                await measure_phase(bench, phase, services, args)
            remaining = {mode: list(names) for mode, names in by_mode.items()}
            for phase in reversed(phases):
                await use_poller(stack, phase.serve_interval_s)
                await asyncio.sleep(args.settle)
                batch = {mode: names[:args.lag_samples] for mode, names in remaining.items()}
                remaining = {mode: names[args.lag_samples:] for mode, names in remaining.items()}
                phase.job_ends = await bench.job_end_lags(batch, args.lag_samples, args.stagger)
            report(phases, args)
    finally:
        await bus.stop()
        await log.stop()
        await kube.close()
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--window", type=float, default=60.0, help="steady-state measurement, seconds")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds after all Ready before measuring")
    parser.add_argument("--lag-samples", type=int, default=8, help="jobs finished per submission mode")
    parser.add_argument("--stagger", type=float, default=0.5, help="seconds between two changes")
    parser.add_argument("--setup-timeout", type=float, default=600.0)
    parser.add_argument("--serve-intervals", default="0,2",
                        help="the poller's --serve-interval-s values to measure side by side (0: change-driven)")
    parser.add_argument("--profile", default="",
                        help="DIR: py-spy the dashboard-poller over each setting's request window")
    parser.add_argument("--serve-rounds", type=int, default=2,
                        help="RUNNING -> UNHEALTHY -> RUNNING rounds per service and setting")
    args = parser.parse_args()
    try:
        intervals = [float(v) for v in args.serve_intervals.split(",")]
    except ValueError:
        parser.error(f"--serve-intervals: comma-separated seconds, not {args.serve_intervals!r}")
    if any(v < 0 for v in intervals) or args.lag_samples * len(intervals) > args.jobs // len(MODES):
        parser.error("--serve-intervals must be >= 0, and --lag-samples x settings at most the jobs per mode")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
