"""A Pod event wakes its RayCluster from the cluster-reconciler's own cache, with no trigger on
the bus (cluster_reconciler.app._on_pod, podutil.clusters_to_wake; the watcher publishes no
RayCluster trigger for a labelled Pod). Real nats-server and redis-server, the real app; the
object events are published as the watcher does, and no trigger is published at all."""

from __future__ import annotations

from typing import Any

import nats

from cluster_reconciler.app import ClusterReconcilerApp
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent, ObjectKey, Trigger
from raybus.bus.publish import publish_object
from raybus.bus.streams import ensure_streams
from raybus.decisions.settings import DecisionSettings
from raybus.runtime.settings import ReconcilerSettings
from raybus_sim.testing.servers import NatsServer, RedisServer
from raybus_sim.testing.streams import stream_messages
from tests.integration.boundary.conftest import until


def _pod(name: str, cluster: str, rv: int, **status: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv),
                         "uid": f"uid-{name}", "labels": {"ray.io/cluster": cluster, "ray.io/node-type": "worker",
                                                          "ray.io/group": "small-group"}},
            "spec": {"containers": [{"name": "ray-worker"}], "restartPolicy": "Never"},
            "status": {"phase": "Pending", **status}}


async def test_pod_events_wake_their_raycluster_without_a_trigger(
        nats_server: NatsServer, redis_server: RedisServer) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    # No minimum interval: each wake is its own run, so a missing one shows.
    app = ClusterReconcilerApp(ReconcilerSettings(service="cluster-reconciler", nats_url=nats_server.url,
                                              redis_url=redis_server.url, replica_id="wakes",
                                              min_interval_s=0.0), DecisionSettings())
    await app.start()
    runtime = app.runtime
    assert runtime is not None
    woken: list[tuple[str, str]] = []  # (cluster, cause) of every run a bus event asked for
    process = runtime._process

    async def recording(key: ObjectKey, pendings: list[Any]) -> None:
        woken.extend((key.name, p.cause) for p in pendings)
        await process(key, pendings)

    runtime._process = recording  # type: ignore[method-assign]

    async def publish(name: str, cluster: str, rv: int, etype: str = "MODIFIED", **status: Any) -> None:
        obj = _pod(name, cluster, rv, **status)
        await publish_object(js, ObjectEvent(key=ObjectKey(namespace="default", name=name), kind="pod",
                                             type=etype, resource_version=str(rv), object=obj))

    try:
        await publish("w-a-1", "a", 10, "ADDED")
        await until(lambda: _async(("a", "ADDED pod") in woken), what="the ADDED pod wake")
        # The kubelet's bookkeeping only (no decision reads it): no wake. A later event of
        # another cluster is applied after it (one ordered consumer), so once that one woke
        # its cluster, a wake of "a" would have been queued already.
        await publish("w-a-1", "a", 11, hostIP="172.18.0.2", startTime="2026-01-01T00:00:00Z")
        await publish("w-b-1", "b", 12, "ADDED")
        await until(lambda: _async(("b", "ADDED pod") in woken), what="the other cluster's wake")
        await until(lambda: _async(not len(runtime.queue)), what="an empty work queue")
        assert ("a", "MODIFIED pod") not in woken
        # A change a decision reads (the phase) wakes it; so does the deletion.
        await publish("w-a-1", "a", 13, phase="Running", hostIP="172.18.0.2")
        await until(lambda: _async(("a", "MODIFIED pod") in woken), what="the phase change's wake")
        await publish("w-a-1", "a", 14, "DELETED", phase="Running")
        await until(lambda: _async(("a", "DELETED pod") in woken), what="the deletion's wake")
        # None of it went through the trigger stream.
        assert not await stream_messages(js, s.trigger_stream(s.Controller.CLUSTER))
    finally:
        await app.stop()
        await nc.close()


async def test_a_replica_that_does_not_hold_the_partition_is_not_woken(
        nats_server: NatsServer, redis_server: RedisServer) -> None:
    """Every replica's cache applies every Pod event; only the holder of the cluster's partition
    runs it (the other one's takeover resync covers what it saw before it held it)."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    app = ClusterReconcilerApp(ReconcilerSettings(service="cluster-reconciler", nats_url=nats_server.url,
                                              redis_url=redis_server.url, replica_id="holder"),
                               DecisionSettings())
    await app.start()
    runtime = app.runtime
    assert runtime is not None and runtime.leases is not None
    key = ObjectKey(namespace="default", name="elsewhere")
    partition = runtime.partition(key)
    await runtime._drop_partition(partition)  # as if another replica held it
    try:
        runtime.wake(key, "ADDED pod")
        assert not runtime.queue.waiting(lambda k: k == key)
        held = ObjectKey(namespace="default", name=_held_name(runtime, partition))
        runtime.wake(held, "ADDED pod")
        assert runtime.queue.waiting(lambda k: True) == [held]
        # Dropped while its wake waits out the debounce: handed over as a trigger, as a requeue is.
        await runtime._drop_partition(runtime.partition(held))
        triggers = [Trigger.model_validate_json(m.data) for m in await stream_messages(js, s.trigger_stream(s.Controller.CLUSTER))]
        assert [(t.key, t.cause) for t in triggers] == [(held, "partition handover")]
    finally:
        await app.stop()
        await nc.close()


def _held_name(runtime: Any, dropped: int) -> str:
    return next(f"c{i}" for i in range(10_000)
                if runtime.partition(ObjectKey(namespace="default", name=f"c{i}")) != dropped)


async def _async(value: Any) -> Any:
    return value
