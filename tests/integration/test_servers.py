"""The harness starts real servers: JetStream answers and Redis persists across a restart."""

from __future__ import annotations

import nats
import redis.asyncio as aioredis

from raybus.testing.servers import NatsServer, RedisServer


async def test_nats_has_jetstream(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    info = await nc.jetstream().account_info()
    assert info.limits is not None
    await nc.close()


async def test_redis_keeps_data_across_restart(redis_server: RedisServer) -> None:
    client = aioredis.from_url(redis_server.url)
    await client.set("k", "v")
    await client.aclose()
    redis_server.restart()
    client = aioredis.from_url(redis_server.url)
    assert await client.get("k") == b"v"
    await client.aclose()
