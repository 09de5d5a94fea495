"""The standard OTEL_* variables win over the service's own tracing settings: sampler, service
name, resource attributes (each case in a fresh interpreter: a process has one TracerProvider)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from raybus.observability.tracing import service_resource

PROBE = """
import json
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from raybus.observability.tracing import setup_tracing
spans = InMemorySpanExporter()
tracer = setup_tracing("watcher", spans, instance="watcher-0")
for _ in range(200):
    with tracer.start_as_current_span("x"):
        pass
done = spans.get_finished_spans()
print(json.dumps({"sampled": len(done),
                  "resource": dict(done[0].resource.attributes) if done else {}}))
"""


def run(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True,
                         text=True, check=True, timeout=60)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_defaults_name_the_service_and_sample_everything() -> None:
    got = run()
    assert got["sampled"] == 200
    resource = got["resource"]
    assert isinstance(resource, dict)
    assert (resource["service.name"], resource["service.namespace"], resource["service.instance.id"]) == (
        "watcher", "raybus", "watcher-0")


def test_otel_variables_win() -> None:
    got = run(OTEL_SERVICE_NAME="raybus-watcher-eu", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=prod",
              OTEL_TRACES_SAMPLER="traceidratio", OTEL_TRACES_SAMPLER_ARG="0.25")
    assert 10 < int(str(got["sampled"])) < 110  # about a quarter of 200 root spans
    resource = got["resource"]
    assert isinstance(resource, dict)
    assert resource["service.name"] == "raybus-watcher-eu"
    assert resource["deployment.environment"] == "prod"
    assert run(OTEL_TRACES_SAMPLER="always_off")["sampled"] == 0


def test_service_resource_reads_the_given_environment() -> None:
    resource = service_resource("job-reconciler", {"OTEL_RESOURCE_ATTRIBUTES": "service.name=custom,k8s.pod.name=p"})
    assert resource.attributes["service.name"] == "custom"
    assert resource.attributes["k8s.pod.name"] == "p"
    assert service_resource("job-reconciler", {}).attributes["service.name"] == "job-reconciler"
