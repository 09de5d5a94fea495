"""Real Ray 2.60 behaviours measured in README §8, in the simulator and through the client:
write latencies (a timed-out write is "unknown", never failure), any unimportable import path,
a broken update keeps serving, and the route table that is never populated."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from raybus.adapters.dashboard import (
    DashboardOutcomeUnknown,
    DashboardTimeouts,
    DashboardUnreachable,
    JobNotFound,
)
from raybus.adapters.dashboard_models import ApplicationStatus, JobSubmitRequest
from raybus.observability.metrics import DASHBOARD_REQUESTS
from tests.integration.dashboard.conftest import Sim

pytestmark = pytest.mark.integration


def app(name: str, import_path: str, route: str = "/") -> dict[str, Any]:
    return {"name": name, "route_prefix": route, "import_path": import_path}


async def until(check: Any, *, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def app_status(sim: Sim, name: str) -> str | None:
    details = await sim.client().get_serve_details()
    found = details.applications.get(name)
    return None if found is None else found.status.value


async def test_first_put_latency_succeeds_with_its_own_timeout(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"serve_first_put_s": 1.0, "serve_put_s": 0.0})
    client = sim.client(timeouts=DashboardTimeouts(read_s=0.3, serve_put_s=5.0))
    started = time.monotonic()
    await client.update_deployments({"applications": [app("a1", "hello:app")]})
    assert time.monotonic() - started >= 1.0  # the PUT waited for Serve to start, and succeeded
    started = time.monotonic()
    await client.update_deployments({"applications": [app("a1", "hello:app")]})
    assert time.monotonic() - started < 0.5  # only the first PUT starts Serve


async def test_timed_out_put_is_unknown_and_still_happens(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"serve_first_put_s": 1.0})
    client = sim.client(timeouts=DashboardTimeouts(serve_put_s=0.3))
    with pytest.raises(DashboardOutcomeUnknown, match="timed out"):
        await client.update_deployments({"applications": [app("a1", "hello:app")]})
    # Unknown, not failed: reading back shows the config did land once the head finished.
    assert await until(lambda: app_status(sim, "a1"), timeout=5.0) in ("DEPLOYING", "RUNNING")


async def test_delete_blocks_while_apps_run(sim: Sim) -> None:
    client = sim.client()
    await client.update_deployments({"applications": [app("a1", "hello:app")]})
    await until(lambda: _is(sim, "a1", "RUNNING"))
    await sim.control("PUT", "/ns/rc/settings", {"serve_delete_running_s": 1.0, "serve_delete_idle_s": 0.1})
    with pytest.raises(DashboardOutcomeUnknown):
        await sim.client(timeouts=DashboardTimeouts(serve_delete_s=0.3)).shutdown_serve()
    await until(lambda: _no_apps(sim), timeout=5.0)  # the shutdown still happened
    started = time.monotonic()
    await client.shutdown_serve()  # nothing running now: quick
    assert time.monotonic() - started < 0.8


async def test_job_write_latency_and_timeouts(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"job_write_s": 0.6})
    slow = sim.client(timeouts=DashboardTimeouts(submit_job_s=0.2))
    with pytest.raises(DashboardOutcomeUnknown):
        await slow.submit_job(JobSubmitRequest(entrypoint="sleep 30", submission_id="j1"))
    assert (await until(lambda: _job(sim, "j1"))).submission_id == "j1"  # it was submitted after all
    with pytest.raises(JobNotFound):
        await sim.client(timeouts=DashboardTimeouts(delete_job_s=2.0)).delete_job("nope")


async def test_refused_write_is_unreachable_not_unknown(sim: Sim) -> None:
    await sim.control("POST", "/ns/rc/head", {"up": False})
    with pytest.raises(DashboardUnreachable) as err:
        await sim.client().submit_job(JobSubmitRequest(entrypoint="echo", submission_id="x"))
    # The sim refuses by closing the connection, which a client cannot tell from a reset after
    # sending: for a write that is "unknown" (only a TCP connect error proves nothing was sent).
    assert isinstance(err.value, DashboardOutcomeUnknown)


async def test_html_502_on_a_write_is_unknown(sim: Sim) -> None:
    await sim.control("POST", "/ns/rc/faults", {"kind": "html_502", "count": 1, "path_contains": "serve"})
    with pytest.raises(DashboardOutcomeUnknown):
        await sim.client().update_deployments({"applications": [app("a1", "hello:app")]})


@pytest.mark.parametrize("import_path", ["no_such_module_cmp:app", "mymodel.serve:deployment",
                                         "nonexistent_module:app"])
async def test_any_unimportable_import_path_fails(sim: Sim, import_path: str) -> None:
    client = sim.client()
    await client.update_deployments({"applications": [app("bad", import_path)]})
    await until(lambda: _is(sim, "bad", "DEPLOY_FAILED"))
    details = await client.get_serve_details()
    bad = details.applications["bad"]
    assert "ModuleNotFoundError: No module named" in bad.message
    assert bad.route_prefix is None and bad.deployments == {}


async def test_importable_modules_are_a_setting(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"importable_modules": ["mymodel"]})
    await sim.client().update_deployments({"applications": [app("ok", "mymodel.serve:deployment")]})
    await until(lambda: _is(sim, "ok", "RUNNING"))


async def test_broken_update_keeps_the_old_replicas_serving(sim: Sim) -> None:
    client, proxy = sim.client(), sim.proxy()
    await client.update_deployments({"applications": [app("a1", "hello:app")]})
    await until(lambda: _is(sim, "a1", "RUNNING"))
    await client.update_deployments({"applications": [app("a1", "no_such_module_cmp:app")]})
    assert await app_status(sim, "a1") == "DEPLOYING"
    await until(lambda: _is(sim, "a1", "DEPLOY_FAILED"))
    failed = (await client.get_serve_details()).applications["a1"]
    assert failed.route_prefix == "/" and failed.deployments == {}
    assert "ModuleNotFoundError" in failed.message
    routes = await sim.http.get(f"{proxy.base_url}/-/routes")
    assert routes.status_code == 200 and routes.json() == {"/": "a1"}
    assert (await sim.http.get(f"{proxy.base_url}/")).status_code == 200  # old replicas answer
    assert await proxy.is_healthy()


async def test_an_update_whose_constructor_fails_stops_serving(sim: Sim) -> None:
    """Real Ray 2.60 (tests/integration/realray): the rolling update gives up after 3 failed
    starts, DEPLOY_FAILED, and the proxy answers 503 for the app; its health stays `success`."""
    client, proxy = sim.client(), sim.proxy()
    await client.update_deployments({"applications": [app("a1", "hello:app")]})
    await until(lambda: _is(sim, "a1", "RUNNING"))
    assert (await sim.http.get(f"{proxy.base_url}/")).status_code == 200
    await client.update_deployments({"applications": [app("a1", "hello:broken_app")]})
    await until(lambda: _is(sim, "a1", "DEPLOY_FAILED"))
    response = await sim.http.get(f"{proxy.base_url}/")
    assert response.status_code == 503 and "is unavailable because it failed to deploy" in response.text
    assert await proxy.is_healthy()


async def test_fresh_serve_with_only_an_import_failure_has_no_route_table(sim: Sim) -> None:
    client, proxy = sim.client(), sim.proxy()
    await client.update_deployments({"applications": [app("bad", "no_such_module_cmp:app")]})
    await until(lambda: _is(sim, "bad", "DEPLOY_FAILED"))
    for tail in ("-/healthz", "-/routes"):
        response = await sim.http.get(f"{proxy.base_url}/{tail}")
        assert (response.status_code, response.text) == (503, "Route table is not populated yet.")
    assert await proxy.is_healthy() is False  # KubeRay: the head is not serving
    await client.update_deployments({"applications": [app("good", "hello:app")]})
    await until(lambda: _is(sim, "good", "RUNNING"))
    assert await proxy.is_healthy() is True


async def test_requests_are_counted_per_endpoint_and_code(sim: Sim) -> None:
    def count(endpoint: str, code: str) -> float:
        return DASHBOARD_REQUESTS.labels(endpoint=endpoint, code=code)._value.get()

    before_ok, before_404 = count("GET /api/jobs/", "200"), count("GET /api/jobs/{id}", "404")
    client = sim.client()
    await client.list_jobs()
    with pytest.raises(JobNotFound):
        await client.get_job_info("nope")
    assert count("GET /api/jobs/", "200") == before_ok + 1
    assert count("GET /api/jobs/{id}", "404") == before_404 + 1


async def _is(sim: Sim, name: str, status: str) -> bool:
    return await app_status(sim, name) == ApplicationStatus(status).value


async def _no_apps(sim: Sim) -> bool:
    return (await sim.client().get_serve_details()).applications == {}


async def _job(sim: Sim, job_id: str) -> Any:
    try:
        return await sim.client().get_job_info(job_id)
    except JobNotFound:
        return None
