"""Issue 4 benchmark: 100 RayClusters x (1 head + 10 workers) applied at once on the local stack.

Reported side by side, same run, same API server:
- floor: the same 1,100 pod creates issued directly by one kubernetes-asyncio client;
- raybus: apply 100 RayClusters, time until all 1,100 pods exist (watch), and until all are ready;
- API writes per converged cluster (from the executor's outcomes on the bus), by operation;
- peak RSS (VmHWM) of every process.
Run: `python -m tests.bench.bench_clusters [--clusters N[,N...] --workers M --replicas R]`;
`--scrape-s 0,15 --base DIR` adds what the metrics cost: each size unscraped, scraped by a real
Prometheus every 15 s, and with another checkout's services (DIR, e.g. `git archive main`);
`make bench` runs 100, 300 and 1,000 and prints the cost curve. Interrupted, it leaves nothing
behind (the stack's processes die with it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import nats
import yaml

from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.bus.subjects import Controller
from raybus.observability.controllerruntime import CONTROLLER_NAMES
from raybus_sim.devstack.stack import LocalStack
from raybus_sim.testing import prometheus as prom
from tests.bench import machine
from tests.bench.profile import Profiler

SAMPLE = yaml.safe_load((Path(__file__).resolve().parents[2] / "deploy/samples/ray-cluster.sample.yaml").read_text())
RC = resource_for("ray.io/v1", "RayCluster")
POD = resource_for("v1", "Pod")
NAMESPACE = resource_for("v1", "Namespace")


def _cluster(name: str, workers: int) -> dict[str, Any]:
    body = copy.deepcopy(SAMPLE)
    body["metadata"] = {"name": name, "namespace": "bench"}
    body["spec"]["workerGroupSpecs"][0].update(replicas=workers, minReplicas=0, maxReplicas=workers)
    return body


def _pod(name: str) -> dict[str, Any]:
    head = SAMPLE["spec"]["headGroupSpec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "floor"},
            "spec": copy.deepcopy(head["spec"])}


class Timeline:
    """When each Pod was first seen and turned Ready, and each RayCluster turned ready (seconds
    from apply): where a run's time went, e.g. whether its tail waited for Pods or for status."""

    def __init__(self, pods_per_cluster: int = 0) -> None:
        self.created: list[float] = []
        self.ready: list[float] = []
        self.clusters: list[float] = []
        # When a RayCluster's last Pod was created / turned Ready: whether clusters converge one
        # after another or all at the end (then each stays provisioning, and reconciled, longer).
        self.pods_per_cluster = pods_per_cluster
        self._counts: Counter[tuple[str, str]] = Counter()
        self.all_created: list[float] = []
        self.all_ready: list[float] = []

    def pod(self, what: str, cluster: str, at: float) -> None:
        (self.created if what == "created" else self.ready).append(at)
        self._counts[(what, cluster)] += 1
        if self._counts[(what, cluster)] == self.pods_per_cluster:
            (self.all_created if what == "created" else self.all_ready).append(at)

    def lines(self, end: float, steps: int = 10) -> list[str]:
        out = []
        for i in range(1, steps + 1):
            t = end * i / steps
            out.append(f"  {t:7.1f}s  pods created {sum(x <= t for x in self.created):>6}  "
                       f"pods ready {sum(x <= t for x in self.ready):>6}  "
                       f"clusters: all pods created {sum(x <= t for x in self.all_created):>5}  "
                       f"all pods ready {sum(x <= t for x in self.all_ready):>5}  "
                       f"ready {sum(x <= t for x in self.clusters):>5}")
        return out


async def _watch_pods(kube: KubeClient, namespace: str, target: int, t0: float, timeline: Timeline,
                      exists: asyncio.Future[float]) -> None:
    """Record when each pod of the namespace first exists and turns Ready (one list, then a
    watch, until cancelled); `exists` gets the seconds from t0 until `target` pods exist."""
    try:
        await _follow_pods(kube, namespace, target, t0, timeline, exists)
    except Exception as exc:  # the run waits on `exists`: fail it rather than hang
        if not exists.done():
            exists.set_exception(exc)
        raise


