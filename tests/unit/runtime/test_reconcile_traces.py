"""runtime/traces.py: a reconcile's trace parent and links."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from raybus.runtime.traces import ORIGIN_TRACE_S, ReconcileTraces, links


def ctx(trace_id: int, span_id: int) -> object:
    return trace.set_span_in_context(NonRecordingSpan(SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))))


def test_the_creation_is_the_parent_while_recent_then_what_woke_the_run() -> None:
    now = [0.0]
    traces = ReconcileTraces("ADDED rayjob", clock=lambda: now[0])
    created, modified = ctx(1, 1), ctx(2, 2)
    traces.woke("k", "MODIFIED rayjob", modified)  # not a creation: nothing remembered
    assert traces.parent("k", [modified]) is modified
    traces.woke("k", "ADDED rayjob", created)
    traces.woke("k", "ADDED rayjob", ctx(3, 3))  # a relisted ADDED: the first one stays
    assert traces.parent("k", [modified]) is created
    assert traces.parent("k", []) is created  # a requeue of ours too
    now[0] = ORIGIN_TRACE_S + 1
    assert traces.parent("k", [modified]) is modified
    assert traces.parent("k", []) is None


def test_links_one_per_distinct_span() -> None:
    got = links([ctx(1, 1), ctx(1, 1), ctx(1, 2), trace.set_span_in_context(trace.INVALID_SPAN)])
    assert sorted((ln.context.trace_id, ln.context.span_id) for ln in got) == [(1, 1), (1, 2)]
