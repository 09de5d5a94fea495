"""A partition whose trigger consumer cannot be bound at takeover is retried, never abandoned
(real nats-server; the failure is injected into add_consumer as the soak saw it).

In the chaos soak a job-reconciler took partitions over during a NATS node restart: add_consumer
answered NoStreamResponseError for two of them, their fetchers ended, the leases stayed held, and
the RayJobs in them were never reconciled again (a deletion never finalized, a new RayJob never
initialized)."""

from __future__ import annotations

import nats
import pytest
from nats.js.client import JetStreamContext
from nats.js.errors import NoStreamResponseError

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime
from raybus_sim.testing.servers import NatsServer
from tests.integration.bus.helpers import publish_version
from tests.integration.bus.test_bus_semantics import _until

SETTINGS = BusSettings(partitions=4, lease_ttl_s=3.0, ack_wait_s=1.0)


async def test_failed_consumer_bind_is_retried(nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    real = JetStreamContext.add_consumer
    failures = {"left": 2 * SETTINGS.partitions}  # every partition's first two binds fail

    async def flaky(self: JetStreamContext, *args: object, **kwargs: object) -> object:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise NoStreamResponseError
        return await real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(JetStreamContext, "add_consumer", flaky)
    seen: list[ObjectKey] = []

    async def reconcile(key: ObjectKey) -> None:
        seen.append(key)

    runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id="a",
                                cache=ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER]),
                                primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile, bus=SETTINGS)
    await runtime.start()
    try:
        # Published after the takeover: only a consumed trigger can bring these to the reconciler.
        keys = [ObjectKey(namespace="default", name=f"late-{i}") for i in range(8)]
        for key in keys:
            await publish_version(js, name=key.name, version=1, partitions=SETTINGS.partitions)
        assert {runtime.partition(k) for k in keys} == set(range(SETTINGS.partitions))
        await _until(lambda: set(keys) <= set(seen), timeout=20.0)
        assert failures["left"] == 0
    finally:
        await runtime.stop()
        await nc.close()
