"""A requeue asked for from outside while a run of the key is in progress survives the run's own,
later requeue (ControllerRuntime.requeue_after; client-go's delaying queue keeps the sooner).

Found by `make test` beside two CPU hogs: a RayCluster resumed from suspension needs KubeRay's
2 s requeue after its status write, which the write's Outcome now asks for. That Outcome arrived
before the run that sent the status had acked its triggers; the run then asked for its own
requeue (the in-flight memo's 120 s expiry), which replaced the 2 s one, and the cluster's Pods
were not created within the test's 60 s. Real NATS, consumer and runtime; the Outcome's timing
is forced by asking from inside the run."""

from __future__ import annotations

import asyncio

import nats

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime, Result
from raybus_sim.testing.servers import NatsServer
from tests.integration.bus.helpers import publish_version
from tests.integration.bus.test_bus_semantics import _until

SETTINGS = BusSettings(partitions=2, lease_ttl_s=10.0, ack_wait_s=30.0, max_deliver=5)


async def test_a_sooner_requeue_asked_for_during_a_run_is_kept(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    runs: list[float] = []
    runtime: ControllerRuntime | None = None

    async def reconcile(key: ObjectKey) -> Result:
        runs.append(asyncio.get_running_loop().time())
        if len(runs) == 1:
            assert runtime is not None
            runtime.requeue_after(key, 0.3)  # "the Outcome arrived" before this run ends...
        return Result(requeue_after=600.0)  # ...and the run asks for a later requeue

    runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id="a",
                                cache=ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER]),
                                primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile, bus=SETTINGS,
                                resync_s=3600.0)
    await runtime.start()
    try:
        key = ObjectKey(namespace="default", name="resumed")
        await publish_version(js, name=key.name, version=1, partitions=SETTINGS.partitions)
        await _until(lambda: len(runs) >= 2, timeout=10.0)
        assert runs[1] - runs[0] < 5.0  # the 0.3 s requeue, not the run's 600 s
    finally:
        await runtime.stop()
        await nc.close()
