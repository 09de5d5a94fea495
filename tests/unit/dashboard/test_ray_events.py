"""Job ends pushed by Ray heads: the pure part (decisions/ray_events.py, with_pushed_ends), on the
POST bodies a real Ray 2.60 head sent (ray260_pushed_events.json, captured in a loopback netns)."""

from __future__ import annotations

import json
from pathlib import Path

from raybus.decisions.dashboard_poll import ClusterWant, PollSettings, PollState, decide_poll, with_pushed_ends
from raybus.decisions.ray_events import (
    EXPORT_ADDR_ENV,
    ExportSettings,
    RayEventBatch,
    cluster_token,
    ended_submissions,
    export_env,
    token_ok,
)

CAPTURE = json.loads((Path(__file__).parent / "ray260_pushed_events.json").read_text())


def test_the_real_heads_posts_name_the_ended_jobs_by_submission_id() -> None:
    per_post = [ended_submissions(RayEventBatch(events=body).events) for body in CAPTURE["posts"]]
    ended = [job for post in per_post for job in sorted(post)]
    # Every job ended exactly once, in the order they ended; a job without a Ray driver too.
    assert ended == ["probe-driver", "probe-plain", "probe-fail", "probe-stop"]
    # Supervisor births (DEPENDENCIES_UNREADY/PENDING_CREATION/ALIVE) and driver events are no end.
    assert sum(1 for post in per_post if post) == 4


def test_events_of_other_kinds_and_unknown_fields_are_ignored() -> None:
    body = [{"eventType": "ACTOR_LIFECYCLE_EVENT", "newField": 1, "actorLifecycleEvent": {
        "stateTransitions": [{"state": "DEAD", "deathCause": {"actorDiedErrorContext": {
            "name": "my_user_actor"}}}]}},
            {"eventType": "DRIVER_JOB_LIFECYCLE_EVENT", "driverJobLifecycleEvent": {
                "jobId": "AgAAAA==", "stateTransitions": [{"state": "FINISHED"}]}},
            {"eventType": "ACTOR_LIFECYCLE_EVENT", "actorLifecycleEvent": {"stateTransitions": [
                {"state": "ALIVE", "deathCause": {"actorDiedErrorContext": {
                    "name": "_ray_internal_job_actor_x"}}}]}}]
    assert ended_submissions(RayEventBatch(events=body).events) == set()


def test_tokens_are_per_cluster_and_checked_in_constant_time() -> None:
    token = cluster_token("k1", "ns", "a")
    assert token_ok("k1", "ns", "a", token)
    assert not token_ok("k1", "ns", "b", token)  # another cluster's path
    assert not token_ok("k1", "other", "a", token)
    assert not token_ok("k2", "ns", "a", token)  # another key
    assert not token_ok("", "ns", "a", cluster_token("", "ns", "a"))  # no key: nothing is accepted
    assert cluster_token("k1", "ns", "a") != cluster_token("k1", "ns", "a2")


def test_export_env_is_off_without_url_or_key_and_carries_the_token_path() -> None:
    assert export_env(ExportSettings(), namespace="ns", cluster="c") == []
    assert export_env(ExportSettings(url="http://p:8266"), namespace="ns", cluster="c") == []
    env = {e["name"]: e["value"] for e in export_env(ExportSettings(url="http://p:8266/", key="k"),
                                                     namespace="ns", cluster="c")}
    assert env[EXPORT_ADDR_ENV] == f"http://p:8266/v1/ray-events/ns/c/{cluster_token('k', 'ns', 'c')}"
    assert env["RAY_enable_ray_event"] == "true"
    assert env["RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES"] == "ACTOR_LIFECYCLE_EVENT"
    assert "k" not in repr(ExportSettings(url="u", key="secret-key"))


def test_a_pushed_end_reads_the_cluster_at_once_but_only_for_declared_jobs() -> None:
    want = ClusterWant(namespace="ns", cluster="c", jobs=("j1",))
    settings = PollSettings()
    state = PollState(last_attempt_at=100.0, last_success_at=100.0, polled_targets=want.targets)
    assert not decide_poll(want, state, None, now=100.5, wall_ms=0, settings=settings).due  # 1 s cadence
    pushed = with_pushed_ends(want, {"j1": 1, "undeclared": 3})
    assert pushed.poll_now == frozenset({"push/j1=1"})
    decision = decide_poll(pushed, state, None, now=100.5, wall_ms=0, settings=settings)
    assert decision.due and decision.reason == "poll_now push/j1=1"
    # Once a round covered the token, the same count asks for nothing; a second push does.
    seen = state.model_copy(update={"tokens_seen": pushed.poll_now})
    assert with_pushed_ends(want, {"undeclared": 1}) is want
    again = with_pushed_ends(want, {"j1": 2})
    assert again.poll_now - seen.tokens_seen == frozenset({"push/j1=2"})
