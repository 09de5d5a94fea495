"""OpenTelemetry tracing per service; context crosses NATS hops in W3C headers.

Spans leave the process only when the standard variables ask for it: an OTLP/HTTP exporter when
OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, or OTEL_TRACES_EXPORTER
names `otlp` (the exporter itself reads the endpoint, headers, timeout and compression from the
OTEL_EXPORTER_OTLP_* variables, and the batch processor OTEL_BSP_*); OTEL_TRACES_EXPORTER=none
or OTEL_SDK_DISABLED=true turns it off. Unset: nothing is exported.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes


class _WhileExporting(Sampler):
    """Record spans only once something exports them. Unrecorded spans still get ids and travel
    in traceparent headers (logs keep their trace_id), but skip building a span nobody reads:
    at 1,000 RayClusters that was a tenth of the watcher's CPU (bench_clusters --profile)."""

    def __init__(self) -> None:
        self.exporting = False
        self._on = ParentBased(ALWAYS_ON)

    def should_sample(self, parent_context: otel_context.Context | None, trace_id: int, name: str,
                      kind: SpanKind | None = None, attributes: Attributes = None,
                      links: Sequence[Link] | None = None,
                      trace_state: trace.TraceState | None = None) -> SamplingResult:
        if not self.exporting:
            return SamplingResult(Decision.DROP, None, trace_state)
        return self._on.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return "WhileExporting"


_sampler = _WhileExporting()

_provider: TracerProvider | None = None
log = logging.getLogger(__name__)


def otlp_requested(env: Mapping[str, str]) -> bool:
    """Whether the OTEL_* variables ask for OTLP trace export (see the module docstring)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()}
    if exporters:
        return "otlp" in exporters
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def otlp_exporter(env: Mapping[str, str]) -> SpanExporter | None:
    if not otlp_requested(env):
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf")
    if protocol != "http/protobuf":
        # Only the OTLP/HTTP exporter is installed (grpcio is a large native dependency).
        log.warning("OTLP protocol not supported, using http/protobuf", extra={"protocol": protocol})
    # Imported only when asked for: it pulls in requests and protobuf.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()


def setup_tracing(service: str, exporter: SpanExporter | None = None, *,
                  env: Mapping[str, str] | None = None) -> trace.Tracer:
    """Install one TracerProvider per process; an exporter (in-memory for tests) is optional, and
    an OTLP exporter is added when the OTEL_* variables ask for one."""
    global _provider
    if _provider is None:
        _provider = TracerProvider(resource=Resource.create({"service.name": service}), sampler=_sampler)
        trace.set_tracer_provider(_provider)
        otlp = otlp_exporter(os.environ if env is None else env)
        if otlp is not None:
            # Batched off the event loop's thread: an export never delays a reconcile.
            _provider.add_span_processor(BatchSpanProcessor(otlp))
            _sampler.exporting = True
            log.info("exporting traces over OTLP")
    if exporter is not None:
        _provider.add_span_processor(SimpleSpanProcessor(exporter))
        _sampler.exporting = True
    return trace.get_tracer(service)


def shutdown_tracing() -> None:
    """Flush spans still batched (a clean stop exports everything it traced)."""
    if _provider is not None:
        _provider.shutdown()


def inject_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    carrier: dict[str, str] = dict(headers or {})
    inject(carrier)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    return extract(dict(headers or {}))
