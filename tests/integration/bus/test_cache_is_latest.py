"""ObjectCache.is_latest on a real nats-server: a decision made on a copy of an object that the
bus has already replaced is detected with one request, even while the cache's consumer for that
kind is stalled (the chaos soak's 4 head Pods for a deleted RayCluster: its deletion sat behind
a consumer whose NATS node had died, while the GC's Pod deletions arrived on another)."""

from __future__ import annotations

import asyncio
from typing import Any

import nats

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent, ObjectKey
from raybus.bus.publish import publish_object
from raybus.bus.streams import ensure_streams
from raybus.runtime.cache import ObjectCache
from raybus_sim.testing.servers import NatsServer
from tests.integration.bus.helpers import publish_version


async def _cache_holding_rc(nats_server: NatsServer) -> tuple[Any, Any, ObjectCache]:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    await publish_version(js, name="rc", version=1, partitions=4)
    cache = ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER])
    await asyncio.wait_for(cache.start(), 10)
    return nc, js, cache


async def test_a_copy_the_bus_has_replaced_is_not_the_latest(nats_server: NatsServer) -> None:
    nc, js, cache = await _cache_holding_rc(nats_server)
    try:
        held = cache.held_seq(s.Kind.RAYCLUSTER, "default", "rc")
        assert held > 0 and cache.get(s.Kind.RAYCLUSTER, "default", "rc") is not None
        assert await cache.is_latest(s.Kind.RAYCLUSTER, "default", "rc", held)
        assert await cache.is_latest(s.Kind.RAYCLUSTER, "default", "unknown", 0)  # nothing to compare
        # The cache's consumer stops (a stalled ordered consumer), the RayCluster is deleted.
        for sub in cache._subs:
            await sub.unsubscribe()
        await publish_object(js, ObjectEvent(
            key=ObjectKey(namespace="default", name="rc"), kind=s.Kind.RAYCLUSTER.value, type="DELETED",
            object={"apiVersion": "ray.io/v1", "kind": "RayCluster",
                    "metadata": {"name": "rc", "namespace": "default", "resourceVersion": "2"}}))
        assert cache.get(s.Kind.RAYCLUSTER, "default", "rc") is not None  # the stale copy
        assert not await cache.is_latest(s.Kind.RAYCLUSTER, "default", "rc", held, timeout=0.2)
    finally:
        await nc.close()


async def test_a_live_cache_waits_for_the_newer_copy(nats_server: NatsServer) -> None:
    nc, js, cache = await _cache_holding_rc(nats_server)
    try:
        held = cache.held_seq(s.Kind.RAYCLUSTER, "default", "rc")
        await publish_version(js, name="rc", version=2, partitions=4)
        # Not the latest, and by the time it says so the cache holds the newer copy.
        assert not await cache.is_latest(s.Kind.RAYCLUSTER, "default", "rc", held)
        newer = cache.get(s.Kind.RAYCLUSTER, "default", "rc")
        assert newer is not None and newer["metadata"]["resourceVersion"] == "2"
        assert cache.held_seq(s.Kind.RAYCLUSTER, "default", "rc") > held
    finally:
        await cache.stop()
        await nc.close()
