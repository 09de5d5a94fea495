"""Serve through the dashboard client against a real Ray 2.60 head: the first PUT (which starts
Serve: its cold-start time is measured and printed), proxy health while Serve starts and once it
serves, an in-place update, an app whose constructor fails, and shutdown."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from raybus.adapters.dashboard import DashboardTransientError, RayDashboardClient, RayHttpProxyClient
from raybus.adapters.dashboard_models import ApplicationStatus

from .conftest import RayHead
from .test_jobs import eventually

pytestmark = pytest.mark.integration


def _config(greeting: str) -> dict[str, Any]:
    return {"applications": [{"name": "app1", "route_prefix": "/", "import_path": "realray_app:app",
                              "args": {"greeting": greeting}}]}


async def _app_status(dashboard: RayDashboardClient, *wanted: ApplicationStatus) -> str:
    async def probe() -> str | None:
        apps = await dashboard.get_multi_application_status()
        app = apps.get("app1")
        return f"{app.status}: {app.message}" if app is not None and app.status in wanted else None

    return await eventually(probe, timeout=180)


async def _healthz(http: httpx.AsyncClient, head: RayHead) -> str:
    try:
        response = await http.get(head.proxy + "/-/healthz", timeout=5)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return f"{response.status_code} {response.text.strip()[:60]}"


async def _app_now(dashboard: RayDashboardClient) -> str:
    try:
        app = (await dashboard.get_multi_application_status()).get("app1")
    except DashboardTransientError as exc:  # a dashboard too busy to answer while Serve starts
        return type(exc).__name__
    return "absent" if app is None else str(app.status)


async def test_serve_deploy_update_failure_shutdown(
        dashboard: RayDashboardClient, ray_head: RayHead, http: httpx.AsyncClient) -> None:
    proxy = RayHttpProxyClient(http, base_url=ray_head.proxy, timeout_s=5)
    assert await proxy.is_healthy() is False  # no Serve yet: nothing listens on 8000
    assert (await dashboard.get_serve_details()).applications == {}

    started = time.monotonic()
    async def timed_put() -> float:
        while True:
            try:
                await dashboard.update_deployments(_config("hi"))
                return time.monotonic() - started
            except DashboardTransientError as exc:
                # Serve's cold start on a loaded machine may answer 500 "The actor never ran - it
                # was cancelled before it started running": put it again, as raybus does.
                print(f"cold-start PUT: {exc}; again")
                assert time.monotonic() - started < 200
                await asyncio.sleep(1.0)

    put = asyncio.create_task(timed_put())
    answers: list[tuple[float, str, str]] = []  # what the proxy and the app say while Serve starts
    while True:
        answers.append((round(time.monotonic() - started, 1), await _healthz(http, ray_head),
                        await _app_now(dashboard)))
        if put.done() and (put.exception() is not None or answers[-1][2].startswith(("RUNNING", "DEPLOY_FAILED"))):
            break
        assert time.monotonic() - started < 240, answers[-5:]
        await asyncio.sleep(0.3)
    print(f"\nfirst (cold-start) Serve PUT on the real head: {await put:.2f} s")
    changes = [a for i, a in enumerate(answers) if i == 0 or a[1:] != answers[i - 1][1:]]
    print("while Serve starts (s, proxy /-/healthz, app1):\n  " + "\n  ".join(map(str, changes)))
    assert answers[-1][2].startswith("RUNNING"), answers[-1]

    async def healthy() -> bool:
        return await proxy.is_healthy()

    await eventually(healthy, timeout=60)
    assert (await http.get(ray_head.proxy + "/", timeout=10)).text == "hi"

    started = time.monotonic()
    await dashboard.update_deployments(_config("yo"))
    print(f"later Serve PUT: {time.monotonic() - started:.2f} s")

    async def updated() -> bool:
        try:
            response = await http.get(ray_head.proxy + "/", timeout=10)
        except httpx.TransportError:  # a replica being replaced on a loaded machine: ask again
            return False
        return response.status_code == 200 and response.text == "yo"

    await eventually(updated, timeout=120)
    assert (await _app_status(dashboard, ApplicationStatus.RUNNING)).startswith("RUNNING")

    # The constructor raises: the app ends DEPLOY_FAILED ("Failed to update the deployments
    # ['Hello']."; the error itself is in the deployment's message).
    await dashboard.update_deployments(_config("crash"))
    status = await _app_status(dashboard, ApplicationStatus.DEPLOY_FAILED, ApplicationStatus.UNHEALTHY)
    assert status.startswith("DEPLOY_FAILED") and "Hello" in status, status
    app = (await dashboard.get_multi_application_status())["app1"]
    print(f"failed update: {status}; deployments: "
          f"{ {n: (d.status, d.message[:120]) for n, d in app.deployments.items()} }")
    old = await http.get(ray_head.proxy + "/", timeout=10)
    print(f"proxy after the failed update: {old.status_code} {old.text[:80]!r}")

    started = time.monotonic()
    await dashboard.shutdown_serve()
    print(f"Serve shutdown (DELETE): {time.monotonic() - started:.2f} s")

    async def shut() -> bool:
        return (await dashboard.get_serve_details()).applications == {}

    await eventually(shut, timeout=60)
