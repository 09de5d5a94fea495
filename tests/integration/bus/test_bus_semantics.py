"""Dead-lettering, trace context across a NATS hop, and ack/redelivery, on a real nats-server."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import nats
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectKey
from raybus.bus.publish import publish_commands
from raybus.bus.streams import BusSettings, command_consumer_config, ensure_streams
from raybus.decisions.commands import DeleteObject, ObjectRef
from raybus.observability.metrics import DEAD_LETTERS
from raybus.observability.tracing import setup_tracing
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime
from raybus_sim.testing.servers import NatsServer
from tests.integration.boundary.conftest import until
from tests.integration.bus.helpers import publish_version

SETTINGS = BusSettings(partitions=4, lease_ttl_s=3.0, ack_wait_s=1.0)


async def _runtime(nc: nats.NATS, seen: list[ObjectKey]) -> ControllerRuntime:
    async def reconcile(key: ObjectKey) -> float | None:
        seen.append(key)
        return None

    runtime = ControllerRuntime(nc, controller=s.Controller.CLUSTER, replica_id="t",
                                cache=ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER]),
                                primary_kind=s.Kind.RAYCLUSTER, reconcile=reconcile, bus=SETTINGS)
    await runtime.start()
    return runtime


async def _until(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout / 0.05)):
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_garbage_trigger_goes_to_dead_letters(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    seen: list[ObjectKey] = []
    runtime = await _runtime(nc, seen)
    before = DEAD_LETTERS.labels(service="cluster-reconciler", subject_kind="trigger")._value.get()
    subject = s.trigger_subject(s.Controller.CLUSTER, namespace="default", name="x", partitions=4)
    await js.publish(subject, b"{not json")
    await js.publish(subject.replace(".x", ".y"), b'{"schema_version": 99}')
    dlq = await js.subscribe(s.dead_letter_filter(), ordered_consumer=True)
    first = await dlq.next_msg(timeout=10)
    second = await dlq.next_msg(timeout=10)
    assert first.data == b"{not json"
    assert first.headers and first.headers["Raybus-Dlq-Subject"] == subject
    assert second.data == b'{"schema_version": 99}'
    after = DEAD_LETTERS.labels(service="cluster-reconciler", subject_kind="trigger")._value.get()
    assert after - before == 2
    # The good path still works after garbage: a real trigger is reconciled.
    await publish_version(js, name="good", version=1, partitions=4)
    await _until(lambda: ObjectKey(namespace="default", name="good") in seen)
    info = await js.stream_info(s.trigger_stream("cluster"))
    assert info.state.messages <= 1  # garbage was acked, not left to block the consumer
    await runtime.stop()
    await nc.close()


async def test_trace_id_spans_publish_and_reconcile(nats_server: NatsServer) -> None:
    exporter = InMemorySpanExporter()
    tracer = setup_tracing("test-bus", exporter)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    seen: list[ObjectKey] = []
    runtime = await _runtime(nc, seen)
    with tracer.start_as_current_span("watcher-publish") as span:
        trace_id = span.get_span_context().trace_id
        await publish_version(js, name="traced", version=1, partitions=4)
    await _until(lambda: any(s.name == "reconcile" and s.attributes
                             and s.attributes.get("raybus.key") == "default/traced"
                             for s in exporter.get_finished_spans()))
    reconcile = next(sp for sp in exporter.get_finished_spans() if sp.name == "reconcile"
                     and sp.attributes and sp.attributes.get("raybus.key") == "default/traced")
    assert reconcile.context is not None and reconcile.context.trace_id == trace_id
    assert trace.get_current_span().get_span_context().trace_id != trace_id
    await runtime.stop()
    await nc.close()


async def test_unacked_command_batch_is_redelivered_and_duplicate_publish_stored_once(
        nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    batch = CommandBatch(
        key=ObjectKey(namespace="default", name="c"), kind="raycluster", controller="cluster",
        reconcile_id="r-1", commands=[DeleteObject(
            reason="test", target=ObjectRef(api_version="v1", kind="Pod", namespace="default",
                                            name="p"))])
    await publish_commands(js, batch)
    await publish_commands(js, batch)  # a reconciler retrying its publish: de-duplicated
    assert (await js.stream_info(s.STREAM_COMMANDS)).state.messages == 1
    config = replace(SETTINGS, executor_ack_wait_s=1.0)
    await js.add_consumer(s.STREAM_COMMANDS, command_consumer_config(config))
    sub = await js.pull_subscribe_bind(durable="command-executor", stream=s.STREAM_COMMANDS)
    first = (await sub.fetch(1, timeout=5))[0]
    assert first.metadata.num_delivered == 1
    # An executor that dies without acking: after ack_wait another fetch gets the same batch.
    again = (await sub.fetch(1, timeout=5))[0]
    assert again.data == first.data and again.metadata.num_delivered == 2
    await again.ack()

    async def gone() -> bool:  # work queue: an acked batch leaves the stream
        return bool((await js.stream_info(s.STREAM_COMMANDS)).state.messages == 0)
    await until(gone, what="the acked batch removed")
    await nc.close()


async def test_cache_start_completes_with_empty_kinds_in_a_busy_stream(nats_server: NatsServer) -> None:
    """Regression: a kind with no objects while the stream holds other kinds must not block the
    snapshot (found when a reconciler restarted against a live stack)."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    for version in (1, 2, 3):  # superseded versions are dropped: the stream's first seq moves on
        for i in range(5):
            await publish_version(js, name=f"c{i}", version=version, partitions=4)
    cache = ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER, s.Kind.POD, s.Kind.INGRESS])
    await asyncio.wait_for(cache.start(), 10)
    assert sorted(name for _, name in cache.keys(s.Kind.RAYCLUSTER)) == [f"c{i}" for i in range(5)]
    await cache.stop()
    await nc.close()


async def test_cache_skips_undecodable_object_events_and_applies_the_rest(nats_server: NatsServer) -> None:
    """Invalid JSON and a valid JSON body that is no ObjectEvent are skipped with a warning (the
    cache parses with pydantic-core, then validates), never stop the cache; the next ones land."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js, SETTINGS)
    cache = ObjectCache(nc, kinds=[s.Kind.RAYCLUSTER])
    await asyncio.wait_for(cache.start(), 10)
    try:
        await js.publish(s.object_subject(s.Kind.RAYCLUSTER, "default", "bad1"), b"{not json")
        await js.publish(s.object_subject(s.Kind.RAYCLUSTER, "default", "bad2"), b'{"kind": "raycluster"}')
        await js.publish(s.object_subject(s.Kind.RAYCLUSTER, "default", "bad3"), b"[1, 2]")
        await publish_version(js, name="good", version=7, partitions=4)
        await _until(lambda: cache.get(s.Kind.RAYCLUSTER, "default", "good") is not None)
        assert cache.get(s.Kind.RAYCLUSTER, "default", "good")["metadata"]["resourceVersion"] == "7"  # type: ignore[index]
        assert sorted(name for _, name in cache.keys(s.Kind.RAYCLUSTER)) == ["good"]
    finally:
        await cache.stop()
        await nc.close()
