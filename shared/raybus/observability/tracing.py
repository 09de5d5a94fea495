"""OpenTelemetry tracing per service; context crosses NATS hops in W3C headers.

Spans leave the process only when the standard variables ask for it: an OTLP/HTTP exporter when
OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, or OTEL_TRACES_EXPORTER
names `otlp` (the exporter itself reads the endpoint, headers, timeout and compression from the
OTEL_EXPORTER_OTLP_* variables, and the batch processor OTEL_BSP_*); `console` prints them;
OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true turns it off. Unset: nothing is exported.
OTEL_TRACES_SAMPLER/_ARG choose the sampler (default parentbased_always_on), OTEL_SERVICE_NAME
and OTEL_RESOURCE_ATTRIBUTES win over the service's own name and attributes.

Span shapes follow the semantic conventions: PRODUCER `send <subject>` spans for NATS publishes
(messaging.*; the trace context travels in the message's headers), a CONSUMER span where a
message is processed, CLIENT spans for Kubernetes API, Ray dashboard and Redis calls.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.util.types import Attributes

from raybus.runtime.settings import environment, process_environment

if TYPE_CHECKING:
    from nats.aio.msg import Msg


class _WhileExporting(Sampler):
    """Record spans only once something exports them. Unrecorded spans still get ids and travel
    in traceparent headers (logs keep their trace_id), but skip building a span nobody reads:
    at 1,000 RayClusters that was a tenth of the watcher's CPU (bench_clusters --profile)."""

    def __init__(self) -> None:
        self.exporting = False
        self._on: Sampler = ParentBased(ALWAYS_ON)  # replaced by OTEL_TRACES_SAMPLER's (setup_tracing)

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


def _exporters(env: Mapping[str, str]) -> set[str]:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return set()
    named = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()}
    if named:
        return named
    return {"otlp"} if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else set()


def otlp_requested(env: Mapping[str, str]) -> bool:
    """Whether the OTEL_* variables ask for OTLP trace export (see the module docstring)."""
    return "otlp" in _exporters(env)


def otlp_exporter(env: Mapping[str, str]) -> SpanExporter | None:
    if not otlp_requested(env):
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf")
    if protocol != "http/protobuf":
        # Only the OTLP/HTTP protobuf exporter is installed (gRPC's is grpcio, a large native
        # dependency): one warning at start, and the spans still go out over HTTP.
        log.warning("OTLP protocol not supported, using http/protobuf", extra={"protocol": protocol})
    # Imported only when asked for: it pulls in requests and protobuf.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()


def service_resource(service: str, env: Mapping[str, str], *, instance: str = "") -> Resource:
    """The service's own attributes, under whatever OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME
    say (the SDK's Resource.create would let the code's service.name win over the operator's)."""
    ours: dict[str, str] = {"service.name": service, "service.namespace": "raybus"}
    if instance:
        ours["service.instance.id"] = instance
    with environment(env):
        detected = OTELResourceDetector().detect()
    return Resource.create({**ours, **{k: v for k, v in detected.attributes.items() if isinstance(v, str)}})


def setup_tracing(service: str, exporter: SpanExporter | None = None, *,
                  env: Mapping[str, str] | None = None, instance: str = "") -> trace.Tracer:
    """Install one TracerProvider per process; an exporter (in-memory for tests) is optional, and
    the exporters the OTEL_* variables ask for are added."""
    global _provider
    if _provider is None:
        environ = process_environment() if env is None else env
        _provider = TracerProvider(resource=service_resource(service, environ, instance=instance))
        # OTEL_TRACES_SAMPLER's sampler (the SDK reads it when none is given), recording only
        # while something exports.
        _sampler._on = _provider.sampler
        _provider.sampler = _sampler  # before any tracer is made
        trace.set_tracer_provider(_provider)
        otlp = otlp_exporter(environ)
        if otlp is not None:
            # Batched off the event loop's thread: an export never delays a reconcile.
            _provider.add_span_processor(BatchSpanProcessor(otlp))
            _sampler.exporting = True
            log.info("exporting traces over OTLP")
        if "console" in _exporters(environ):
            _provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
            _sampler.exporting = True
    if exporter is not None:
        _provider.add_span_processor(SimpleSpanProcessor(exporter))
        _sampler.exporting = True
    return trace.get_tracer(service)


def exporting() -> bool:
    """Whether spans are recorded at all (context work for links can be skipped otherwise)."""
    return _sampler.exporting


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


_tracer = trace.get_tracer("raybus.bus")
MESSAGING_SYSTEM = "nats"


def destination_template(subject: str) -> str:
    """A subject's low-cardinality form for span names: its first three tokens
    (raybus.cmd.<controller>, raybus.trigger.<controller>, raybus.obj.<kind>, ...)."""
    return ".".join(subject.split(".")[:3])


@contextlib.contextmanager
def send_span(subject: str, *, msg_id: str | None = None, size: int | None = None) -> Iterator[Span]:
    """The PRODUCER span of one NATS publish (messaging conventions); publish_headers() inside it
    puts this span's context in the message's headers. Not made while nothing records spans (a
    publish is the bus's hot path): the headers then carry the current context, as before."""
    if not _sampler.exporting:
        yield trace.INVALID_SPAN
        return
    attributes: dict[str, str | int] = {
        "messaging.system": MESSAGING_SYSTEM, "messaging.operation.type": "send",
        "messaging.operation.name": "publish", "messaging.destination.name": subject,
        "messaging.destination.template": destination_template(subject)}
    if msg_id:
        attributes["messaging.message.id"] = msg_id
    if size is not None:
        attributes["messaging.message.body.size"] = size
    with _tracer.start_as_current_span(f"send {destination_template(subject)}", kind=SpanKind.PRODUCER,
                                       attributes=attributes) as span:
        yield span


def process_attributes(subject: str, *, count: int = 1) -> dict[str, str | int]:
    """A CONSUMER span's messaging attributes: the processing of `count` messages of `subject`."""
    attributes: dict[str, str | int] = {
        "messaging.system": MESSAGING_SYSTEM, "messaging.operation.type": "process",
        "messaging.operation.name": "process", "messaging.destination.name": subject,
        "messaging.destination.template": destination_template(subject)}
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    return attributes


def traced_handler(name: str, handler: Callable[[Msg], Awaitable[None]]) -> Callable[[Msg], Awaitable[None]]:
    """Wrap a message handler in a CONSUMER span whose parent is the message's own context."""
    async def handle(msg: Msg) -> None:
        with _tracer.start_as_current_span(name, context=extract_context(msg.headers), kind=SpanKind.CONSUMER,
                                           attributes=process_attributes(msg.subject)):
            await handler(msg)
    return handle


@contextlib.contextmanager
def redis_span(operation: str, key: str) -> Iterator[Span]:
    """A CLIENT span of one Redis command (database conventions: the key's area, not its value)."""
    with _tracer.start_as_current_span(operation, kind=SpanKind.CLIENT, attributes={
            "db.system.name": "redis", "db.operation.name": operation,
            "db.query.summary": f"{operation} {':'.join(key.split(':')[:2])}"}) as span:
        yield span
