"""Traces: with the standard OTEL_* variables set, every service exports its spans over OTLP/HTTP,
shaped by the semantic conventions (PRODUCER `send` spans per NATS publish, CONSUMER spans where a
message is processed, CLIENT spans per API, dashboard and Redis call). An object's reconciles in
the first minutes after its creation are spans of the creation's trace, each linked to the event
that woke it: a RayCluster created then scaled up is one trace down to the API call that creates
the new Pod, and a RayJob is one trace from its creation through the reconciles, the executor's
writes and the dashboard-poller's submission to the Ray head. The collector is a real OTLP/HTTP
peer in this test process (protobuf decoded with opentelemetry-proto)."""

from __future__ import annotations

import asyncio
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
from raybus_sim.devstack.stack import LocalStack
from raybus_sim.testing.servers import free_port
from tests.integration.e2e.conftest import Kube
from tests.integration.e2e.rayjob_kit import SAMPLE, Jobs, rayjob_doc


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    service: str
    start_ns: int
    attributes: dict[str, str]
    kind: int = 0
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id)


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
                                      start_ns=s.start_time_unix_nano, attributes=attrs, kind=s.kind,
                                      links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in s.links)))
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
    # One trace, root first: the cluster's creation (watcher) -> the trigger's publish -> the
    # reconcile -> the batch's publish -> the command-executor's batch -> the API call.
    path = list(reversed(found))
    assert len({s.trace_id for s in path}) == 1
    assert [(s.service, s.name) for s in path] == [
        ("watcher", "watch-event"), ("watcher", "send raybus.trigger.cluster"),
        ("cluster-reconciler", "reconcile"), ("cluster-reconciler", "send raybus.cmd.cluster"),
        ("command-executor", "apply-batch"), ("command-executor", "POST")]
    watch, send, reconcile, publish, _, create = path
    assert watch.attributes["raybus.cause"] == "ADDED raycluster default/traced"
    assert reconcile.attributes["raybus.key"] == "default/traced"
    assert create.attributes["http.response.status_code"] == "201"
    # messaging conventions: PRODUCER sends, a CONSUMER process span
    assert (send.kind, publish.kind, reconcile.kind) == (4, 4, 5)  # SPAN_KIND_PRODUCER, _CONSUMER
    assert publish.attributes["messaging.system"] == "nats"
    assert publish.attributes["messaging.operation.type"] == "send"
    assert publish.attributes["messaging.destination.name"] == "raybus.cmd.cluster.default.traced"
    assert reconcile.attributes["messaging.operation.type"] == "process"
    # ...and the reconciles after the scale-up link the event that woke them: the watcher's
    # publish of the MODIFIED trigger (a later run of the same change, e.g. a requeue, has none).
    def modified_linked() -> bool:
        spans = {(s.trace_id, s.span_id): s for s in collector.snapshot()}
        runs = [s for s in spans.values() if s.name == "reconcile" and s.trace_id == watch.trace_id
                and s.start_ns >= scaled_at]
        causes = [spans[link] for run in runs for link in run.links if link in spans]
        parents = [spans.get((c.trace_id, c.parent_id)) for c in causes]
        return any(p is not None and p.attributes.get("raybus.cause") == "MODIFIED raycluster default/traced"
                   for p in parents)

    async def linked() -> bool:
        return modified_linked()

    await kube.eventually(linked, timeout=10, what="a reconcile linked to the scale-up's event")


JOB_SERVICES = ["watcher", "command_executor", "cluster_reconciler", "job_reconciler", "dashboard_poller"]


@pytest.fixture
def job_stack(tmp_path: Path, collector: Collector) -> Iterator[LocalStack]:
    stack = LocalStack(home=tmp_path / "stack", services=JOB_SERVICES,
                       extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
                                  "OTEL_BSP_SCHEDULE_DELAY": "200"})
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


async def test_a_rayjob_is_one_trace_from_creation_to_submission(job_stack: LocalStack,
                                                                 collector: Collector) -> None:
    """An HTTPMode RayJob: the watcher's creation event, the job-reconciler's reconciles, the
    command-executor's API writes (finalizer, status, the RayCluster) and the dashboard-poller's
    POST /api/jobs/ to the Ray head are spans of one trace."""
    kube = KubeClient(await new_api_client(str(job_stack.kubeconfig)))
    try:
        jobs = Jobs(Kube(kube, job_stack))
        await jobs.prerequisites(SAMPLE)
        name = await jobs.apply(rayjob_doc(name="traced-job", submissionMode="HTTPMode"))
        await jobs.wait_status(name, "Complete", timeout=90)
    finally:
        await kube.close()

    found: list[Span] = []

    def submitted() -> bool:
        spans = collector.snapshot()
        for submit in (s for s in spans if s.service == "dashboard-poller" and s.name == "POST /api/jobs/"):
            path = chain(spans, submit)
            if not path[-1].parent_id:
                found[:] = path
                return True
        return False

    deadline = time.monotonic() + 30
    while not submitted() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert found, "the submission's trace, root to POST /api/jobs/"
    root = found[-1]
    assert (root.service, root.name, root.attributes["raybus.cause"]) == (
        "watcher", "watch-event", "ADDED rayjob default/traced-job")
    hops = [(s.service, s.name) for s in reversed(found)]
    assert ("job-reconciler", "reconcile") in hops
    assert ("job-reconciler", "send raybus.dashcmd.job") in hops
    assert ("dashboard-poller", "process dashboard command") in hops
    submit = found[0]
    assert submit.kind == 3 and submit.attributes["http.request.method"] == "POST"  # SPAN_KIND_CLIENT
    assert submit.attributes["url.template"] == "/api/jobs/" and submit.attributes["http.response.status_code"] == "200"
    # The executor's writes are in the same trace: the finalizer, the RayCluster, the status.
    trace = [s for s in collector.snapshot() if s.trace_id == root.trace_id]
    writes = {(s.name, s.attributes.get("url.path", "")) for s in trace if s.service == "command-executor"
              and s.kind == 3}
    assert ("POST", "/apis/ray.io/v1/namespaces/default/rayclusters") in writes, writes
    assert any(path.endswith("/rayjobs/traced-job/status") for _, path in writes), writes
    assert len({s.service for s in trace}) == 4, {s.service for s in trace}  # all but the cluster-reconciler