"""Before a service starts: wait until what it needs (NATS, Redis, the Kubernetes API) answers.

Containers start in any order (podman-compose runs no healthchecks and ignores depends_on
conditions; Kubernetes has no start order at all), and nats-py gives up on a first connect that
fails, so a service started before NATS would exit and crash-loop. Instead it retries, with one
log line per try saying what it waits for, like controller-runtime's manager, which blocks until
the API server answers before it starts its controllers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import nats
from kubernetes_asyncio import client as kclient
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from raybus.adapters.kube import new_api_client
from raybus.bus.connect import BusAuth, nats_options, redis_client

Need = Literal["nats", "redis", "kube"]
PROBE_TIMEOUT_S = 3.0
MAX_DELAY_S = 5.0


def redact(url: str) -> str:
    """scheme://host:port of a URL: a Redis or NATS URL may carry a password (never logged). A NATS
    cluster's comma-separated server list is redacted server by server."""
    if "," in url:
        return ",".join(redact(one.strip()) for one in url.split(",") if one.strip())
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}"


async def _nats_answers(url: str, auth: BusAuth) -> None:
    errors: list[Exception] = []

    async def remember(exc: Exception) -> None:  # logged once per try, by the retry
        errors.append(exc)

    # nats-py's first connect retries by itself, forever and silently, whatever the options:
    # bound it, and report what it ran into.
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            nc = await nats.connect(**nats_options(url, auth), allow_reconnect=False,
                                    connect_timeout=PROBE_TIMEOUT_S, max_reconnect_attempts=0,
                                    error_cb=remember)
    except TimeoutError:
        if errors:
            raise errors[-1] from None
        raise
    await nc.close()


async def _redis_answers(url: str, auth: BusAuth) -> None:
    client = redis_client(url, auth, socket_connect_timeout=PROBE_TIMEOUT_S,
                          socket_timeout=PROBE_TIMEOUT_S)
    try:
        await client.ping()
    finally:
        await client.aclose()


async def _kube_answers(kubeconfig: str | None) -> None:
    # A kubeconfig written by another container (k3s, the local API server) may not exist yet.
    if kubeconfig and not Path(kubeconfig).exists():
        raise FileNotFoundError(f"kubeconfig {kubeconfig} not written yet")
    api = await new_api_client(kubeconfig)
    try:
        await kclient.VersionApi(api).get_code(_request_timeout=PROBE_TIMEOUT_S)
    finally:
        await api.close()


async def wait_until_reachable(needs: Iterable[Need], *, nats_url: str, redis_url: str,
                               kubeconfig: str | None, log: logging.Logger,
                               auth: BusAuth | None = None) -> None:
    """Return once every need answers; retries forever (a stop signal cancels the wait)."""
    probes: dict[Need, tuple[str, Callable[[], Awaitable[None]]]] = {
        "nats": (f"NATS at {redact(nats_url)}", lambda: _nats_answers(nats_url, auth or BusAuth())),
        "redis": (f"Redis at {redact(redis_url)}", lambda: _redis_answers(redis_url, auth or BusAuth())),
        "kube": (f"the Kubernetes API ({'kubeconfig ' + kubeconfig if kubeconfig else 'in-cluster'})",
                 lambda: _kube_answers(kubeconfig)),
    }
    for need in needs:
        what, probe = probes[need]
        waited = False

        def waiting(state: RetryCallState, what: str = what) -> None:
            nonlocal waited
            waited = True
            exc = state.outcome.exception() if state.outcome else None
            log.warning(f"waiting for {what}", extra={
                "attempt": state.attempt_number, "error": f"{type(exc).__name__}: {exc}",
                "retry_in_s": round(state.upcoming_sleep, 1)})

        async for attempt in AsyncRetrying(wait=wait_exponential(multiplier=0.25, max=MAX_DELAY_S),
                                           retry=retry_if_exception_type(Exception),
                                           before_sleep=waiting, reraise=True):
            with attempt:
                await probe()
        if waited:
            log.info(f"{what} answers")
