"""The cluster-reconciler's glue on real nats-server + redis-server: what happens around the pure
decision (an unparseable spec, expectations saved before publishing, a publish that never happened).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml

from cluster_reconciler.app import ClusterReconcilerApp
from raybus.adapters.redis_state import EXPECTATIONS
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectEvent, ObjectKey
from raybus.bus.ledger import REVOKED, BatchLedger, command_key
from raybus.bus.publish import publish_object
from raybus.bus.streams import ensure_streams
from raybus.decisions.cluster.expectations import ScaleExpectations
from raybus.decisions.settings import DecisionSettings
from raybus.runtime.controller import Result
from raybus.runtime.settings import ReconcilerSettings
from raybus_sim.testing.servers import NatsServer, RedisServer
from raybus_sim.testing.streams import stream_messages
from tests.integration.boundary.conftest import until

SAMPLE = yaml.safe_load((Path(__file__).resolve().parents[3] / "deploy/samples/ray-cluster.sample.yaml").read_text())
KEY = ObjectKey(namespace="default", name="glue")


def _cluster(mutate: Any = None) -> dict[str, Any]:
    body = copy.deepcopy(SAMPLE)
    body["metadata"] = {"name": "glue", "namespace": "default", "uid": "uid-glue", "generation": 1,
                        "resourceVersion": "7"}
    if mutate is not None:
        mutate(body)
    return body


async def _app(nats_server: NatsServer, redis_server: RedisServer,
               obj: dict[str, Any] | None) -> ClusterReconcilerApp:
    """The real app; with obj, the RayCluster is on the bus before it starts (its takeover
    reconciles it), without, tests drive its reconcile themselves."""
    nc = await nats.connect(nats_server.url)
    await ensure_streams(nc.jetstream())
    if obj is not None:
        await publish_object(nc.jetstream(), ObjectEvent(key=KEY, kind="raycluster", type="ADDED",
                                                         resource_version="7", object=obj))
    await nc.close()
    app = ClusterReconcilerApp(ReconcilerSettings(service="cluster-reconciler", nats_url=nats_server.url,
                                              redis_url=redis_server.url, replica_id="glue"),
                               DecisionSettings())
    await app.start()
    return app


async def _batches(nats_server: NatsServer) -> list[CommandBatch]:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    out = [CommandBatch.model_validate_json(m.data) for m in await stream_messages(js, s.STREAM_COMMANDS)]
    await nc.close()
    return out


async def test_unparseable_spec_gets_kuberay_warning_not_a_crash(nats_server: NatsServer,
                                                                 redis_server: RedisServer) -> None:
    def break_it(body: dict[str, Any]) -> None:
        body["spec"]["workerGroupSpecs"][0]["replicas"] = "many"  # the API server would refuse it
    app = await _app(nats_server, redis_server, _cluster(break_it))
    try:
        async def warned() -> list[CommandBatch]:
            return [b for b in await _batches(nats_server)
                    if any(getattr(c, "event_reason", "") == "InvalidRayClusterSpec" for c in b.commands)]
        batches = await until(warned, what="the InvalidRayClusterSpec Warning")
        event = batches[0].commands[0]
        assert getattr(event, "type", "") == "Warning"
        assert "workerGroupSpecs.0.replicas" in getattr(event, "message", "")
        assert all(c.op == "event" for b in batches for c in b.commands)  # nothing else decided
        assert app.runtime is not None and app.runtime.queue is not None  # the replica lives on
    finally:
        await app.stop()


async def test_expectations_are_saved_before_publishing_and_an_unpublished_batch_is_revoked(
        nats_server: NatsServer, redis_server: RedisServer) -> None:
    app = await _app(nats_server, redis_server, None)
    assert app.context is not None and app.reconciler is not None
    ctx = app.context
    # In the cache, without a trigger: only this test's calls reconcile it.
    ctx.cache.apply(ObjectEvent(key=KEY, kind="raycluster", type="ADDED", resource_version="7",
                                object=_cluster()))
    seen_in_redis: list[ScaleExpectations] = []
    real_publish = ctx.publish

    async def crash_while_publishing(**kwargs: Any) -> str:
        stored = await ctx.store.load(EXPECTATIONS, namespace="default", name="glue")
        seen_in_redis.append(ScaleExpectations.model_validate(stored or {}))
        raise ConnectionError("the reconciler died here")

    try:
        ctx.publish = crash_while_publishing  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            await app.reconciler.reconcile(KEY)
        # Saved first: the crash left expectations naming a batch that was never published.
        expected = seen_in_redis[0]
        assert expected.batches() and expected.for_group("")
        lost = next(iter(expected.batches()))
        ctx.publish = real_publish  # type: ignore[method-assign]
        ctx.published.discard(lost)  # as a restarted replica: it never saw this batch go out
        result = await app.reconciler.reconcile(KEY)
        assert isinstance(result, Result)
        # The next reconcile revoked the unclaimed batch in the ledger (it can never be applied
        # late) and re-decided the same head Pod under the same name.
        nc = await nats.connect(nats_server.url)
        ledger = await BatchLedger.open(nc.jetstream())
        record, _ = await ledger.get(command_key(lost))
        register = await ledger.register(command_key(lost), controller="cluster")
        await nc.close()
        assert record is None and register == REVOKED  # no executor will ever claim it
        head = expected.for_group("")[0].name
        published = [c for b in await _batches(nats_server) for c in b.commands
                     if c.op == "create" and (getattr(c, "object", {}).get("metadata") or {}).get("name") == head]
        assert len(published) == 1
    finally:
        await app.stop()


async def test_a_round_that_fails_before_publishing_leaves_no_create_in_flight(
        nats_server: NatsServer, redis_server: RedisServer) -> None:
    """Redis closed the connection while a round saved its expectations (after the Redis restart
    test): its named creates (the head Service, ...) had been marked in flight under a batch that
    was never published, and every later round skipped them for 300 s (a RayService's pending
    cluster on the real API server got no head Service and its head Pod was refused)."""
    app = await _app(nats_server, redis_server, None)
    assert app.context is not None and app.reconciler is not None
    ctx = app.context
    ctx.cache.apply(ObjectEvent(key=KEY, kind="raycluster", type="ADDED", resource_version="7",
                                object=_cluster()))
    real_save = ctx.store.save

    async def connection_closed(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("Connection closed by server.")

    try:
        ctx.store.save = connection_closed  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            await app.reconciler.reconcile(KEY)
        ctx.store.save = real_save  # type: ignore[method-assign]
        await app.reconciler.reconcile(KEY)
        creates = [c for b in await _batches(nats_server) for c in b.commands if c.op == "create"]
        kinds = sorted(str(getattr(c, "object", {}).get("kind")) for c in creates)
        assert "Service" in kinds, kinds  # the head Service, decided again and sent
        assert "Pod" in kinds, kinds
    finally:
        await app.stop()
