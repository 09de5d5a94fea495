"""client-go's rest_client_* metrics for raybus's Kubernetes API traffic (watcher, executor).

KubeRay v1.7 exports them through controller-runtime (rest_client_requests_total) and its own
metrics/client_go_metrics.go (the rest, definitions from
k8s.io/component-base/metrics/prometheus/restclient); the same names, labels and buckets here.
As in client-go (rest/request.go updateURLMetrics), `host` is the API server's host:port, `verb`
and `method` the HTTP method, and `code` the status code or "<error>" when no response came back.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from prometheus_client import Counter, Histogram

_LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

REQUESTS = Counter("rest_client_requests", "Number of HTTP requests, partitioned by status code, method, and host.",
                   ["code", "method", "host"])
REQUEST_DURATION = Histogram("rest_client_request_duration_seconds",
                             "Request latency in seconds. Broken down by verb, and host.",
                             ["verb", "host"], buckets=_LATENCY_BUCKETS)
RATE_LIMITER_DURATION = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"], buckets=_LATENCY_BUCKETS)
ERROR_CODE = "<error>"


def host_of(base_url: str) -> str:
    """client-go's req.c.base.Host: host[:port] of the configured server ("none" if unknown)."""
    return urlsplit(base_url).netloc or "none"


def observe_request(*, method: str, host: str, code: int | None, seconds: float | None) -> None:
    """One finished request: code None means no HTTP response (connection error, timeout).
    seconds None: not timed (a watch, whose latency client-go does not record either)."""
    REQUESTS.labels(str(code) if code is not None else ERROR_CODE, method, host).inc()
    if seconds is not None:
        REQUEST_DURATION.labels(method, host).observe(seconds)


def observe_rate_limiter(*, method: str, host: str, seconds: float) -> None:
    RATE_LIMITER_DURATION.labels(method, host).observe(seconds)
