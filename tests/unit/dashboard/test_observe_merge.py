"""A round's answers -> the next observation (decisions/dashboard_observe.py), and the conversion
of real captured payloads (adapters/dashboard_convert.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from raybus.adapters.dashboard_convert import job_observation, jobs_by_submission_id, serve_observation
from raybus.adapters.dashboard_models import JobDetails, ServeDetails
from raybus.decisions.dashboard_contract import ClusterObservation, JobObservation, ServeAppObservation
from raybus.decisions.dashboard_observe import RoundResult, changed_parts, merge_round, newly_ended_jobs
from raybus.decisions.dashboard_poll import ClusterWant, PollSettings, ProxyTarget
from tests.conftest import DASHBOARD_CAPTURES

S = PollSettings(unreachable_after=2)
WANT = ClusterWant(namespace="ns", cluster="rc", jobs=("j",), serve=True,
                   proxies=(ProxyTarget(pod="head", ip="10.0.0.1", port=8000),))


def job(status: str, **kw: Any) -> JobObservation:
    return JobObservation(job_id="j", status=status, **kw)


RUNNING = ClusterObservation(namespace="ns", cluster="rc", reachable=True, jobs={"j": job("RUNNING")},
                             serve_apps={"a": ServeAppObservation(status="RUNNING", route_prefix="/")},
                             proxy_healthy={"head": True})
GHOST = job("FAILED", error_type="JOB_SUPERVISOR_ACTOR_DIED", ghost=True)


# (case, previous, result, failures, expected changes as a dict of ClusterObservation fields)
CASES: list[tuple[str, ClusterObservation | None, RoundResult, int, dict[str, Any]]] = [
    ("first answer", None, RoundResult(answered=True, jobs={"j": job("PENDING")}, serve_apps={},
                                       proxy_healthy={"head": False}),
     0, {"reachable": True, "jobs": {"j": job("PENDING")}, "serve_apps": {}, "proxy_healthy": {"head": False},
         "jobs_missing": []}),
    ("one failed round keeps everything", RUNNING, RoundResult(failed=True), 1, {}),
    ("two failed rounds: unreachable, data kept", RUNNING, RoundResult(failed=True), 2, {"reachable": False}),
    ("garbage on jobs only: jobs kept, serve updated", RUNNING,
     RoundResult(answered=True, failed=True, serve_apps={"a": ServeAppObservation(status="UNHEALTHY")},
                 proxy_healthy={"head": True}),
     1, {"serve_apps": {"a": ServeAppObservation(status="UNHEALTHY")}}),
    ("404: missing, not failed", RUNNING, RoundResult(answered=True, jobs_absent=frozenset({"j"})), 0,
     {"jobs": {}, "jobs_missing": ["j"]}),
    ("missing stays missing while not read", RUNNING.model_copy(update={"jobs": {}, "jobs_missing": ["j"]}),
     RoundResult(failed=True), 1, {"jobs": {}, "jobs_missing": ["j"]}),
    ("job terminal", RUNNING, RoundResult(answered=True, jobs={"j": job("SUCCEEDED", end_time_ms=5)}), 0,
     {"jobs": {"j": job("SUCCEEDED", end_time_ms=5)}}),
    ("ghost after a real status: the real status stays, flagged", RUNNING.model_copy(
        update={"jobs": {"j": job("STOPPED", end_time_ms=9)}}),
     RoundResult(answered=True, jobs={"j": GHOST}), 0, {"jobs": {"j": job("STOPPED", end_time_ms=9, ghost=True)}}),
    ("ghost after the 404: still missing, never FAILED", RUNNING.model_copy(update={"jobs": {}, "jobs_missing": ["j"]}),
     RoundResult(answered=True, jobs={"j": GHOST}), 0, {"jobs": {}, "jobs_missing": ["j"]}),
    ("ghost never seen for real: missing", None, RoundResult(answered=True, jobs={"j": GHOST}), 0,
     {"reachable": True, "jobs": {}, "jobs_missing": ["j"], "serve_apps": None, "proxy_healthy": {}}),
    ("resubmitted after missing", RUNNING.model_copy(update={"jobs": {}, "jobs_missing": ["j"]}),
     RoundResult(answered=True, jobs={"j": job("PENDING")}), 0, {"jobs": {"j": job("PENDING")},
                                                                  "jobs_missing": []}),
    ("proxy turns unhealthy", RUNNING, RoundResult(answered=True, proxy_healthy={"head": False}), 0,
     {"proxy_healthy": {"head": False}}),
]


@pytest.mark.parametrize(("case", "previous", "result", "failures", "changes"), CASES,
                         ids=[c[0] for c in CASES])
def test_merge_round(case: str, previous: ClusterObservation | None, result: RoundResult, failures: int,
                     changes: dict[str, Any]) -> None:
    merged = merge_round(previous, WANT, result, failures=failures, settings=S)
    base = previous or ClusterObservation(namespace="ns", cluster="rc")
    assert merged == base.model_copy(update=changes)
    assert (changed_parts(previous, merged) == []) == (merged == previous)


def test_only_declared_parts_are_reported() -> None:
    narrower = ClusterWant(namespace="ns", cluster="rc", jobs=("k",))
    merged = merge_round(RUNNING, narrower, RoundResult(answered=True, jobs={"k": JobObservation(
        job_id="k", status="RUNNING")}), failures=0, settings=S)
    assert set(merged.jobs) == {"k"} and merged.serve_apps is None and merged.proxy_healthy == {}


def test_newly_ended_jobs() -> None:
    ended = RUNNING.model_copy(update={"jobs": {"j": job("SUCCEEDED", end_time_ms=7)}})
    assert newly_ended_jobs(RUNNING, ended) == [job("SUCCEEDED", end_time_ms=7)]
    assert newly_ended_jobs(ended, ended) == []
    ghosted = RUNNING.model_copy(update={"jobs": {"j": GHOST}})
    assert newly_ended_jobs(RUNNING, ghosted) == []


observations = st.builds(
    lambda status, reachable, healthy, app: ClusterObservation(
        namespace="ns", cluster="rc", reachable=reachable, jobs={"j": job(status)},
        serve_apps={"a": ServeAppObservation(status=app)}, proxy_healthy={"head": healthy}),
    st.sampled_from(["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"]), st.booleans(), st.booleans(),
    st.sampled_from(["DEPLOYING", "RUNNING", "DEPLOY_FAILED", "UNHEALTHY"]))


@given(previous=observations, failures=st.integers(1, 10))
def test_a_fault_never_changes_a_job_app_or_proxy(previous: ClusterObservation, failures: int) -> None:
    merged = merge_round(previous, WANT, RoundResult(failed=True), failures=failures, settings=S)
    assert (merged.jobs, merged.serve_apps, merged.proxy_healthy, merged.jobs_missing) == (
        previous.jobs, previous.serve_apps, previous.proxy_healthy, previous.jobs_missing)
    assert merged.reachable == (previous.reachable and failures < S.unreachable_after)


@given(previous=observations)
def test_a_ghost_never_becomes_a_status(previous: ClusterObservation) -> None:
    merged = merge_round(previous, WANT, RoundResult(answered=True, jobs={"j": GHOST}), failures=0, settings=S)
    assert merged.jobs["j"].status == previous.jobs["j"].status and merged.jobs["j"].ghost


# --- conversion of captured payloads ------------------------------------------------------------------
def capture(name: str) -> Any:
    return (DASHBOARD_CAPTURES / f"{name}.response.json").read_bytes()


def test_ghost_capture_is_flagged() -> None:
    details = JobDetails.model_validate_json(capture("39b_joblong_GET_ghost_after_delete_FAILED_SUPERVISOR_DIED"))
    observed = job_observation("joblong", details)
    assert observed.ghost and observed.status == "FAILED" and observed.error_type == "JOB_SUPERVISOR_ACTOR_DIED"


def test_running_job_capture() -> None:
    details = JobDetails.model_validate_json(capture("31_joblong_get_status_RUNNING"))
    observed = job_observation(details.submission_id or "", details)
    assert observed.status == "RUNNING" and not observed.ghost and observed.end_time_ms is None
    assert observed.start_time_ms == details.start_time


def test_list_with_ghost_and_drivers() -> None:
    listing = TypeAdapter(list[JobDetails]).validate_json(capture("39c_jobs_list_with_ghost"))
    by_id = jobs_by_submission_id(listing)
    assert all(k for k in by_id) and len(by_id) <= len(listing)
    assert any(job_observation(k, d).ghost for k, d in by_id.items())


def test_serve_capture_keeps_what_reconcilers_read() -> None:
    details = ServeDetails.model_validate_json(capture("161_serve_v5_poll_final"))
    apps = serve_observation(details)
    assert apps["app1"].status == "RUNNING" and apps["app1"].route_prefix == "/"
    assert apps["app1"].deployments["Hello"].status == "HEALTHY"
    assert apps["app-badimport"].status == "DEPLOY_FAILED" and apps["app-badimport"].route_prefix is None
    assert "ModuleNotFoundError" in apps["app-badimport"].message
    assert apps["app-badctor"].deployments["Broken"].status == "DEPLOY_FAILED"
    # replica lists, actor ids and controller timestamps are not part of the observation: two
    # captures of the same state convert equal
    again = ServeDetails.model_validate_json(capture("161_serve_v5_poll_final"))
    assert serve_observation(again) == apps
