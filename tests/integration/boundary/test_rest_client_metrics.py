"""KubeClient (the watcher's and the executor's only way to the API server) counts every request as
client-go's rest_client_* metrics do and gives every call a client span, against the local API
server over real HTTP."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from raybus.adapters.kube import KubeClient, KubeError, new_api_client, rate_limiter, resource_for
from raybus.observability import restclient
from raybus.observability.tracing import setup_tracing
from raybus_sim.apiserver import RunningApiServer, write_kubeconfig
from raybus_sim.testing.servers import free_port

CM = resource_for("v1", "ConfigMap")


def _value(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_requests_are_counted_timed_and_traced(apiserver: RunningApiServer, kubeconfig: Path) -> None:
    spans = InMemorySpanExporter()
    tracer = setup_tracing("rest-client-test", spans)
    host = urlsplit(apiserver.url).netloc
    client = KubeClient(await new_api_client(str(kubeconfig)), limiter=rate_limiter(100, 200))
    created = {"code": "201", "method": "POST", "host": host}
    missing = {"code": "404", "method": "GET", "host": host}
    before = (_value("rest_client_requests_total", created), _value("rest_client_requests_total", missing),
              _value("rest_client_request_duration_seconds_count", {"verb": "POST", "host": host}),
              _value("rest_client_rate_limiter_duration_seconds_count", {"verb": "GET", "host": host}))
    try:
        with tracer.start_as_current_span("apply-batch") as parent:
            await client.create(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "rc-metrics"}, "data": {"a": "b"}},
                                namespace="default")
            with pytest.raises(KubeError) as err:
                await client.get(CM, namespace="default", name="no-such-map")
        assert err.value.not_found
    finally:
        await client.close()
    after = (_value("rest_client_requests_total", created), _value("rest_client_requests_total", missing),
             _value("rest_client_request_duration_seconds_count", {"verb": "POST", "host": host}),
             _value("rest_client_rate_limiter_duration_seconds_count", {"verb": "GET", "host": host}))
    assert [a - b for a, b in zip(after, before, strict=True)] == [1.0, 1.0, 1.0, 1.0]
    calls = {s.name: s for s in spans.get_finished_spans() if s.name in ("POST", "GET")}
    assert set(calls) == {"POST", "GET"}
    trace_id = parent.get_span_context().trace_id
    for span in calls.values():
        assert span.context is not None and span.context.trace_id == trace_id
        assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert calls["POST"].attributes is not None
    assert calls["POST"].attributes["http.response.status_code"] == 201
    assert calls["POST"].attributes["url.path"] == "/api/v1/namespaces/default/configmaps"
    assert calls["GET"].attributes is not None and calls["GET"].attributes["http.response.status_code"] == 404


async def test_a_connection_error_is_counted_as_client_go_does(tmp_path: Path) -> None:
    """No HTTP response: code "<error>" (client-go's updateURLMetrics)."""
    port = free_port()  # nothing listens there
    host = f"127.0.0.1:{port}"
    path = write_kubeconfig(tmp_path / "kc", f"http://{host}")
    client = KubeClient(await new_api_client(str(path)), request_timeout_s=5)
    labels = {"code": "<error>", "method": "GET", "host": host}
    before = _value("rest_client_requests_total", labels)
    try:
        with pytest.raises(KubeError) as err:
            await client.get(CM, namespace="default", name="x")
        assert err.value.code == 0
    finally:
        await client.close()
    assert _value("rest_client_requests_total", labels) - before == 1.0


# KubeRay v1.7's rest_client_* families: controller-runtime's requests_total and the six of
# ray-operator/controllers/ray/metrics/client_go_metrics.go (k8s.io/component-base's restclient).
KUBERAY_REST_CLIENT = {
    "rest_client_requests_total": ("counter", ["code", "method", "host"]),
    "rest_client_request_duration_seconds": ("histogram", ["verb", "host"]),
    "rest_client_dns_resolution_duration_seconds": ("histogram", ["host"]),
    "rest_client_request_size_bytes": ("histogram", ["verb", "host"]),
    "rest_client_response_size_bytes": ("histogram", ["verb", "host"]),
    "rest_client_rate_limiter_duration_seconds": ("histogram", ["verb", "host"]),
    "rest_client_request_retries_total": ("counter", ["code", "verb", "host"]),
}


def test_the_rest_client_families_are_client_gos() -> None:
    families = {}
    for metric in REGISTRY.collect():
        if metric.name.startswith("rest_client_"):
            name = metric.name + ("_total" if metric.type == "counter" else "")
            families[name] = metric.type
    assert families == {name: kind for name, (kind, _) in KUBERAY_REST_CLIENT.items()}
    for collector in (restclient.REQUESTS, restclient.REQUEST_DURATION, restclient.RESOLVER_LATENCY,
                      restclient.REQUEST_SIZE, restclient.RESPONSE_SIZE, restclient.RATE_LIMITER_DURATION,
                      restclient.REQUEST_RETRIES):
        name = collector._name + ("_total" if collector._type == "counter" else "")
        assert list(collector._labelnames) == KUBERAY_REST_CLIENT[name][1]


async def test_request_and_response_sizes_as_client_go_observes_them(
        apiserver: RunningApiServer, kubeconfig: Path) -> None:
    host = urlsplit(apiserver.url).netloc
    client = KubeClient(await new_api_client(str(kubeconfig)))
    sums = [("rest_client_request_size_bytes_sum", "POST"), ("rest_client_response_size_bytes_sum", "POST"),
            ("rest_client_request_size_bytes_count", "GET"), ("rest_client_request_size_bytes_sum", "GET"),
            ("rest_client_response_size_bytes_sum", "GET")]
    before = [_value(name, {"verb": verb, "host": host}) for name, verb in sums]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rc-sizes"}, "data": {"k": "v" * 3000}}
    try:
        created = await client.create(CM, body, namespace="default")
        got = await client.get(CM, namespace="default", name="rc-sizes")
    finally:
        await client.close()
    after = [_value(name, {"verb": verb, "host": host}) for name, verb in sums]
    sent_post, read_post, gets, sent_get, read_get = (a - b for a, b in zip(after, before, strict=True))
    assert 3000 < sent_post < 3300  # the JSON body as sent
    assert read_post >= len(created["data"]["k"])
    assert (gets, sent_get) == (1.0, 0.0)  # a GET has no body: observed as 0, as ContentLength
    assert read_get >= len(got["data"]["k"])
