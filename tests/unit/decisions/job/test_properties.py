"""Properties over arbitrary sequences of observations and outcomes, fed back through the world:
never two RayClusters or submitter Jobs for one attempt, never a duplicate HTTP submission, never
out of a terminal state except by retry, deadlines never retried, counters never decrease, and a
snapshot always decides the same. Plus every mode driven to completion."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.decisions.job.world import EVENTS, World

MODES = ["K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode"]


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    mode = draw(st.sampled_from(MODES))
    spec: dict[str, Any] = {"submissionMode": mode}
    if draw(st.booleans()) and mode != "InteractiveMode":
        spec["backoffLimit"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        spec["activeDeadlineSeconds"] = draw(st.integers(1, 400))
    if draw(st.booleans()):
        spec["preRunningDeadlineSeconds"] = draw(st.integers(1, 400))
    cleanup = draw(st.sampled_from(["none", "shutdown", "rules", "legacy", "selector"]))
    if cleanup == "selector" and mode in ("K8sJobMode", "HTTPMode") and "backoffLimit" not in spec:
        spec["clusterSelector"] = {"ray.io/cluster": "shared"}
    elif cleanup == "shutdown":
        spec |= {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": draw(st.integers(0, 60))}
    elif cleanup == "rules":
        spec["deletionStrategy"] = {"deletionRules": [
            {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 10}},
            {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 20}},
            {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 5}},
            {"policy": "DeleteSelf", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 40}}]}
    elif cleanup == "legacy":
        spec |= {"shutdownAfterJobFinishes": True,
                 "deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteSelf"}}}
    return spec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), st.lists(st.tuples(st.sampled_from(EVENTS), st.integers(0, 30)), max_size=60))
def test_safety_over_arbitrary_event_sequences(spec: dict[str, Any], events: list[tuple[str, int]]) -> None:
    world = World(spec)
    world.step()
    for name, arg in events:
        world.event(name, arg)
        world.step()  # World raises Violation on any broken invariant
    assert world.duplicate_submissions == 0
    assert len(set(world.created_clusters)) == len(world.created_clusters)
    retries = sum(1 for s in world.statuses if s.get("jobDeploymentStatus") == "Retrying")
    assert len(world.created_clusters) <= retries + 1 + _resumes(world)


def _resumes(world: World) -> int:
    return sum(1 for s in world.statuses if s.get("jobDeploymentStatus") == "Suspended")


def drive(world: World, script: list[str], *, rounds: int = 3) -> None:
    for _ in range(rounds):
        world.step()
    for name in script:
        world.event(name, 0)
        for _ in range(rounds):
            world.step()


HAPPY = ["cluster_ready", "submitter_runs", "poll", "job_progress", "poll", "job_progress", "poll",
         "submitter_finishes", "poll"]


@pytest.mark.parametrize("mode", ["K8sJobMode", "HTTPMode", "SidecarMode"])
def test_every_mode_completes_with_one_cluster_one_submission(mode: str) -> None:
    world = World({"submissionMode": mode, "shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 10})
    drive(world, HAPPY)
    assert world.status["jobDeploymentStatus"] == "Complete" and world.status["jobStatus"] == "SUCCEEDED"
    assert world.status["succeeded"] == 1 and world.status["failed"] == 0
    assert len(world.created_clusters) == 1
    assert len(world.submitter_creations) == (1 if mode == "K8sJobMode" else 0)
    name = world.created_clusters[0]
    assert not world.clusters[name]["metadata"].get("deletionTimestamp")  # TTL not reached yet
    assert world.last is not None and world.last.requeue_after == 10.0
    world.event("requeue", 0)
    world.step()
    assert world.clusters[name]["metadata"].get("deletionTimestamp")  # ~10 s after completion
    if mode == "K8sJobMode":
        assert world.submitter is not None and not world.submitter["metadata"].get("deletionTimestamp")


def test_interactive_mode_waits_for_the_users_job_id() -> None:
    world = World({"submissionMode": "InteractiveMode"})
    drive(world, ["cluster_ready"])
    assert world.status["jobDeploymentStatus"] == "Waiting"
    drive(world, ["user_sets_job_id", "poll", "job_progress", "poll"])
    assert world.status["jobDeploymentStatus"] == "Complete" and world.status["jobId"] == "user-job"


def test_retry_gets_a_new_cluster_and_job_id_each_attempt() -> None:
    world = World({"backoffLimit": 1})
    drive(world, ["cluster_ready", "submitter_runs", "poll"])
    first_id = world.status["jobId"]
    world.event("job_progress", 1)  # PENDING -> RUNNING
    world.event("job_progress", 1)  # RUNNING -> FAILED
    drive(world, ["submitter_finishes", "poll", "finish_deletions", "cluster_ready", "submitter_runs", "poll"])
    assert world.status["failed"] == 1 and world.status["jobDeploymentStatus"] == "Running"
    assert len(world.created_clusters) == 2 and world.status["jobId"] != first_id
    assert len(world.submitter_creations) == 2


def test_suspend_then_resume_is_atomic_and_starts_over() -> None:
    world = World({"shutdownAfterJobFinishes": True})
    drive(world, ["cluster_ready", "submitter_runs", "toggle_suspend"])
    assert world.status["jobDeploymentStatus"] == "Suspending"
    drive(world, ["toggle_suspend"])  # resumed before the deletion finished: still Suspending
    assert world.status["jobDeploymentStatus"] == "Suspending"
    drive(world, ["finish_deletions"])
    assert world.status["jobDeploymentStatus"] in ("Suspended", "Initializing")
    drive(world, ["cluster_ready"])
    assert world.status["jobDeploymentStatus"] == "Running" and len(world.created_clusters) == 2


def test_deleting_a_running_rayjob_stops_the_ray_job_first() -> None:
    world = World({"submissionMode": "HTTPMode"})
    drive(world, ["cluster_ready", "poll"])
    name, job_id = world.status["rayClusterName"], world.status["jobId"]
    assert world.dash[name][job_id] == "PENDING"
    drive(world, ["delete_rayjob"])
    assert world.gone and world.dash[name][job_id] == "STOPPED"


def test_deadline_fails_without_retry_and_without_polling() -> None:
    world = World({"activeDeadlineSeconds": 100, "backoffLimit": 3})
    drive(world, ["cluster_ready", "submitter_runs", "poll"])
    assert world.last is not None and world.last.requeue_after == 100.0
    drive(world, ["requeue"])
    assert world.status["jobDeploymentStatus"] == "Failed" and world.status["reason"] == "DeadlineExceeded"
    assert len(world.created_clusters) == 1
