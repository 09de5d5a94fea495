"""The Ray-event receiver cannot be knocked over by a holder of one cluster's token (it sits in the
head Pod's env): `python -m dashboard_poller` as deployed, its admission informers on the real
kube-apiserver, a RayCluster there whose uid the token is bound to. Bodies declared over 1 MiB are
refused (413) before they are read, streamed ones are cut off at 1 MiB (413), a burst of POSTs
beyond the per-cluster rate is 429 (another cluster's are not), a token of the same cluster name
with another uid is 403, and the process's peak memory stays under a bound through all of it (a
16 MiB body once took the poller to 3.3 GB)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from raybus.decisions.ray_events import MAX_BODY_BYTES, cluster_token, export_path
from raybus_sim.testing.envtest import ControlPlane
from raybus_sim.testing.servers import NatsServer, die_with_parent, free_ports, stop_process
from tests.integration.dashboard.poller_kit import until
from tests.integration.realapi.kit import REPO

pytestmark = pytest.mark.integration
KEY = "limits-test-key"
MIB = 1024 * 1024
# Peak resident memory the attacks below may add to the idle poller: four 1 MiB bodies buffered,
# one parsed at a time. Without the limits one 16 MiB body alone parsed into far more than this.
GROWTH_BOUND = 160 * MIB


def kib(status_line: str) -> int:
    return int(status_line.split()[0]) * 1024


def memory(pid: int) -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"rss": kib(fields["VmRSS"]), "peak": kib(fields["VmHWM"])}


@pytest.fixture
def clusters(ray_crds: ControlPlane, namespace: str) -> dict[str, str]:
    uids = {}
    for name in ("rc", "other"):
        body = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
                "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}}
        made = ray_crds.request("POST", f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters", body)
        uids[name] = made["metadata"]["uid"]
    return uids


@pytest.fixture
def poller(ray_crds: ControlPlane, namespace: str, nats_server: NatsServer, tmp_path: Path,
           clusters: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    events_port, metrics_port = free_ports(2)
    env = {**os.environ, "RAYBUS_NATS_URL": nats_server.url, "RAYBUS_KUBECONFIG": str(ray_crds.admin_kubeconfig),
           "RAYBUS_WATCH_NAMESPACE": namespace, "RAYBUS_RAY_EVENTS_KEY": KEY,
           "RAYBUS_RAY_EVENTS_HOST": "127.0.0.1", "RAYBUS_RAY_EVENTS_PORT": str(events_port),
           "RAYBUS_METRICS_PORT": str(metrics_port), "RAYBUS_METRICS_LOCAL": "1",
           "RAYBUS_DASHBOARD_URL_TEMPLATE": "http://127.0.0.1:9/{namespace}/{cluster}"}
    log = tmp_path / "poller.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dashboard_poller", "--replica-id", "p0"], cwd=REPO,
                                stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent())  # noqa: PLW1509
    try:
        yield proc, f"http://127.0.0.1:{events_port}"
    finally:
        stop_process(proc)
        print(log.read_text(errors="replace")[-3000:])


async def declared_only(base: str, path: str, length: int) -> bytes:
    """Headers announcing `length` bytes, and no body: what the receiver answers before reading."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {length}\r\n\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()


async def streamed(client: httpx.AsyncClient, url: str, total: int) -> int:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"["
        sent = 1
        while sent < total:
            yield b'{"eventType":"x"},' * 4096
            sent += 18 * 4096
    try:
        return (await client.post(url, content=chunks())).status_code
    except (httpx.RemoteProtocolError, httpx.WriteError, httpx.ReadError):
        return 413  # the server answered and closed while the body was still going out


async def test_bodies_rates_and_memory_are_bounded(poller: tuple[subprocess.Popen[bytes], str], namespace: str,
                                                   clusters: dict[str, str]) -> None:
    proc, base = poller
    path = export_path(namespace, "rc", cluster_token(KEY, namespace, "rc", clusters["rc"]))
    other = export_path(namespace, "other", cluster_token(KEY, namespace, "other", clusters["other"]))
    stale = export_path(namespace, "rc", cluster_token(KEY, namespace, "rc", "an-earlier-incarnation"))
    async with httpx.AsyncClient(timeout=30) as client:
        async def taken() -> bool:
            assert proc.poll() is None
            try:
                return (await client.post(base + path, json=[])).status_code == 204
            except httpx.TransportError:
                return False
        await until(taken, timeout=60, what="the receiver up, the RayCluster in its informer")
        idle = memory(proc.pid)["rss"]
        assert (await client.post(base + stale, json=[])).status_code == 403
        # 20 bodies announced at 16 MiB: refused on their headers, nothing of them read.
        heads = await asyncio.gather(*(declared_only(base, path, 16 * MIB) for _ in range(20)))
        assert {h.split()[1] for h in heads} <= {b"413", b"429"} and any(b" 413 " in h for h in heads)
        # Chunked bodies (no length) of 16 MiB each: cut off at the limit.
        cut = await asyncio.gather(*(streamed(client, base + path, 16 * MIB) for _ in range(6)))
        assert set(cut) <= {413, 429} and 413 in cut
        # Bodies just under the limit, as fast as possible: taken or rate-limited, never more.
        event = {"eventType": "ACTOR_LIFECYCLE_EVENT", "actorLifecycleEvent": {"actorId": "a" * 64}}
        body = json.dumps([event] * (MAX_BODY_BYTES // (len(json.dumps(event)) + 2))).encode()
        assert len(body) <= MAX_BODY_BYTES
        started = time.monotonic()
        answers = await asyncio.gather(*(client.post(base + path, content=body) for _ in range(120)))
        # The bucket (20 a second, burst 40) refills while the flood is read: a slow machine takes
        # more seconds, and so more bodies, but never more than the bucket gives in that time.
        bound = 40 + 20 * (time.monotonic() - started)
        codes = [a.status_code for a in answers]
        assert set(codes) <= {204, 429} and 429 in codes and codes.count(204) <= bound, (bound, codes)
        # Another cluster's head is not held back by rc's flood.
        assert (await client.post(base + other, json=[])).status_code == 204
    assert proc.poll() is None
    peak = memory(proc.pid)["peak"]
    print(f"receiver memory: idle {idle / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB")
    assert peak - idle < GROWTH_BOUND, f"peak {peak / MIB:.0f} MiB, idle {idle / MIB:.0f} MiB"
