"""The harness starts real servers: JetStream answers and Redis persists across a restart."""

from __future__ import annotations

from pathlib import Path

import nats
import redis.asyncio as aioredis

from raybus_sim.testing.servers import NatsServer, RedisServer, start_nats, start_redis


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


def test_relative_data_dirs_work(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`raybus up` passes `.raybus/...`: servers run with cwd=data dir, so the path must not be
    resolved a second time relative to it."""
    monkeypatch.chdir(tmp_path)
    nats_srv = start_nats(Path("rel/nats"))
    redis_srv = None
    try:
        redis_srv = start_redis(Path("rel/redis"))
        assert nats_srv.data_dir == tmp_path / "rel/nats"
        assert redis_srv.proc is not None and redis_srv.proc.poll() is None
        assert (tmp_path / "rel/nats/jetstream").is_dir()
    finally:
        nats_srv.stop()
        if redis_srv is not None:
            redis_srv.stop()
