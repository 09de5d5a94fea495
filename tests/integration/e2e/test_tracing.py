"""Issue 19, traces: with the standard OTEL_* variables set, every service exports its spans over
OTLP/HTTP, and a RayCluster scale-up is one connected trace: the watcher's event -> the
cluster-reconciler's reconcile -> the command-executor's batch -> the API call that creates the
Pod. The collector is a real OTLP/HTTP peer in this test process (protobuf decoded with
opentelemetry-proto)."""

from __future__ import annotations

import copy
import gzip
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from raybus.adapters.kube import KubeClient, new_api_client
from raybus.cli.stack import LocalStack
from raybus.testing.servers import free_port
from tests.integration.e2e.conftest import Kube


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    service: str
    start_ns: int
    attributes: dict[str, str]


class Collector:
    """OTLP/HTTP trace receiver: POST /v1/traces, ExportTraceServiceRequest in protobuf."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                collector.add(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def add(self, request: ExportTraceServiceRequest) -> None:
        spans = []
        for resource_spans in request.resource_spans:
            service = next((a.value.string_value for a in resource_spans.resource.attributes
                            if a.key == "service.name"), "")
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    attrs = {a.key: (a.value.string_value or str(a.value.int_value)) for a in s.attributes}
                    spans.append(Span(trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                                      parent_id=s.parent_span_id.hex(), name=s.name, service=service,
                                      start_ns=s.start_time_unix_nano, attributes=attrs))
        with self._lock:
            self.spans.extend(spans)
            self.requests += 1

    def snapshot(self) -> list[Span]:
        with self._lock:
            return list(self.spans)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def traced_stack(tmp_path: Path, collector: Collector) -> Iterator[LocalStack]:
    stack = LocalStack(home=tmp_path / "stack", services=["watcher", "command_executor",
                                                          "cluster_reconciler"],
                       extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
                                  "OTEL_BSP_SCHEDULE_DELAY": "200"})
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


@pytest.fixture
async def traced_kube(traced_stack: LocalStack) -> AsyncIterator[Kube]:
    client = KubeClient(await new_api_client(str(traced_stack.kubeconfig)))
    try:
        yield Kube(client, traced_stack)
    finally:
        await client.close()


def chain(spans: list[Span], leaf: Span) -> list[Span]:
    """The leaf and its ancestors, root last; stops where a parent was not (yet) received."""
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    out = [leaf]
    while out[-1].parent_id:
        parent = by_id.get((out[-1].trace_id, out[-1].parent_id))
        if parent is None:
            break
        out.append(parent)
    return out


async def test_scale_up_is_one_connected_trace(traced_kube: Kube, collector: Collector) -> None:
    kube = traced_kube
    await kube.apply_cluster("traced")
    await kube.wait_ready("traced", workers=1, timeout=60)
    await kube.settled("traced")
    before = {p["metadata"]["name"] for p in await kube.pods("traced")}
    assert any(s.service == "watcher" for s in collector.snapshot())  # exporting at all

    scaled_at = time.time_ns()
    rc = await kube.cluster("traced")
    groups = copy.deepcopy(rc["spec"]["workerGroupSpecs"])
    groups[0]["replicas"] = 2
    await kube.patch_cluster("traced", {"spec": {"workerGroupSpecs": groups}})
    await kube.wait_ready("traced", workers=2, timeout=60)
    new = {p["metadata"]["name"] for p in await kube.pods("traced")} - before
    assert len(new) == 1

    found: list[Span] = []

    async def connected() -> bool:
        spans = collector.snapshot()
        creates = [s for s in spans if s.name == "POST" and s.start_ns >= scaled_at
                   and s.attributes.get("url.path") == "/api/v1/namespaces/default/pods"]
        for create in creates:
            path = chain(spans, create)
            if not path[-1].parent_id:  # reached the root: the whole chain is in
                found[:] = path
                return True
        return False

    await kube.eventually(connected, timeout=30, what="the scale-up's trace, root to API call")
    # One trace, root first: watcher -> cluster-reconciler -> command-executor -> the API call
    # (here exactly those four; a change the executor's own outcome triggers would add a hop).
    path = list(reversed(found))
    assert len({s.trace_id for s in path}) == 1
    assert [(s.service, s.name) for s in path] == [
        ("watcher", "watch-event"), ("cluster-reconciler", "reconcile"),
        ("command-executor", "apply-batch"), ("command-executor", "POST")]
    watch, reconcile, _, create = path
    assert watch.attributes["raybus.cause"] == "MODIFIED raycluster default/traced"
    assert reconcile.attributes["raybus.key"] == "default/traced"
    assert create.attributes["http.response.status_code"] == "201"
