"""Serve over real HTTP: declarative PUT, DEPLOYING -> RUNNING, failures, proxy health."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from raybus.adapters.dashboard import DashboardBadRequest, RayDashboardClient
from raybus.adapters.dashboard_models import ApplicationStatus, DeploymentStatus, ServeApplicationStatus
from tests.conftest import DASHBOARD_CAPTURES
from tests.integration.dashboard.conftest import Sim

pytestmark = pytest.mark.integration


def config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DASHBOARD_CAPTURES / f"{name}.json").read_text())
    return data


async def wait_statuses(
    client: RayDashboardClient, want: dict[str, ApplicationStatus], *, timeout: float = 5.0
) -> dict[str, ServeApplicationStatus]:
    deadline = asyncio.get_running_loop().time() + timeout
    statuses: dict[str, ServeApplicationStatus] = {}
    while asyncio.get_running_loop().time() < deadline:
        statuses = await client.get_multi_application_status()
        if {n: s.status for n, s in statuses.items()} == want:
            return statuses
        await asyncio.sleep(0.02)
    raise AssertionError(f"wanted {want}, last {statuses}")


async def test_put_then_deploying_then_running(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"serve_deploy_s": 2.0})  # first half: no route yet
    client = sim.client()
    assert (await client.get_serve_details()).applications == {}  # 01_*: before Serve started
    assert await sim.proxy().is_healthy() is False  # port 8000 closed until Serve runs
    await client.update_deployments(config("serve_config_v1"))
    details = await client.get_serve_details()
    assert {a.status for a in details.applications.values()} == {ApplicationStatus.DEPLOYING}
    assert all(a.route_prefix is None and a.deployments == {} for a in details.applications.values())
    statuses = await wait_statuses(
        client, {"app1": ApplicationStatus.RUNNING, "app2": ApplicationStatus.RUNNING}
    )
    assert statuses["app1"].deployments["Hello"].status is DeploymentStatus.HEALTHY
    final = await client.get_serve_details()
    assert final.applications["app2"].route_prefix == "/greet"
    hello = final.applications["app1"].deployments["Hello"]
    assert hello.deployment_config["user_config"] == {"message": "hello"} and len(hello.replicas) == 1
    assert await sim.proxy().is_healthy() is True


async def test_update_shows_deploying_never_updating(sim: Sim) -> None:
    client = sim.client()
    await client.update_deployments(config("serve_config_v1"))
    await wait_statuses(client, {"app1": ApplicationStatus.RUNNING, "app2": ApplicationStatus.RUNNING})
    await sim.control("PUT", "/ns/rc/serve/apps/app1/plan", {"deploy_s": 1.0})
    await client.update_deployments(config("serve_config_v2_num_replicas_2"))
    statuses = await client.get_multi_application_status()
    assert statuses["app1"].status is ApplicationStatus.DEPLOYING  # no app-level UPDATING
    await wait_statuses(client, {"app1": ApplicationStatus.RUNNING, "app2": ApplicationStatus.RUNNING})
    assert len((await client.get_serve_details()).applications["app1"].deployments["Hello"].replicas) == 2


async def test_broken_apps_deploy_failed(sim: Sim) -> None:
    client = sim.client()
    await client.update_deployments(config("serve_config_v5_broken_apps"))
    statuses = await wait_statuses(
        client,
        {
            "app1": ApplicationStatus.RUNNING,
            "app2": ApplicationStatus.RUNNING,
            "app-badimport": ApplicationStatus.DEPLOY_FAILED,
            "app-badattr": ApplicationStatus.DEPLOY_FAILED,
            "app-badctor": ApplicationStatus.DEPLOY_FAILED,
        },
    )
    assert "ModuleNotFoundError" in statuses["app-badimport"].message
    assert statuses["app-badctor"].message == "Failed to update the deployments ['BrokenCtor']."
    assert statuses["app-badctor"].deployments["BrokenCtor"].status is DeploymentStatus.DEPLOY_FAILED
    assert await sim.proxy().is_healthy() is True  # 162_*: healthz stays "success"
    # v6: removing apps -> DELETING, import failures vanish immediately, then all gone.
    await client.update_deployments(config("serve_config_v6_only_app1"))
    after = await client.get_multi_application_status()
    assert "app-badimport" not in after and after["app-badctor"].status is ApplicationStatus.DELETING
    await wait_statuses(client, {"app1": ApplicationStatus.RUNNING})


async def test_control_plans_failure_and_unhealthy(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/serve/apps/app2/plan", {"fail": "ctor", "deploy_s": 0.1})
    client = sim.client()
    await client.update_deployments(config("serve_config_v1"))
    await wait_statuses(client, {"app1": ApplicationStatus.RUNNING, "app2": ApplicationStatus.DEPLOY_FAILED})
    await sim.control("PUT", "/ns/rc/serve/apps/app1/status", {"status": "UNHEALTHY"})
    statuses = await client.get_multi_application_status()
    assert statuses["app1"].status is ApplicationStatus.UNHEALTHY
    assert statuses["app1"].message == "The deployments ['Hello'] are UNHEALTHY."
    await sim.control("PUT", "/ns/rc/serve/proxy", {"healthy": False})
    assert await sim.proxy().is_healthy() is False


async def test_invalid_config_is_bad_request_and_shutdown(sim: Sim) -> None:
    client = sim.client()
    with pytest.raises(DashboardBadRequest, match="Field required"):
        await client.update_deployments({"applications": [{"name": "x", "route_prefix": "/x"}]})
    await client.update_deployments(config("serve_config_v1"))
    await client.shutdown_serve()
    assert (await client.get_serve_details()).applications == {}
    assert await sim.proxy().is_healthy() is False  # README §4: port 8000 refuses after shutdown
