"""Timeouts, garbage, head down: always a transient error, never a state. Request counting."""

from __future__ import annotations

import time

import pytest

from raybus.adapters.dashboard import DashboardGarbage, DashboardUnreachable, JobNotFound
from raybus.adapters.dashboard_models import JobStatus, JobSubmitRequest
from tests.integration.dashboard.conftest import Sim
from tests.integration.dashboard.test_serve import config

pytestmark = pytest.mark.integration


async def test_timeout_is_unreachable_and_bounded(sim: Sim) -> None:
    await sim.control("POST", "/ns/rc/faults", {"kind": "timeout", "count": 5, "sleep_s": 3.0})
    client = sim.client(timeout_s=0.2, get_attempts=2)
    started = time.monotonic()
    with pytest.raises(DashboardUnreachable, match="timed out"):
        await client.get_version()
    assert time.monotonic() - started < 2.0  # 2 attempts x 0.2 s + tiny backoff, not 2 x 3 s
    counts = (await sim.control("GET", "/ns/rc/requests")).json()
    assert counts["GET /api/version"] == 2


async def test_one_timeout_then_retry_succeeds(sim: Sim) -> None:
    await sim.control("POST", "/ns/rc/faults", {"kind": "timeout", "count": 1, "sleep_s": 1.0})
    client = sim.client(timeout_s=0.2, get_attempts=3)
    assert (await client.get_version()).ray_version == "2.60.0"


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("invalid_json", DashboardGarbage),
        ("html_200", DashboardGarbage),
        ("html_502", DashboardUnreachable),
        ("reset", DashboardUnreachable),
    ],
)
async def test_garbage_and_gateway_errors(sim: Sim, kind: str, error: type[Exception]) -> None:
    client = sim.client(get_attempts=2)
    await client.submit_job(JobSubmitRequest(entrypoint="echo hi", submission_id="j"))
    await sim.control("POST", "/ns/rc/faults", {"kind": kind, "count": 2, "path_contains": "/api/jobs/j"})
    with pytest.raises(error):
        await client.get_job_info("j")
    assert (await client.get_job_info("j")).submission_id == "j"  # faults used up: answers again


async def test_garbage_answer_to_a_write_means_the_write_landed(sim: Sim) -> None:
    """A 200 cut short: the head handled the request, only the answer is lost. The submit's
    caller sees garbage (and, per submit_job's contract, may resubmit the same id); the serve
    PUT's caller, like KubeRay's UpdateDeployments, reads only the status code."""
    client = sim.client()
    await sim.control("POST", "/ns/rc/faults", {"kind": "invalid_json", "count": 1, "path_contains": "/api/jobs"})
    with pytest.raises(DashboardGarbage):
        await client.submit_job(JobSubmitRequest(entrypoint="echo hi", submission_id="j"))
    assert (await client.get_job_info("j")).submission_id == "j"
    await sim.control("POST", "/ns/rc/faults", {"kind": "invalid_json", "count": 1, "path_contains": "/api/serve"})
    await client.update_deployments(config("serve_config_v1"))
    assert set((await client.get_serve_details()).applications) == {"app1", "app2"}
    counts = (await sim.control("GET", "/ns/rc/requests")).json()
    assert counts["PUT /api/serve/applications/"] == 1


async def test_garbage_on_one_attempt_is_retried(sim: Sim) -> None:
    client = sim.client(get_attempts=3)
    await sim.control("POST", "/ns/rc/faults", {"kind": "invalid_json", "count": 2})
    assert (await client.list_jobs()) == []
    counts = (await sim.control("GET", "/ns/rc/requests")).json()
    assert counts["GET /api/jobs/"] == 3


async def test_head_down_is_unreachable_and_restart_loses_state(sim: Sim) -> None:
    client = sim.client(get_attempts=1)
    await client.submit_job(JobSubmitRequest(entrypoint="echo hi", submission_id="before"))
    sim.registry.head_down("ns", "rc")
    with pytest.raises(DashboardUnreachable):
        await client.get_job_info("before")
    with pytest.raises(DashboardUnreachable):
        await client.submit_job(JobSubmitRequest(entrypoint="echo hi", submission_id="during"))
    assert await sim.proxy().is_healthy() is False
    await sim.control("POST", "/ns/rc/head", {"up": True})
    with pytest.raises(JobNotFound):  # fresh head without GCS FT: the job record is gone
        await client.get_job_info("before")
    counts = (await sim.control("GET", "/ns/rc/requests")).json()
    assert counts["refused"] == 3  # two dashboard requests and the proxy health check


async def test_unknown_cluster_is_unreachable(sim: Sim) -> None:
    with pytest.raises(DashboardUnreachable):
        await sim.client("never-created", get_attempts=1).list_jobs()


async def test_request_counts_per_cluster(sim: Sim) -> None:
    sim.registry.head_up("ns", "other")
    await sim.control("DELETE", "/requests")
    a, b = sim.client("rc"), sim.client("other")
    await a.submit_job(JobSubmitRequest(entrypoint="echo hi", submission_id="x"))
    for _ in range(3):
        assert (await a.get_job_info("x")).status in set(JobStatus)
    await b.get_serve_details()
    counts = (await sim.control("GET", "/requests")).json()
    assert counts["ns/rc"] == {"POST /api/jobs/": 1, "GET /api/jobs/{id}": 3, "total": 4}
    assert counts["ns/other"] == {"GET /api/serve/applications/": 1, "total": 1}
