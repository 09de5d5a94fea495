"""StateStore (the reconcilers' Redis state) gives every command a CLIENT span by the database
conventions, in the trace of the reconcile that ran it, against a real redis-server."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from raybus.adapters.redis_state import EXPECTATIONS, StateStore
from raybus.observability.tracing import setup_tracing
from raybus_sim.testing.servers import RedisServer


async def test_redis_commands_are_client_spans_of_the_reconcile(redis_server: RedisServer) -> None:
    spans = InMemorySpanExporter()
    tracer = setup_tracing("redis-span-test", spans)
    store = StateStore(redis_server.client())
    try:
        with tracer.start_as_current_span("reconcile") as parent:
            await store.save(EXPECTATIONS, namespace="ns", name="rc", value={"a": 1})
            assert await store.load(EXPECTATIONS, namespace="ns", name="rc") == {"a": 1}
            await store.delete(EXPECTATIONS, namespace="ns", name="rc")
    finally:
        await store.close()
    trace_id = parent.get_span_context().trace_id
    calls = [s for s in spans.get_finished_spans() if s.context is not None and s.context.trace_id == trace_id
             and s.name in ("SET", "GET", "DEL")]
    assert [s.name for s in calls] == ["SET", "GET", "DEL"]
    for span in calls:
        assert span.kind is SpanKind.CLIENT and span.attributes is not None
        assert span.attributes["db.system.name"] == "redis"
        assert span.attributes["db.query.summary"] == f"{span.name} raybus:expectations"  # never the key's object
        assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