async def _follow_pods(kube: KubeClient, namespace: str, target: int, t0: float, timeline: Timeline,
                       exists: asyncio.Future[float]) -> None:
    items, rv = await kube.list_all(POD, namespace=namespace)
    seen = {p["metadata"]["name"] for p in items}
    ready = {p["metadata"]["name"] for p in items if _ready(p)}
    while True:
        async for ev in kube.watch(POD, resource_version=rv, namespace=namespace, timeout_s=120):
            rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
            if ev.type == "BOOKMARK":
                continue
            name, now = ev.object["metadata"]["name"], time.perf_counter() - t0
            cluster = str((ev.object["metadata"].get("labels") or {}).get("ray.io/cluster"))
            if ev.type != "DELETED" and name not in seen:
                seen.add(name)
                timeline.pod("created", cluster, now)
            if ev.type != "DELETED" and name not in ready and _ready(ev.object):
                ready.add(name)
                timeline.pod("ready", cluster, now)
            if len(seen) >= target and not exists.done():
                exists.set_result(now)


def status_change(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str:
    """What one RayCluster status write changed, as a label: the top-level fields, with a
    condition's type=status/reason and a head field by name ("conditions[HeadPodReady=True/...]")."""
    old, new = old or {}, new or {}
    parts = []
    for field in sorted(set(old) | set(new)):
        if old.get(field) == new.get(field):
            continue
        if field == "conditions":
            before = {c.get("type"): c for c in old.get(field) or []}
            for c in new.get(field) or []:
                was = before.get(c.get("type")) or {}
                if (was.get("status"), was.get("reason")) != (c.get("status"), c.get("reason")):
                    parts.append(f"{c.get('type')}={c.get('status')}/{c.get('reason')}")
                elif was.get("message") != c.get("message"):
                    parts.append(f"{c.get('type')}.message")
        elif field == "head":
            parts += [f"head.{k}" for k in sorted(set(old.get(field) or {}) | set(new.get(field) or {}))
                      if (old.get(field) or {}).get(k) != (new.get(field) or {}).get(k)]
        elif field not in ("lastUpdateTime",):
            parts.append(field)
    return ",".join(parts) or "(only " + ",".join(sorted(f for f in set(old) | set(new) if old.get(f) != new.get(f))) + ")"


async def _all_ready(kube: KubeClient, namespace: str, target: int, t0: float,
                     changes: Counter[str] | None = None, timeline: Timeline | None = None) -> float:
    """Seconds from t0 until `target` RayClusters say state=ready: one list, then a watch. (Listing
    every RayCluster every 0.2 s cost the API server more CPU than raybus at 100 clusters, on the
    same two cores as the processes being measured.) `changes` counts the status writes seen, by
    what they changed (status_change)."""
    items, rv = await kube.list_all(RC, namespace=namespace)
    ready = {i["metadata"]["name"] for i in items if (i.get("status") or {}).get("state") == "ready"}
    last = {i["metadata"]["name"]: i.get("status") for i in items}
    while len(ready) < target:
        async for ev in kube.watch(RC, resource_version=rv, namespace=namespace, timeout_s=120):
            rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
            if ev.type == "BOOKMARK":
                continue
            name = ev.object["metadata"]["name"]
            if changes is not None and ev.object.get("status") != last.get(name):
                changes[status_change(last.get(name), ev.object.get("status"))] += 1
                last[name] = ev.object.get("status")
            if ev.type != "DELETED" and (ev.object.get("status") or {}).get("state") == "ready":
                if timeline is not None and name not in ready:
                    timeline.clusters.append(time.perf_counter() - t0)
                ready.add(name)
            else:
                ready.discard(name)
            if len(ready) >= target:
                break
    return time.perf_counter() - t0


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


async def _pods_ready(kube: KubeClient, namespace: str, target: int) -> None:
    """Return once `target` pods of the namespace are Ready (one list, then a watch)."""
    items, rv = await kube.list_all(POD, namespace=namespace)
    ready = {p["metadata"]["name"] for p in items if _ready(p)}
    while len(ready) < target:
        async for ev in kube.watch(POD, resource_version=rv, namespace=namespace, timeout_s=120):
            rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
            if ev.type != "BOOKMARK" and _ready(ev.object):
                ready.add(ev.object["metadata"]["name"])
            if len(ready) >= target:
                break


async def _stream_seqs(nc: Any) -> dict[str, int]:
    """Each stream's last sequence: the difference of two readings is what was stored between them."""
    return {info.config.name: info.state.last_seq for info in await nc.jetstream().streams_info()}


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _write_syscalls(pid: int) -> int:
    """syscw of /proc/<pid>/io: the process's write syscalls (every NATS flush and HTTP request
    is at least one; on loopback each also runs the receiver's TCP path)."""
    try:
        lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith("syscw:")), 0)


