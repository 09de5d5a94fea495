"""An informer that reaches the API server again wakes the others sleeping in their backoff.

Found by the chaos soak (make test's seed 1, 2 min): after an API server restart the RayCluster
informer, at a 6.4 s backoff after 4 connection errors, came back ~3 s after the Pod informer had
relisted; the cluster-reconciler saw the garbage collector remove a deleted RayCluster's Pods but
not the deletion, and created 3 head Pods in 2 s (each seen, then collected). Here one informer
keeps failing against a dead port until its backoff is long; another, sharing the watcher's
Reconnect, lists the local API server: the first must try again at once, not after its backoff.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from raybus.adapters.informer import Informer, Reconnect
from raybus.adapters.kube import KubeClient, new_api_client
from raybus.bus import subjects as s
from raybus_sim.apiserver import write_kubeconfig
from tests.integration.boundary.conftest import until
from watcher.routing import WatchSpec

SPEC = WatchSpec(s.Kind.POD, "v1", "Pod", label_selector="ray.io/cluster")


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: connections are refused


async def test_an_informer_back_on_the_api_server_wakes_the_sleeping_ones(kubeconfig: Path, tmp_path: Path) -> None:
    async def sink(etype: str, obj: dict[str, object], old: object) -> bool:
        return True

    reconnect = Reconnect()
    down = KubeClient(await new_api_client(str(write_kubeconfig(tmp_path / "down", f"http://127.0.0.1:{dead_port()}"))))
    up = KubeClient(await new_api_client(str(kubeconfig)))
    sleeper = Informer(down, SPEC, sink=sink, namespace="default", reconnect=reconnect)
    waker = Informer(up, SPEC, sink=sink, namespace="default", reconnect=reconnect)
    tasks = [asyncio.create_task(sleeper.run())]
    try:
        # 4 failures: its backoff is now 6.4 s (x1-1.5 jitter), as the RayCluster informer's was
        await until(lambda: _async(sleeper.api_failures >= 4), timeout=30.0, what="4 failed lists")
        failures = sleeper.api_failures
        await asyncio.sleep(0.2)  # in its 6.4 s sleep
        tasks.append(asyncio.create_task(waker.run()))
        await asyncio.wait_for(waker.synced.wait(), 15.0)
        reached = time.monotonic()
        await until(lambda: _async(sleeper.api_failures > failures), timeout=15.0, what="the sleeper's next try")
        assert time.monotonic() - reached < 1.5  # before: 6.4-9.6 s into its backoff
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await down.close()
        await up.close()


async def _async(value: bool) -> bool:
    return value
