"""StepRunner.publish on a real nats-server: a dashboard command that went out is waited for even
when a later publish of the same round failed (the chaos soak's Serve config PUT 8 times in
0.8 s: each round's command was published, its interest publish failed in a NATS election, and
the next round, knowing of no command in flight, decided the same PUT again)."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.errors import Error as NatsError

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.bus.ledger import BatchLedger
from raybus.bus.streams import ensure_streams
from raybus.decisions.dashboard_contract import DashboardInterest, PutServeConfig
from raybus.runtime.batches import BatchResolver, PublishedBatches
from raybus.runtime.cache import ObjectCache
from raybus.runtime.outcomes import OutcomeTracker
from raybus.runtime.reconciler_app import ReconcilerContext
from raybus.runtime.settings import ReconcilerSettings
from raybus.runtime.stepper import Step, StepRunner
from raybus_sim.testing.servers import NatsServer


async def test_a_published_dashboard_command_is_waited_for_when_the_interest_publish_fails(
        nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    cache = ObjectCache(nc, kinds=[s.Kind.RAYSERVICE], dashboard_results=s.Controller.SERVICE)
    await asyncio.wait_for(cache.start(), 10)
    ledger = await BatchLedger.open(js)
    outcomes = OutcomeTracker(nc, s.Controller.SERVICE)
    published = PublishedBatches()
    ctx = ReconcilerContext(nc=nc, cache=cache, store=None, controller=s.Controller.SERVICE,  # type: ignore[arg-type]
                            settings=ReconcilerSettings(service="service-reconciler"), outcomes=outcomes,
                            batches=BatchResolver(tracker=outcomes, ledger=ledger, published=published,
                                                  controller="service"),
                            published=published, ledger=ledger)
    runner = StepRunner(ctx, kind=s.Kind.RAYSERVICE, k8s_kind="RayService")
    key = ObjectKey(namespace="default", name="svc")
    obj = {"metadata": {"name": "svc", "namespace": "default", "uid": "u1", "resourceVersion": "5"}}
    try:
        await js.delete_stream(s.STREAM_DASHBOARD_INTEREST)  # its leader unreachable, as mid-election
        step = Step(dashboard_commands=[PutServeConfig(reason="deploy", cluster="svc-abc",
                                                       config={"applications": []}, config_hash="h1")],
                    interests=[DashboardInterest(cluster="svc-abc", serve=True)])
        with pytest.raises(NatsError):
            await runner.publish(key, obj, step)
        info = await js.stream_info(s.STREAM_DASHBOARD_COMMANDS)
        assert info.state.messages == 1  # the PUT went out
        # The next round holds back until the poller answers it, instead of deciding it again.
        assert await runner.wait(key) is not None
    finally:
        await cache.stop()
        await nc.close()
