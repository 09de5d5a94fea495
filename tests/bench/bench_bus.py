"""Bus-hop latency: watcher-style publish (object + trigger) -> reconcile start, p50/p99.

Measured side by side with the floor in the same run: a raw JetStream publish -> push-subscriber
receive of one message on the same nats-server. Run: `python -m tests.bench.bench_bus`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import nats

from raybus.bus import security
from raybus.bus import subjects as s
from raybus.bus.declare import declare_bus
from raybus.bus.envelopes import ObjectKey
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime
from raybus_sim.testing.servers import start_nats
from tests.bench import machine, pct
from tests.integration.bus.helpers import publish_version


async def _hops(nc: nats.NATS, settings: BusSettings, *, samples: int, debounce_s: float,
                prefix: str, pub: nats.NATS | None = None) -> list[float]:
    """Publish `samples` objects (object + trigger, as the watcher does); seconds until each reconcile."""
    sent: dict[str, float] = {}
    hops: list[float] = []
    done = asyncio.Event()

    async def reconcile(key: ObjectKey) -> float | None:
        started = sent.pop(key.name, None)
        if started is not None:
            hops.append(time.perf_counter() - started)
            if len(hops) >= samples:
                done.set()
        return None

    runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id=f"bench-{prefix}",
                                cache=ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER]),
                                primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile,
                                bus=settings, debounce_s=debounce_s)
    await runtime.start()
    js = (pub or nc).jetstream()
    for i in range(samples):
        name = f"{prefix}{i}"
        sent[name] = time.perf_counter()
        await publish_version(js, name=name, version=1, partitions=16)
        await asyncio.sleep(0.002)  # latency, not throughput: don't queue behind each other
    await asyncio.wait_for(done.wait(), 60)
    await runtime.stop()
    return hops


def _line(label: str, values_s: list[float]) -> str:
    ms = [v * 1000 for v in values_s]
    return f"{label} p50={statistics.median(ms):.2f} ms p99={pct(ms, 0.99):.2f} ms"


async def bench(samples: int) -> None:
    server = start_nats(Path(tempfile.mkdtemp(prefix="bench-bus-")))
    try:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        settings = BusSettings(partitions=16)
        await ensure_streams(js, settings)
        # The hop itself (debounce off), then with the reconcilers' default 0.1 s debounce, which
        # deliberately waits so that the events one change fans out into become one reconcile.
        hop = await _hops(nc, settings, samples=samples, debounce_s=0.0, prefix="h")
        debounced = await _hops(nc, settings, samples=samples, debounce_s=0.1, prefix="d")

        # Floor: one raw JetStream publish -> push subscriber receive on the same server.
        await js.add_stream(name="FLOOR", subjects=["floor.>"])
        floor: list[float] = []
        got = asyncio.Queue[float]()

        async def on_msg(msg: nats.aio.msg.Msg) -> None:
            got.put_nowait(time.perf_counter())

        await js.subscribe("floor.>", cb=on_msg, ordered_consumer=True)
        for i in range(samples):
            t0 = time.perf_counter()
            await js.publish(f"floor.{i}", b"x")
            floor.append(await got.get() - t0)
        await nc.close()
        print(machine())
        print(f"samples={samples}")
        print(_line("raybus publish(object+trigger) -> reconcile start, debounce off: ", hop))
        print(_line("the same with the default 0.1 s trigger debounce:             ", debounced))
        print(_line("floor  jetstream publish -> receive:                           ", floor))
        print(f"ratio (debounce off / floor) p50={statistics.median(hop) / statistics.median(floor):.2f}x "
              f"p99={pct(hop, 0.99) / pct(floor, 0.99):.2f}x")
        secure = await _secure_hops(samples)
        print(_line("the hop on the secured bus (TLS, watcher -> cluster-reconciler users):", secure))
        print(f"secured / plain (debounce off) p50={statistics.median(secure) / statistics.median(hop):.2f}x "
              f"p99={pct(secure, 0.99) / pct(hop, 0.99):.2f}x")
    finally:
        server.stop()


async def _secure_hops(samples: int) -> list[float]:
    """The same hop on a bus as deployed (bus/security.py): TLS, the watcher publishing and the
    cluster-reconciler consuming under their own users and permissions."""
    home = Path(tempfile.mkdtemp(prefix="bench-bus-tls-"))
    server = start_nats(home / "nats", secrets=security.generate(home / "secrets"))
    try:
        await declare_bus(server.options("bus-admin"))
        reconciler = await nats.connect(**server.options("cluster-reconciler"))
        watcher = await nats.connect(**server.options("watcher"))
        hops = await _hops(reconciler, BusSettings(partitions=16, declare=False), samples=samples,
                           debounce_s=0.0, prefix="t", pub=watcher)
        await watcher.close()
        await reconciler.close()
        return hops
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=500)
    asyncio.run(bench(parser.parse_args().samples))


if __name__ == "__main__":
    main()
