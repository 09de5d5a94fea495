"""Boundary throughput: watcher events/s published and executor pod creates/s, each measured side
by side with its floor in the same run:
- executor floor: raw kubernetes-asyncio CoreV1Api.create_namespaced_pod at the same concurrency;
- watcher floor: raw JetStream publishes of the same ObjectEvent bytes (no routing, no triggers).

The local API server runs as its own process (python -m raybus_sim.apiserver, no kubelet), like
nats-server; watcher and executor run in this process. Run: `python -m tests.bench.bench_boundary`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
import yaml
from kubernetes_asyncio import client as kclient
from kubernetes_asyncio import config as kconfig

from command_executor.app import CommandExecutorService, ExecutorSettings
from raybus.bus import subjects as s
from raybus.bus.codec import encode, publish_headers
from raybus.bus.envelopes import CommandBatch, ObjectEvent, ObjectKey
from raybus.bus.publish import publish_commands
from raybus.bus.streams import ensure_streams
from raybus.decisions.commands import CreateObject
from raybus_sim.apiserver import DEFAULT_CRD_DIR
from raybus_sim.testing.servers import free_port, start_nats
from tests.bench import machine
from tests.integration.boundary.conftest import RAY_KINDS, _minimal_crd
from watcher.app import Watcher, WatcherSettings

REPO = Path(__file__).resolve().parents[2]


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"ray.io/cluster": "bench", "ray.io/node-type": "worker"}},
            "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.52.0",
                                     "resources": {"requests": {"cpu": "1"}}}]}}


async def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("API server did not start")


async def raw_creates(kubeconfig: Path, names: list[str], *, concurrency: int) -> float:
    api = await kconfig.new_client_from_config(config_file=str(kubeconfig))
    core = kclient.CoreV1Api(api)
    sem = asyncio.Semaphore(concurrency)

    async def one(name: str) -> None:
        async with sem:
            await core.create_namespaced_pod("default", pod(name))

    start = time.perf_counter()
    await asyncio.gather(*(one(n) for n in names))
    elapsed = time.perf_counter() - start
    await api.close()
    return len(names) / elapsed


async def executor_creates(nats_url: str, kubeconfig: Path, *, names: list[str], concurrency: int,
                           qps: float, burst: int) -> float:
    """Batches are queued on RAYBUS_COMMANDS first (as reconcilers would have), then the executor
    starts: the clock measures the executor alone, not this process publishing them."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    for i, name in enumerate(names):
        # One batch per pod, each for its own RayCluster key: the executor may apply them in parallel.
        await publish_commands(js, CommandBatch(
            key=ObjectKey(namespace="default", name=f"bench-{i}"), kind="raycluster", controller="cluster",
            reconcile_id=f"bench-{name}", commands=[CreateObject(reason="bench", object=pod(name))]))
    await nc.close()
    service = CommandExecutorService(ExecutorSettings(
        nats_url=nats_url, kubeconfig=str(kubeconfig), replica_id="bench", concurrency=concurrency,
        kube_qps=qps, kube_burst=burst, admission=False))
    start = time.perf_counter()
    await service.start()
    while service.applied < len(names):
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - start
    await service.stop()
    return len(names) / elapsed


async def raw_publishes(nats_url: str, n: int) -> float:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    payload = encode(ObjectEvent(key=ObjectKey(namespace="default", name="x"), kind="pod", type="ADDED",
                                 object=pod("x")))
    start = time.perf_counter()
    for i in range(n):
        await js.publish(s.object_subject("pod", "floor", f"p{i}"), payload, headers=publish_headers())
    elapsed = time.perf_counter() - start
    await nc.close()
    return n / elapsed


