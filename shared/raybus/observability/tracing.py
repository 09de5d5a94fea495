"""OpenTelemetry tracing per service; context crosses NATS hops in W3C headers."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

_provider: TracerProvider | None = None


def setup_tracing(service: str, exporter: SpanExporter | None = None) -> trace.Tracer:
    """Install one TracerProvider per process; an exporter (OTLP, in-memory for tests) is optional."""
    global _provider
    if _provider is None:
        _provider = TracerProvider(resource=Resource.create({"service.name": service}))
        trace.set_tracer_provider(_provider)
    if exporter is not None:
        _provider.add_span_processor(SimpleSpanProcessor(exporter))
    return trace.get_tracer(service)


def inject_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    carrier: dict[str, str] = dict(headers or {})
    inject(carrier)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    return extract(dict(headers or {}))
