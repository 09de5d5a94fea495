"""A replica that gives a partition up hands over the requeues only it knew of (real nats-server).

The new owner's takeover resync enqueues the objects in *its* cache, which may lag the old owner's:
an object whose trigger the old owner already consumed, and whose next look was a RequeueAfter
(e.g. after a RayService status write, which wakes nobody), would otherwise wait for the 300 s
resync."""

from __future__ import annotations

import nats

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey, Trigger
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime
from raybus_sim.testing.servers import NatsServer
from tests.integration.bus.helpers import publish_version
from tests.integration.bus.test_bus_semantics import _until

SETTINGS = BusSettings(partitions=4, lease_ttl_s=3.0, ack_wait_s=1.0)


async def test_dropped_partition_hands_its_requeues_over(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    seen: list[ObjectKey] = []

    async def reconcile(key: ObjectKey) -> float:
        seen.append(key)
        return 30.0  # a state machine's next look: only this replica knows of it

    runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id="a",
                                cache=ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER]),
                                primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile, bus=SETTINGS)
    await runtime.start()
    try:
        key = ObjectKey(namespace="default", name="waiting")
        await publish_version(js, name=key.name, version=1, partitions=SETTINGS.partitions)
        await _until(lambda: key in seen)
        subject = s.trigger_subject(s.Controller.CLUSTER, namespace=key.namespace, name=key.name,
                                    partitions=SETTINGS.partitions)
        await _until(lambda: runtime.queue.waiting(lambda k: k == key) == [key])
        await runtime._drop_partition(runtime.partition(key))
        # Nobody consumes the partition now: the handover waits in the (work-queue) stream.
        trig = Trigger.model_validate_json((await js.get_last_msg(s.trigger_stream(s.Controller.CLUSTER), subject)).data or b"")
        assert trig.key == key and trig.cause == "partition handover"
        assert trig.objects_seq == runtime.cache.applied(s.Kind.RAYCLUSTER.value) > 0
        assert runtime.queue.waiting(lambda k: True) == []  # no longer ours
    finally:
        await runtime.stop()
        await nc.close()
