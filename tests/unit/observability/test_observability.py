"""JSON log lines carry service and trace ids; the metrics endpoint serves Prometheus text."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from raybus.observability.logging import setup_logging
from raybus.observability.metrics import DASHBOARD_COMMANDS, serve_metrics, set_ready
from raybus.observability.tracing import extract_context, inject_headers, setup_tracing
from raybus_sim.testing.servers import free_port


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


async def test_metrics_endpoint_serves_counters_on_the_configured_address_only() -> None:
    """On the event loop, bound where configured: 127.0.0.2 is loopback too, but not asked for."""
    port = free_port()
    runner = await serve_metrics(port, "127.0.0.1")
    try:
        DASHBOARD_COMMANDS.labels("submit", "ok").inc()
        async with httpx.AsyncClient(timeout=5) as http:
            body = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            assert 'raybus_dashboard_commands_total{op="submit",state="ok"}' in body
            with pytest.raises(httpx.ConnectError):
                await http.get(f"http://127.0.0.2:{port}/metrics")
    finally:
        assert runner is not None
        await runner.cleanup()


async def test_a_taken_port_fails_with_the_line_raybus_up_retries_on() -> None:
    port = free_port()
    runner = await serve_metrics(port)
    try:
        with pytest.raises(OSError, match="Address already in use"):
            await serve_metrics(port)
    finally:
        assert runner is not None
        await runner.cleanup()


async def test_a_restarted_endpoint_binds_while_the_last_ones_connections_linger() -> None:
    """As a container restarted in its Pod: the probe connections of the previous process are in
    TIME_WAIT on the port (the server closed them: `Connection: close`, as the kubelet asks)."""
    port = free_port()
    runner = await serve_metrics(port)
    assert runner is not None
    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(3):
            assert (await http.get(f"http://127.0.0.1:{port}/healthz", headers={"Connection": "close"})).status_code == 200
    await runner.cleanup()
    again = await serve_metrics(port)
    assert again is not None
    await again.cleanup()


async def test_probes_on_the_metrics_port() -> None:
    """/healthz while the process serves; /readyz only between start and stop (run_service)."""
    port = free_port()
    runner = await serve_metrics(port)
    assert runner is not None
    async with httpx.AsyncClient(timeout=5) as http:
        async def get(path: str) -> int:
            return (await http.get(f"http://127.0.0.1:{port}{path}")).status_code

        try:
            set_ready(False)
            assert (await get("/healthz"), await get("/readyz")) == (200, 503)
            set_ready(True)
            assert (await get("/healthz"), await get("/readyz")) == (200, 200)
            assert await get("/metrics") == 200
            set_ready(False)
            assert await get("/readyz") == 503
        finally:
            await runner.cleanup()
