"""JSON log lines carry service and trace ids; the metrics endpoint serves Prometheus text."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from raybus.observability.logging import setup_logging
from raybus.observability.metrics import RECONCILES, serve_metrics, set_ready
from raybus.observability.tracing import extract_context, inject_headers, setup_tracing
from raybus.testing.servers import free_port


def test_json_logs_carry_service_and_trace_ids() -> None:
    tracer = setup_tracing("obs-test", InMemorySpanExporter())
    log = setup_logging("obs-test")
    buffer = io.StringIO()
    handler = logging.getLogger().handlers[0]
    handler.setStream(buffer)  # type: ignore[attr-defined]
    with tracer.start_as_current_span("work") as span:
        log.info("created pod", extra={"key": "default/c"})
        trace_id = format(span.get_span_context().trace_id, "032x")
    line = json.loads(buffer.getvalue().strip().splitlines()[-1])
    assert line["service"] == "obs-test" and line["message"] == "created pod"
    assert line["trace_id"] == trace_id and line["key"] == "default/c" and line["level"] == "INFO"


def test_trace_context_round_trips_through_headers() -> None:
    tracer = setup_tracing("obs-test")
    with tracer.start_as_current_span("publish") as span:
        headers = inject_headers({"Nats-Msg-Id": "x"})
    assert headers["Nats-Msg-Id"] == "x" and headers["traceparent"].startswith("00-")
    with tracer.start_as_current_span("consume", context=extract_context(headers)) as child:
        assert child.get_span_context().trace_id == span.get_span_context().trace_id


def test_metrics_endpoint_serves_counters() -> None:
    port = free_port()
    serve_metrics(port)
    RECONCILES.labels("cluster", "ok").inc()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'raybus_reconciles_total{controller="cluster",result="ok"}' in body


def test_probes_on_the_metrics_port() -> None:
    """/healthz while the process serves; /readyz only between start and stop (run_service)."""
    port = free_port()
    serve_metrics(port)

    def get(path: str) -> int:
        try:
            return int(urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).status)
        except urllib.error.HTTPError as err:
            return err.code

    set_ready(False)
    assert (get("/healthz"), get("/readyz")) == (200, 503)
    set_ready(True)
    assert (get("/healthz"), get("/readyz")) == (200, 200)
    assert get("/metrics") == 200
    set_ready(False)
    assert get("/readyz") == 503
