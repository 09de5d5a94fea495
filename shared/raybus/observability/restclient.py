"""client-go's rest_client_* metrics for raybus's Kubernetes API traffic (watcher, executor).

KubeRay v1.7 exports them through controller-runtime (rest_client_requests_total) and its own
metrics/client_go_metrics.go (the other six, definitions from
k8s.io/component-base/metrics/prometheus/restclient); the same seven names, labels and buckets
here. As in client-go (rest/request.go updateURLMetrics), `host` is the API server's host:port,
`verb` and `method` the HTTP method, and `code` the status code or "<error>" when no response
came back. Sizes and DNS time come from the HTTP client itself (an aiohttp TraceConfig on the
Kubernetes client's session): the bytes of each request body sent (0 for a GET, as client-go's
ContentLength) and of each response body read (a watch's stream is not read whole: none, as in
client-go), and each host name resolution (none for an IP address, as in Go).
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from urllib.parse import urlsplit

import aiohttp
from prometheus_client import Counter, Histogram

_LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
_SIZE_BUCKETS = (64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)  # 64 B-16 MiB

REQUESTS = Counter("rest_client_requests", "Number of HTTP requests, partitioned by status code, method, and host.",
                   ["code", "method", "host"])
REQUEST_DURATION = Histogram("rest_client_request_duration_seconds",
                             "Request latency in seconds. Broken down by verb, and host.",
                             ["verb", "host"], buckets=_LATENCY_BUCKETS)
RATE_LIMITER_DURATION = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"], buckets=_LATENCY_BUCKETS)
RESOLVER_LATENCY = Histogram("rest_client_dns_resolution_duration_seconds",
                             "DNS resolver latency in seconds. Broken down by host.", ["host"],
                             buckets=_LATENCY_BUCKETS[:-1])
REQUEST_SIZE = Histogram("rest_client_request_size_bytes", "Request size in bytes. Broken down by verb and host.",
                         ["verb", "host"], buckets=_SIZE_BUCKETS)
RESPONSE_SIZE = Histogram("rest_client_response_size_bytes",
                          "Response size in bytes. Broken down by verb and host.",
                          ["verb", "host"], buckets=_SIZE_BUCKETS)
REQUEST_RETRIES = Counter("rest_client_request_retries",
                          "Number of request retries, partitioned by status code, verb, and host.",
                          ["code", "verb", "host"])
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


def observe_retry(*, method: str, host: str, code: int | None) -> None:
    """A request sent again (client-go's IncrementRetry: the code of the answer that made it retry)."""
    REQUEST_RETRIES.labels(str(code) if code else ERROR_CODE, method, host).inc()


def trace_config(host: str) -> aiohttp.TraceConfig:
    """Request/response sizes and DNS time of every request a session sends to `host`."""
    config = aiohttp.TraceConfig()

    async def chunk_sent(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                         params: aiohttp.TraceRequestChunkSentParams) -> None:
        ctx.sent = getattr(ctx, "sent", 0) + len(params.chunk)

    async def request_end(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                          params: aiohttp.TraceRequestEndParams) -> None:
        REQUEST_SIZE.labels(params.method, host).observe(getattr(ctx, "sent", 0))

    async def body_read(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                        params: aiohttp.TraceResponseChunkReceivedParams) -> None:
        # ClientResponse.read() reports the whole body once it has it
        RESPONSE_SIZE.labels(params.method, host).observe(len(params.chunk))

    async def dns_start(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                        params: aiohttp.TraceDnsResolveHostStartParams) -> None:
        ctx.dns_started = time.monotonic()

    async def dns_end(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                      params: aiohttp.TraceDnsResolveHostEndParams) -> None:
        if hasattr(ctx, "dns_started"):
            RESOLVER_LATENCY.labels(params.host).observe(time.monotonic() - ctx.dns_started)

    config.on_request_chunk_sent.append(chunk_sent)
    config.on_request_end.append(request_end)
    config.on_response_chunk_received.append(body_read)
    config.on_dns_resolvehost_start.append(dns_start)
    config.on_dns_resolvehost_end.append(dns_end)
    config.freeze()
    return config
