"""Every captured Ray 2.60 dashboard response parses with the client's models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from pydantic import BaseModel, TypeAdapter

from raybus.adapters.dashboard_models import (
    ApplicationStatus,
    DeploymentStatus,
    JobDeleteResponse,
    JobDetails,
    JobLogs,
    JobStatus,
    JobStopResponse,
    JobSubmitResponse,
    JobType,
    ServeApplicationStatus,
    ServeDetails,
    VersionInfo,
)
from tests.conftest import DASHBOARD_CAPTURES

EXCHANGES = sorted(DASHBOARD_CAPTURES.glob("*.exchange.json"))


def _model_for(method: str, path: str) -> Any:
    """Which model parses the 2xx JSON body of (method, path); None for endpoints we do not model."""
    if path == "/api/version":
        return VersionInfo
    if path.startswith("/api/serve/applications"):
        return ServeDetails if method == "GET" else None
    if path == "/api/jobs/":
        return TypeAdapter(list[JobDetails]) if method == "GET" else JobSubmitResponse
    if path.startswith("/api/jobs/"):
        if path.endswith("/logs"):
            return JobLogs
        if path.endswith("/stop"):
            return JobStopResponse
        return JobDeleteResponse if method == "DELETE" else JobDetails
    return None


def _modelled() -> list[tuple[Path, str, str]]:
    out = []
    for exchange in EXCHANGES:
        data = json.loads(exchange.read_text())
        url = urlsplit(data["request"]["url"])
        if url.port != 8265 or not data["response"]["body_is_json"] or data["response"]["status_code"] != 200:
            continue
        if _model_for(data["request"]["method"], url.path) is not None:
            out.append((exchange, data["request"]["method"], url.path))
    return out


MODELLED = _modelled()


def test_captures_are_present() -> None:
    assert len(EXCHANGES) >= 190
    assert len(MODELLED) >= 120  # every 200 JSON jobs/serve/version response


@pytest.mark.parametrize(("exchange", "method", "path"), MODELLED, ids=[m[0].name[:-14] for m in MODELLED])
def test_raw_body_parses(exchange: Path, method: str, path: str) -> None:
    raw = exchange.with_name(exchange.name.replace(".exchange.json", ".response.json")).read_bytes()
    model = _model_for(method, path)
    if isinstance(model, TypeAdapter):
        parsed = model.validate_json(raw)
        assert isinstance(parsed, list)
        expected = json.loads(raw)
        assert [j.submission_id for j in parsed] == [j["submission_id"] for j in expected]
    else:
        assert issubclass(model, BaseModel)
        parsed_obj = model.model_validate_json(raw)
        # Round trip: nothing the API sent is lost for the fields we model.
        dumped = parsed_obj.model_dump(mode="json")
        expected = json.loads(raw)
        for key in dumped:
            if key in expected and not isinstance(expected[key], dict):
                assert dumped[key] == expected[key], key


def _job(name: str) -> JobDetails:
    return JobDetails.model_validate_json((DASHBOARD_CAPTURES / f"{name}.response.json").read_bytes())


def _serve(name: str) -> ServeDetails:
    return ServeDetails.model_validate_json((DASHBOARD_CAPTURES / f"{name}.response.json").read_bytes())


def test_job_details_values() -> None:
    pending = _job("11_job1_get_status_PENDING")
    assert pending.status is JobStatus.PENDING and not pending.status.is_terminal
    assert pending.end_time is None and pending.driver_node_id is None
    done = _job("11_job1_get_status_SUCCEEDED")
    assert done.status.is_terminal and done.driver_exit_code == 0
    assert done.end_time is not None and done.start_time is not None
    assert done.end_time > done.start_time > 1_700_000_000_000  # epoch milliseconds
    failed = _job("21_jobfail_get_final")
    assert failed.driver_exit_code == 3 and failed.error_type == "JOB_ENTRYPOINT_COMMAND_ERROR"
    stopped = _job("35_joblong_get_final")
    assert stopped.status is JobStatus.STOPPED and stopped.driver_exit_code is None


def test_ghost_and_driver_records() -> None:
    ghost = _job("39b_joblong_GET_ghost_after_delete_FAILED_SUPERVISOR_DIED")
    assert ghost.is_supervisor_ghost and ghost.start_time is None and ghost.metadata is None
    assert not _job("21_jobfail_get_final").is_supervisor_ghost
    driver = _job("201_job_GET_DRIVER_by_job_id")
    assert driver.type is JobType.DRIVER and driver.submission_id is None
    assert driver.end_time == 0 and driver.ended_at_ms is None
    with_driver = _job("66_job_rayinit_venv_get_SUCCEEDED_jobidSet_driverinfoSet")
    assert with_driver.driver_info is not None and with_driver.driver_info.pid == "13689"


def test_serve_details_values() -> None:
    empty = _serve("01_serve_applications_before_serve_started")
    assert empty.applications == {} and empty.proxies == {} and empty.http_options is None
    first = _serve("111_serve_v1_poll_01")
    assert {a.status for a in first.applications.values()} == {ApplicationStatus.DEPLOYING}
    assert all(a.deployments == {} and a.route_prefix is None for a in first.applications.values())
    final = _serve("111_serve_v1_poll_final")
    app1 = final.applications["app1"]
    assert app1.status is ApplicationStatus.RUNNING and app1.deployment_topology is not None
    assert app1.deployments["Hello"].status is DeploymentStatus.HEALTHY
    assert app1.deployments["Hello"].replicas[0].pid == 14291
    assert next(iter(final.proxies.values())).status == "HEALTHY"
    broken = _serve("161_serve_v5_poll_final").applications
    assert broken["app-badimport"].status is ApplicationStatus.DEPLOY_FAILED
    assert "ModuleNotFoundError" in broken["app-badimport"].message
    ctor = broken["app-badctor"].deployments["Broken"]
    assert ctor.status is DeploymentStatus.DEPLOY_FAILED and len(ctor.recent_dead_replicas) == 3


def test_multi_application_status_from_details() -> None:
    final = _serve("193_serve_v8_poll_final")
    statuses = {n: ServeApplicationStatus.from_details(a) for n, a in final.applications.items()}
    flaky = statuses["app-flaky"]
    assert flaky.status is ApplicationStatus.UNHEALTHY
    assert flaky.deployments["Flaky"].status is DeploymentStatus.UNHEALTHY
