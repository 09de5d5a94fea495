"""A trigger met while the partition's lease is stale is not burnt through max_deliver.

Found by `make test` beside two CPU hogs: right after the NATS restart test, a RayCluster's
trigger was never handled. Its replica still pulled the partition but could not renew the lease
(NATS answered timeouts), so each delivery was naked at once and came straight back, ~0.1 s a
round; after max_deliver rounds NATS gave up on the message. It stayed in the work queue below
the consumer's ack floor, and the RayCluster was not reconciled within the test's 60 s (only the
300 s resync would have). The stale lease is injected; NATS, the consumer and its
max_deliver are real."""

from __future__ import annotations

import asyncio

import nats
import pytest

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime
from raybus_sim.testing.servers import NatsServer
from tests.integration.bus.helpers import publish_version
from tests.integration.bus.test_bus_semantics import _until

# max_deliver 5 instead of 20 keeps the test short: immediate naks use them up in well under
# STALE_S; naks delayed by LEASE_STALE_NAK_S do not.
STALE_S = 2.0
SETTINGS = BusSettings(partitions=2, lease_ttl_s=10.0, ack_wait_s=30.0, max_deliver=5)


async def test_a_trigger_outlives_a_stale_lease(nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    seen: list[ObjectKey] = []
    naks: list[ObjectKey] = []

    async def reconcile(key: ObjectKey) -> None:
        seen.append(key)

    runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id="a",
                                cache=ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER]),
                                primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile, bus=SETTINGS,
                                resync_s=3600.0)
    await runtime.start()
    assert runtime.leases is not None and len(runtime.leases.held) == SETTINGS.partitions
    real_valid = runtime.leases.valid
    stale = {"on": True}

    def valid(p: int) -> bool:
        if stale["on"]:
            return False
        return real_valid(p)

    monkeypatch.setattr(runtime.leases, "valid", valid)
    real_process = runtime._process

    async def counting(key: ObjectKey, pendings: list) -> None:  # type: ignore[type-arg]
        if stale["on"] and pendings:
            naks.append(key)
        await real_process(key, pendings)

    monkeypatch.setattr(runtime, "_process", counting)
    try:
        key = ObjectKey(namespace="default", name="behind-a-stale-lease")
        await publish_version(js, name=key.name, version=1, partitions=SETTINGS.partitions)
        await _until(lambda: bool(naks), timeout=10.0)  # delivered while stale, naked
        await asyncio.sleep(STALE_S)  # the fault's length (a late renewal), not a wait for a result
        stale["on"] = False  # renewed
        await _until(lambda: key in seen, timeout=15.0)
        assert len(naks) < SETTINGS.max_deliver
    finally:
        await runtime.stop()
        await nc.close()
