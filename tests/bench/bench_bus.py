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

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime
from raybus.testing.servers import start_nats
from tests.integration.bus.helpers import publish_version


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(samples: int) -> None:
    server = start_nats(Path(tempfile.mkdtemp(prefix="bench-bus-")))
    try:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        settings = BusSettings(partitions=16)
        await ensure_streams(js, settings)
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

        runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id="bench",
                                    cache=ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER]),
                                    primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile,
                                    bus=settings)
        await runtime.start()
        for i in range(samples):
            name = f"c{i}"
            sent[name] = time.perf_counter()
            await publish_version(js, name=name, version=1, partitions=16)
            await asyncio.sleep(0.002)  # latency, not throughput: don't queue behind each other
        await asyncio.wait_for(done.wait(), 60)
        await runtime.stop()

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
        ours = [h * 1000 for h in hops]
        raw = [f * 1000 for f in floor]
        print(f"samples={samples}")
        print(f"raybus publish(object+trigger) -> reconcile start: p50={statistics.median(ours):.2f} ms "
              f"p99={pct(ours, 0.99):.2f} ms")
        print(f"floor  jetstream publish -> receive:               p50={statistics.median(raw):.2f} ms "
              f"p99={pct(raw, 0.99):.2f} ms")
        print(f"ratio p50={statistics.median(ours) / statistics.median(raw):.2f}x "
              f"p99={pct(ours, 0.99) / pct(raw, 0.99):.2f}x")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=500)
    asyncio.run(bench(parser.parse_args().samples))


if __name__ == "__main__":
    main()
