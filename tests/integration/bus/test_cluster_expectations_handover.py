"""Scale expectations across two cluster-reconciler replicas whose caches disagree about a deletion
(chaos soak, seed 1: two head Pods 2.6 s apart after a RayCluster's deletion, both decided by one
replica, the second with all its workers too). Real nats-server and redis-server, the real app.

Replica A decides on a cache that still holds the deleted RayCluster (its RayCluster consumer
lags behind a NATS node restart) and creates the head and workers. The partition moves to B,
whose cache has the deletion: B's "NotFound" dropped the expectations from Redis. The partition
comes back to A, still lagging: A found no expectations, and the Pods it had created already gone
(garbage collected), so it created them all again under new names. Kept (with a TTL) and tagged
with the RayCluster's uid, the expectations hold A back, and never a new RayCluster of that name.
"""

from __future__ import annotations

from typing import Any

from cluster_reconciler.app import ClusterReconcilerApp
from raybus.bus.envelopes import CommandBatch, ObjectEvent
from raybus.decisions.settings import DecisionSettings
from raybus.runtime.settings import ReconcilerSettings
from raybus_sim.testing.servers import NatsServer, RedisServer
from tests.integration.bus.test_cluster_reconciler_glue import KEY, _batches, _cluster


async def _replica(nats_server: NatsServer, redis_server: RedisServer, name: str) -> ClusterReconcilerApp:
    app = ClusterReconcilerApp(ReconcilerSettings(service="cluster-reconciler", nats_url=nats_server.url,
                                              redis_url=redis_server.url, replica_id=name), DecisionSettings())
    await app.start()
    return app


def _heads(batches: list[CommandBatch]) -> list[str]:
    return [str(getattr(c, "object", {})["metadata"]["name"]) for b in batches for c in b.commands
            if c.op == "create" and getattr(c, "object", {}).get("kind") == "Pod"
            and (getattr(c, "object", {}).get("metadata") or {}).get("labels", {}).get("ray.io/node-type") == "head"]


def _event(obj: dict[str, Any], type_: str = "ADDED") -> ObjectEvent:
    return ObjectEvent(key=KEY, kind="raycluster", type=type_, resource_version="7", object=obj)


async def test_a_lagging_owner_never_decides_again_what_the_previous_owner_forgot(
        nats_server: NatsServer, redis_server: RedisServer) -> None:
    a = await _replica(nats_server, redis_server, "a")
    b = await _replica(nats_server, redis_server, "b")
    try:
        assert a.reconciler and a.runtime and b.reconciler and b.context
        # A's cache holds the RayCluster (no trigger: only this test reconciles it); B's has its deletion.
        assert a.context is not None
        a.context.cache.apply(_event(_cluster()))
        await a.reconciler.reconcile(KEY)
        first = _heads(await _batches(nats_server))
        assert len(first) == 1
        b.context.cache.apply(_event(_cluster()))
        b.context.cache.apply(_event(_cluster(), "DELETED"))
        await b.reconciler.reconcile(KEY)  # NotFound
        # The partition comes back to A (a new ownership epoch: its memo is not Redis's truth);
        # its cache still has the RayCluster and no Pods.
        a.runtime._epochs[a.runtime.partition(KEY)] = a.runtime.epoch(KEY) + 1
        await a.reconciler.reconcile(KEY)
        assert _heads(await _batches(nats_server)) == first  # before: a second head, new name

        # A new RayCluster of the same name (another uid) is not held back by them.
        def reborn(body: dict[str, Any]) -> None:
            body["metadata"]["uid"] = "uid-glue-2"
        a.context.cache.apply(_event(_cluster(reborn)))
        await a.reconciler.reconcile(KEY)
        heads = _heads(await _batches(nats_server))
        assert len(heads) == 2 and heads[0] == first[0]
    finally:
        await a.stop()
        await b.stop()