async def floor(kube: KubeClient, total: int, concurrency: int) -> float:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await kube.create(POD, _pod(f"floor-{i}"), namespace="floor")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return time.perf_counter() - t0


async def run(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="bench-clusters-"))
    scraped = args.scrape_s > 0
    stack = LocalStack(home=home, replicas=args.replicas, secure=not args.insecure, extra_env={
        "RAYBUS_KUBE_API_QPS": str(args.qps), "RAYBUS_KUBE_API_BURST": str(args.burst),
        # the watcher's bus-state reads run only when something scrapes them
        "RAYBUS_BUS_STATE_S": "10" if scraped else "0", **_code_env(args.code)})
    await asyncio.to_thread(stack.start)  # start() runs its own event loop (declare_bus)
    prometheus = prom.Prometheus(home=home / "prometheus", scrape_s=args.scrape_s) if scraped else None
    try:
        if prometheus is not None:
            await asyncio.to_thread(prometheus.start, prom.stack_targets(stack.procs))
        kube = KubeClient(await new_api_client(str(stack.kubeconfig)))
        floor_start = time.perf_counter()
        for ns in ("floor", "bench"):
            await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": ns}}, namespace=None)
        total = args.clusters * (args.workers + 1)
        floor_s = await floor(kube, total, args.concurrency)
        # The simulated kubelet walks the floor's Pods to Ready too: done before raybus starts,
        # or that work (about a third of the simulator's) would compete with raybus's run.
        await _pods_ready(kube, "floor", total)
        floor_ready_s = time.perf_counter() - floor_start

        assert stack.nats is not None and stack.redis is not None
        nc = await nats.connect(**stack.nats.options())
        pids = {p.name: p.popen.pid for p in stack.procs}
        pids["nats-server"] = stack.nats.proc.pid if stack.nats.proc else 0
        pids["redis-server"] = stack.redis.proc.pid if stack.redis.proc else 0
        if prometheus is not None and prometheus.popen is not None:
            pids["prometheus"] = prometheus.popen.pid
        cpu_before = {n: _cpu_seconds(pid) for n, pid in pids.items()}
        writes_before = {n: _write_syscalls(pid) for n, pid in pids.items()}
        ops: Counter[str] = Counter()
        codes: Counter[str] = Counter()
        failed = 0

        async def on_outcome(msg: Any) -> None:
            nonlocal failed
            body = json.loads(msg.data)
            for r in body.get("results", []):
                ops[r["op"]] += 1
                codes[f"{r['op']}:{r.get('code')}"] += 1
                failed += 0 if r.get("ok") else 1

        await nc.subscribe("raybus.outcome.cluster.>", cb=on_outcome)
        profiler = Profiler(Path(args.profile) / str(args.clusters), {
            n: pid for n, pid in pids.items()
            if n not in ("nats-server", "redis-server") and (args.profile_sim or n != "kube-sim")
        }) if args.profile else None
        seqs_before = await _stream_seqs(nc)
        t0 = time.perf_counter()
        timeline = Timeline(pods_per_cluster=args.workers + 1)
        exists: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        pods = asyncio.create_task(_watch_pods(kube, "bench", total, t0, timeline, exists))
        await asyncio.gather(*(kube.create(RC, _cluster(f"bench-{i}", args.workers), namespace="bench")
                               for i in range(args.clusters)))
        pods_s = await exists

        status_changes: Counter[str] = Counter()
        ready_s = await _all_ready(kube, "bench", args.clusters, t0, status_changes, timeline)
        pods.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pods
        cpu = {n: _cpu_seconds(pid) - cpu_before[n] for n, pid in pids.items()}
        syscw = {n: _write_syscalls(pid) - writes_before[n] for n, pid in pids.items()}
        seqs_after = await _stream_seqs(nc)
        if profiler is not None:
            profiler.stop()
            profiler.report()
        js = nc.jetstream()
        while sum([(await js.stream_info(st)).state.messages
                   for st in ("RAYBUS_COMMANDS", "RAYBUS_STATUS")]):
            await asyncio.sleep(0.2)  # trailing status writes land before counting
        await nc.close()
        await kube.close()
        writes = sum(ops.values())
        print(machine())
        print(f"clusters={args.clusters} workers/cluster={args.workers} pods={total} "
              f"reconciler replicas={args.replicas} executor qps/burst={args.qps:g}/{args.burst}")
        print(f"floor: {total} pod creates, one kubernetes-asyncio client "
              f"(concurrency {args.concurrency}): {floor_s:.2f} s ({total / floor_s:.0f} creates/s); "
              f"all Ready after {floor_ready_s:.2f} s (the simulator's pace, no limiter, no raybus)")
        print(f"raybus: all {total} pods exist after {pods_s:.2f} s; all clusters ready after {ready_s:.2f} s")
        print(f"ratio (raybus pods-exist time / floor) = {pods_s / floor_s:.2f}x")
        # With a client-side limiter no client can beat (creates - burst) / qps: the pods plus
        # one head Service per cluster must all pass through it.
        creates = total + args.clusters
        bound = max(0.0, (creates - args.burst) / args.qps)
        if bound > floor_s:
            print(f"limiter bound for {creates} creates at {args.qps:g} QPS / {args.burst} burst = "
                  f"{bound:.2f} s; raybus pods-exist / max(bound, floor) = "
                  f"{pods_s / max(bound, floor_s):.2f}x")
        # "Ready" also needs the status write that says so, through the same limiter (KubeRay's
        # status updates share the manager's client and its 100 QPS): at least one per cluster.
        ready_bound = max(0.0, (creates + args.clusters - args.burst) / args.qps)
        if ready_bound > floor_s:
            print(f"limiter bound for those creates + 1 status write per cluster = {ready_bound:.2f} s; "
                  f"raybus all-ready / that bound = {ready_s / ready_bound:.2f}x")
        print(f"API writes per converged cluster = {writes / args.clusters:.2f} "
              f"({', '.join(f'{k}={v / args.clusters:.2f}' for k, v in sorted(ops.items()))}); "
              f"failed={failed}")
        print(f"results by op:code = {dict(sorted(codes.items()))}")
        print("timeline, seconds from apply:")
        print("\n".join(timeline.lines(ready_s)))
        print("status writes seen until all ready, per cluster, by what they changed:")
        for label, n in status_changes.most_common(12):
            print(f"  {n / args.clusters:5.2f}  {label}")
        stored = {st: seqs_after[st] - seqs_before.get(st, 0) for st in seqs_after}
        print("stream messages per pod, apply to all-ready (each one a publish, its ack, a delivery): " + ", ".join(
            f"{st.removeprefix('RAYBUS_').lower()}={n / total:.2f}" for st, n in sorted(stored.items(), key=lambda kv: -kv[1])
            if n))
        print("CPU seconds from apply to all-ready: " + ", ".join(
            f"{n}={v:.2f}" for n, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
        print("CPU-ms per pod by process: " + ", ".join(
            f"{n}={1000 * v / total:.1f}" for n, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
        print("write syscalls per pod by process: " + ", ".join(
            f"{n}={v / total:.1f}" for n, v in sorted(syscw.items(), key=lambda kv: -kv[1])))
        reconciles, reconcile_s = _scrape(stack, "cluster")
        if reconciles:
            print(f"cluster-reconciler: {reconciles / args.clusters:.1f} reconciles per cluster, "
                  f"{1000 * reconcile_s / reconciles:.2f} ms each (controller_runtime_reconcile_total)")
            causes = _causes(stack, "cluster")
            print("  per cluster by cause -> decided (raybus_reconcile_causes_total): " + ", ".join(
                f"{c} -> {d}={n / args.clusters:.1f}" for (c, d), n in sorted(causes.items(), key=lambda kv: -kv[1])))
        rss: dict[str, float] = {}
        for name, pid in pids.items():
            status = Path(f"/proc/{pid}/status")
            hwm = next((line.split()[1] for line in status.read_text().splitlines()
                        if line.startswith("VmHWM")), "0") if status.exists() else "0"
            rss[name] = int(hwm) / 1024
            print(f"  peak RSS {name:<22} {rss[name]:.0f} MiB")
        raybus_cpu = sum(v for n, v in cpu.items() if n not in ("kube-sim", "nats-server", "redis-server", "prometheus"))
        return {"clusters": args.clusters, "pods": total, "pods_s": pods_s, "ready_s": ready_s,
                "bound_s": bound, "ready_bound_s": ready_bound, "floor_s": floor_s, "ops": {k: v / args.clusters for k, v in ops.items()},
                "failed": failed, "cpu": cpu, "raybus_cpu_ms_per_pod": 1000 * raybus_cpu / total,
                "rss": rss, "reconciles_per_cluster": reconciles / args.clusters, "scrape_s": args.scrape_s,
                "code": "base" if args.code else "this"}
    finally:
        if prometheus is not None:
            prometheus.stop()
        stack.stop()


def _code_env(code: str) -> dict[str, str]:
    """Run the stack's processes from another checkout (e.g. `git archive main`): its shared/,
    sim/ and services/* come first on every child's PYTHONPATH."""
    if not code:
        return {}
    root = Path(code).resolve()
    paths = [root / "shared", root / "sim", *sorted(p for p in (root / "services").iterdir() if p.is_dir())]
    return {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}


def _scrape(stack: LocalStack, controller: str) -> tuple[float, float]:
    """Reconciles and their total seconds, summed over the controller's replicas
    (controller-runtime's series; the controller named as KubeRay's, e.g. "raycluster")."""
    name = CONTROLLER_NAMES[Controller(controller)]
    count = seconds = 0.0
    for proc in stack.procs:
        if not proc.metrics_port or not proc.name.startswith(f"{controller}-reconciler"):
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.metrics_port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(f'controller_runtime_reconcile_total{{controller="{name}"'):
                    count += float(line.rsplit(" ", 1)[1])
                elif line.startswith(f'controller_runtime_reconcile_time_seconds_sum{{controller="{name}"'):
                    seconds += float(line.rsplit(" ", 1)[1])
    return count, seconds


def _causes(stack: LocalStack, controller: str) -> Counter[tuple[str, str]]:
    """raybus_reconcile_causes_total of the controller's replicas: (cause, decided) -> count."""
    out: Counter[tuple[str, str]] = Counter()
    for proc in stack.procs:
        if not proc.metrics_port or not proc.name.startswith(f"{controller}-reconciler"):
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{proc.metrics_port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("raybus_reconcile_causes_total{"):
                    labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.rindex("}")].split(","))
                    if labels.get("controller") != f'"{controller}"':
                        continue
                    out[(labels["cause"].strip('"'), labels["decided"].strip('"'))] += float(line.rsplit(" ", 1)[1])
    return out


def _summary(rows: list[dict[str, Any]]) -> None:
    """The cost curve, one line per size (issue: visible for 100, 300 and 1,000 clusters)."""
    print("\n" + machine())
    print("     variant  pods   pods-exist  ready   limiter-bound  pods/bound  ready/(bound+status)  "
          "creates/cl  deletes/cl  status/cl  reconciles/cl  raybus-CPU-ms/pod  RSS-KiB/pod(raybus)")
    for r in rows:
        raybus_rss = sum(v for n, v in r["rss"].items() if n not in ("kube-sim", "nats-server", "redis-server", "prometheus"))
        bound = max(r["bound_s"], r["floor_s"])
        print(f"{_variant(r):>12}  {r['pods']:>5}  {r['pods_s']:>9.1f}s  {r['ready_s']:>5.1f}s  "
              f"{r['bound_s']:>12.1f}s  {r['pods_s'] / bound:>9.2f}x  "
              f"{r['ready_s'] / max(r['ready_bound_s'], r['floor_s']):>18.2f}x  "
              f"{r['ops'].get('create', 0):>10.2f}  {r['ops'].get('delete', 0):>10.2f}  "
              f"{r['ops'].get('update_status', 0):>9.2f}  {r['reconciles_per_cluster']:>13.1f}  "
              f"{r['raybus_cpu_ms_per_pod']:>17.1f}  {1024 * raybus_rss / r['pods']:>19.1f}")
    # One row per process, one column per size: where the CPU goes, comparable across runs.
    names = sorted({n for r in rows for n in r["cpu"]},
                   key=lambda n: (n in ("kube-sim", "nats-server", "redis-server", "prometheus"), n))
    print("\nCPU-ms per pod, apply to all-ready (raybus processes first, then the simulator and servers)")
    print(f"{'process':<24}" + "".join(f"{_variant(r):>12}" for r in rows))
    for n in names:
        print(f"{n:<24}" + "".join(f"{1000 * r['cpu'].get(n, 0.0) / r['pods']:>12.1f}" for r in rows))
    print(f"{'raybus total':<24}" + "".join(f"{r['raybus_cpu_ms_per_pod']:>12.1f}" for r in rows))
    # The simulator runs the same code in every variant: raybus's CPU over its CPU takes out what
    # the machine's load does to both (other work on a shared machine slows every process).
    print(f"{'raybus / kube-sim':<24}" + "".join(
        f"{r['raybus_cpu_ms_per_pod'] / max(1000 * r['cpu'].get('kube-sim', 0.0) / r['pods'], 1e-9):>12.3f}"
        for r in rows))


def _variant(r: dict[str, Any]) -> str:
    """A column's name: size, then the base code, or this code and its scrape interval."""
    return f"{r['clusters']}/" + ("base" if r["code"] == "base" else f"{r['scrape_s']:.0f}s")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--clusters", default="100",
                   help="cluster count, or a comma-separated list run one after the other")
    p.add_argument("--workers", type=int, default=10)
    p.add_argument("--insecure", action="store_true",
                   help="a bare bus (no TLS, users or ACLs): what securing the bus costs, side by side")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=32)
    # KubeRay's client limits by default; the floor client has none, so also run with
    # --qps 100000 --burst 100000 to compare the architectures rather than the limiter.
    p.add_argument("--qps", type=float, default=100.0)
    p.add_argument("--burst", type=int, default=200)
    p.add_argument("--profile", default="",
                   help="directory: py-spy every raybus process from apply to ready, print the top functions")
    p.add_argument("--scrape-s", default="0",
                   help="a real Prometheus scraping every service this often (0: none, and no bus-state "
                        "reads); a comma-separated list runs each size with each, side by side")
    p.add_argument("--base", default="",
                   help="a checkout of another commit (e.g. `git archive main`): each size also runs "
                        "once with its services, unscraped, side by side")
    p.add_argument("--repeat", type=int, default=1, help="run the variants of each size this many times, in turn")
    p.add_argument("--profile-sim", action="store_true",
                   help="with --profile: py-spy the simulator (API server, kubelet, dashboards) too")
    args = p.parse_args()
    rows = []
    for count in [int(c) for c in str(args.clusters).split(",")]:
        variants = [("", float(s)) for s in str(args.scrape_s).split(",")]
        if args.base:
            variants.insert(0, (args.base, 0.0))
        for code, scrape in variants * args.repeat:  # interleaved: a load swing hits every variant
            rows.append(asyncio.run(run(argparse.Namespace(**{**vars(args), "clusters": count,
                                                               "scrape_s": scrape, "code": code}))))
    _summary(rows)


if __name__ == "__main__":
    main()
