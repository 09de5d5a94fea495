"""A reconciler replica for the bus-contract tests, run as its own process.

Its reconcile records what it saw in Redis (a real server shared by all replicas), so the test
can check exclusivity (no two reconciles of one key overlap in time), freshness (the last reconcile of
each key saw its last version) and coalescing (fewer reconciles than triggers).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time

import nats
import redis.asyncio as aioredis

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.bus.streams import BusSettings
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nats", required=True)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--replica", required=True)
    parser.add_argument("--work-ms", type=float, default=20)
    args = parser.parse_args()
    nc = await nats.connect(args.nats)
    rds = aioredis.from_url(args.redis)
    cache = ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER])

    async def reconcile(key: ObjectKey) -> float | None:
        k = str(key)
        started = time.time()
        obj = cache.get(s.Kind.RAYCLUSTER, key.namespace, key.name)
        await rds.setnx(f"first-cache-size:{args.replica}", len(cache.keys(s.Kind.RAYCLUSTER)))
        await asyncio.sleep(args.work_ms / 1000)
        version = (obj or {}).get("metadata", {}).get("resourceVersion", "none")
        await rds.rpush(f"seen:{k}", f"{args.replica}:{version}")
        await rds.incr("reconciles")
        # Completed reconcile intervals: the test checks that no two of one key overlap.
        await rds.rpush(f"interval:{k}", f"{started}:{time.time()}:{args.replica}")
        return None

    runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id=args.replica,
                                cache=cache, primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile,
                                bus=BusSettings(partitions=8, lease_ttl_s=3.0, ack_wait_s=5.0))
    await runtime.start()
    await rds.sadd("ready", args.replica)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runtime.stop()
    await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