async def watcher_rates(nats_url: str, kubeconfig: Path, *, existing: int, live: int) -> tuple[float, float]:
    """(initial-list events/s over `existing` pods, live watch events/s while `live` pods are created)."""
    watcher = Watcher(WatcherSettings(nats_url=nats_url, kubeconfig=str(kubeconfig), replica_id="bench",
                                      kube_qps=10_000, kube_burst=10_000))
    start = time.perf_counter()
    await watcher.start()
    await watcher.wait_synced(timeout=300)
    list_rate = watcher.published / (time.perf_counter() - start)
    before = watcher.published
    start = time.perf_counter()
    creator = asyncio.create_task(raw_creates(kubeconfig, [f"live-{i}" for i in range(live)], concurrency=32))
    while watcher.published - before < live:
        await asyncio.sleep(0.005)
    live_rate = live / (time.perf_counter() - start)
    await creator
    await watcher.stop()
    assert existing <= before
    return list_rate, live_rate


async def bench(pods: int, concurrency: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-boundary-"))
    nats_server = start_nats(tmp / "nats")
    port = free_port()
    kubeconfig = tmp / "kubeconfig"
    crd_dir = DEFAULT_CRD_DIR
    if not any("rayclusters" in p.read_text() for p in DEFAULT_CRD_DIR.glob("*.y*ml")):
        crd_dir = tmp / "crds"  # deploy/crds not generated yet: schemaless stand-ins
        crd_dir.mkdir()
        for kind, plural in RAY_KINDS:
            (crd_dir / f"{plural}.yaml").write_text(yaml.safe_dump(_minimal_crd(kind, plural)))
    api = subprocess.Popen([sys.executable, "-m", "raybus_sim.apiserver", "--port", str(port),  # noqa: ASYNC220
                            "--kubeconfig", str(kubeconfig), "--no-kubelet", "--crd-dir", str(crd_dir)],
                           cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_port(port)
        while not kubeconfig.exists():
            await asyncio.sleep(0.05)
        nc = await nats.connect(nats_server.url)
        await ensure_streams(nc.jetstream())
        await nc.close()
        floor = await raw_creates(kubeconfig, [f"raw-{i}" for i in range(pods)], concurrency=concurrency)
        fast = await executor_creates(nats_server.url, kubeconfig, names=[f"exe-{i}" for i in range(pods)],
                                      concurrency=concurrency, qps=100_000, burst=100_000)
        limited_n = min(pods, 600)
        limited = await executor_creates(nats_server.url, kubeconfig, names=[f"lim-{i}" for i in range(limited_n)],
                                         concurrency=concurrency, qps=100, burst=200)
        pub_floor = await raw_publishes(nats_server.url, 2 * pods)
        list_rate, live_rate = await watcher_rates(nats_server.url, kubeconfig, existing=2 * pods + limited_n,
                                                   live=pods)
        print(machine())
        print(f"pods={pods} concurrency={concurrency} (API server and nats-server are separate processes)")
        print(f"  raw kubernetes-asyncio create_namespaced_pod  {floor:8.0f} pods/s   (floor)")
        print(f"  executor, limiter off                         {fast:8.0f} pods/s   ({fast / floor:.0%} of floor)")
        print(f"  executor, KubeRay limiter 100 qps / 200 burst {limited:8.0f} pods/s   ({limited_n} pods: "
              f"200 at burst, then 100/s, so the bound is {limited_n / (max(limited_n - 200, 0) / 100 or 1):.0f})")
        print(f"  raw JetStream publish of an ObjectEvent       {pub_floor:8.0f} msgs/s   (floor)")
        print(f"  watcher initial list -> events+triggers       {list_rate:8.0f} events/s "
              f"({list_rate / pub_floor:.0%} of floor; 2 publishes per event: object + trigger)")
        print(f"  watcher live watch while pods are created     {live_rate:8.0f} events/s "
              f"(bounded by the concurrent creates)")
    finally:
        api.terminate()
        api.wait(10)
        nats_server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench_boundary")
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(bench(args.pods, args.concurrency))


if __name__ == "__main__":
    main()
