"""Bus contract across processes: exclusivity (b), coalescing (a) and snapshot-first (c).

Replicas are real processes (tests/integration/bus/worker_proc.py) against real nats-server and
redis-server; Redis is also where they record what they saw, for the assertions.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import redis.asyncio as aioredis

from raybus.bus import subjects as s
from raybus.bus.streams import BusSettings, ensure_streams
from raybus_sim.testing.servers import NatsServer, RedisServer
from tests.integration.bus.helpers import publish_version

KEYS = 24
ROUNDS = 6
PARTITIONS = 8


def _spawn(nats_url: str, redis_url: str, replica: str, log: Path,
           work_ms: int = 15) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.bus.worker_proc", "--nats", nats_url,
         "--redis", redis_url, "--replica", replica, "--work-ms", str(work_ms)],
        cwd=Path(__file__).resolve().parents[3], stdout=log.open("wb"), stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )


async def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await cond():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def test_two_replicas_kill_one_no_loss_no_overlap(nats_server: NatsServer, redis_server: RedisServer,
                                     tmp_path: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, BusSettings(partitions=PARTITIONS))
    rds = aioredis.from_url(redis_server.url, decode_responses=True)
    procs = [_spawn(nats_server.url, redis_server.url, f"r{i}", tmp_path / f"r{i}.log")
             for i in range(2)]
    try:
        await _wait(lambda: _count(rds, "ready", 2), 30, "both replicas ready")
        for round_no in range(1, ROUNDS + 1):
            for k in range(KEYS):
                await publish_version(js, name=f"c{k}", version=round_no, partitions=PARTITIONS)
            if round_no == 3:
                procs[0].send_signal(signal.SIGKILL)  # mid-stream, possibly mid-reconcile
            await asyncio.sleep(0.05)

        async def all_final() -> bool:
            for k in range(KEYS):
                seen = await rds.lrange(f"seen:default/c{k}", -1, -1)
                if not seen or not seen[0].endswith(f":{ROUNDS}"):
                    return False
            return True

        await _wait(all_final, 40, "every key reconciled at its final version")
        for k in range(KEYS):
            spans = sorted(tuple(map(float, v.split(":")[:2]))
                           for v in await rds.lrange(f"interval:default/c{k}", 0, -1))
            for (_, end), (start, _) in itertools.pairwise(spans):
                assert start >= end, f"c{k}: two reconciles overlapped"
        survivors = {s.split(":")[0] for k in range(KEYS)
                     for s in await rds.lrange(f"seen:default/c{k}", -1, -1)}
        assert survivors == {"r1"}  # the killed replica's partitions were taken over
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
        await rds.aclose()
        await nc.close()


async def _count(rds: aioredis.Redis, key: str, n: int) -> bool:
    return int(await rds.scard(key)) >= n


async def test_burst_for_one_object_coalesces(nats_server: NatsServer, redis_server: RedisServer,
                                              tmp_path: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, BusSettings(partitions=PARTITIONS))
    rds = aioredis.from_url(redis_server.url, decode_responses=True)
    proc = _spawn(nats_server.url, redis_server.url, "r0", tmp_path / "r0.log", work_ms=300)
    try:
        await _wait(lambda: _count(rds, "ready", 1), 30, "replica ready")
        burst = 50
        for version in range(1, burst + 1):
            await publish_version(js, name="hot", version=version, partitions=PARTITIONS)

        async def final() -> bool:
            seen = await rds.lrange("seen:default/hot", -1, -1)
            return bool(seen) and seen[0].endswith(f":{burst}")

        await _wait(final, 30, "the burst's last version reconciled")
        runs = await rds.llen("seen:default/hot")
        assert runs <= 3, f"{burst} triggers became {runs} reconciles"
    finally:
        proc.terminate()
        proc.wait(10)
        await rds.aclose()
        await nc.close()


async def test_replica_starts_from_full_snapshot(nats_server: NatsServer, redis_server: RedisServer,
                                                 tmp_path: Path) -> None:
    """Objects published before any replica exists, with their triggers lost (purged): a new
    replica still reconciles every one of them, and its first reconcile already sees them all."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, BusSettings(partitions=PARTITIONS))
    for k in range(KEYS):
        await publish_version(js, name=f"c{k}", version=7, partitions=PARTITIONS)
    await js.purge_stream(s.trigger_stream(s.Controller.CLUSTER))
    rds = aioredis.from_url(redis_server.url, decode_responses=True)
    proc = _spawn(nats_server.url, redis_server.url, "late", tmp_path / "late.log")
    try:
        async def all_seen() -> bool:
            for k in range(KEYS):
                if await rds.lrange(f"seen:default/c{k}", -1, -1) != ["late:7"]:
                    return False
            return True

        await _wait(all_seen, 30, "every pre-existing object reconciled")
        assert int(await rds.get("first-cache-size:late")) == KEYS
    finally:
        proc.terminate()
        proc.wait(10)
        await rds.aclose()
        await nc.close()
