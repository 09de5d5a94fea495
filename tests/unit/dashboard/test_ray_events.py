"""Job ends pushed by Ray heads: the pure part (decisions/ray_events.py, with_pushed_ends), on the
POST bodies a real Ray 2.60 head sent (ray260_pushed_events.json, captured in a loopback netns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raybus.decisions.cluster.pod_template import build_head_pod, build_worker_pod
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.dashboard_poll import (
    ClusterWant,
    PollSettings,
    PollState,
    decide_poll,
    with_pushed_ends,
)
from raybus.decisions.ray_events import (
    EXPORT_ADDR_ENV,
    MAX_BODY_BYTES,
    SEND_BATCH_SIZE_ENV,
    ExportSettings,
    RayEventBatch,
    cluster_token,
    ended_submissions,
    export_env,
    serve_actor_deaths,
    token_ok,
)
from tests.unit.decisions.cluster.test_reconcile_helpers import make_cluster

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


def test_tokens_are_per_cluster_incarnation() -> None:
    token = cluster_token("k1", "ns", "a", "uid-1")
    assert token_ok("k1", "ns", "a", "uid-1", token)
    assert not token_ok("k1", "ns", "b", "uid-1", token)  # another cluster's path
    assert not token_ok("k1", "other", "a", "uid-1", token)
    assert not token_ok("k2", "ns", "a", "uid-1", token)  # another key
    assert not token_ok("k1", "ns", "a", "uid-2", token)  # a RayCluster re-created under the name
    assert not token_ok("k1", "ns", "a", None, cluster_token("k1", "ns", "a", ""))  # no live cluster
    assert not token_ok("", "ns", "a", "uid-1", cluster_token("", "ns", "a", "uid-1"))  # no key
    assert cluster_token("k1", "ns", "a", "u") != cluster_token("k1", "ns", "a2", "u")


def test_export_env_is_off_without_url_key_or_uid_and_carries_the_token_path() -> None:
    assert export_env(ExportSettings(), namespace="ns", cluster="c", uid="u") == []
    assert export_env(ExportSettings(url="http://p:8266"), namespace="ns", cluster="c", uid="u") == []
    assert export_env(ExportSettings(url="http://p:8266", key="k"), namespace="ns", cluster="c", uid="") == []
    env = {e["name"]: e["value"] for e in export_env(ExportSettings(url="http://p:8266/", key="k"),
                                                     namespace="ns", cluster="c", uid="u")}
    assert env[EXPORT_ADDR_ENV] == f"http://p:8266/v1/ray-events/ns/c/{cluster_token('k', 'ns', 'c', 'u')}"
    assert env["RAY_enable_ray_event"] == "true"
    assert env["RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES"] == "ACTOR_LIFECYCLE_EVENT"
    # Ray's batches stay under the receiver's body limit (Ray 2.60's lifecycle events are 1-2 KB).
    batch = int(env[SEND_BATCH_SIZE_ENV])
    biggest = max(len(json.dumps(e)) for post in CAPTURE["posts"] for e in post)
    assert batch * biggest * 10 < MAX_BODY_BYTES <= 1024 * 1024
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


# --- raybus's head Pods carry the export env behind the setting ---------------------------------------
def _ray_env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


def test_head_pods_push_to_the_poller_only_with_url_and_key() -> None:
    rc = make_cluster()
    on = OperatorSettings.from_env({"RAYBUS_RAY_EVENTS_URL": "http://raybus-dashboard-poller:8266",
                                    "RAYBUS_RAY_EVENTS_KEY": "k"})
    head = _ray_env(build_head_pod(rc, settings=on, name="h"))
    token = cluster_token("k", rc.namespace, rc.name, rc.metadata.uid or "")
    assert rc.metadata.uid and head[EXPORT_ADDR_ENV] == f"http://raybus-dashboard-poller:8266/v1/ray-events/{rc.namespace}/{rc.name}/{token}"
    assert head["RAY_ray_events_report_interval_ms"] == "100"
    worker = build_worker_pod(rc, rc.spec.worker_group_specs[0], settings=on, name="w")  # type: ignore[index]
    assert EXPORT_ADDR_ENV not in _ray_env(worker)  # only the head's GCS records the supervisor actors
    for off in (OperatorSettings(), OperatorSettings.from_env({"RAYBUS_RAY_EVENTS_URL": "http://p:8266"})):
        assert not any(n.startswith("RAY_DASHBOARD_AGGREGATOR") or n == "RAY_enable_ray_event"
                       for n in _ray_env(build_head_pod(rc, settings=off, name="h")))
    assert "'k'" not in repr(on)


def test_an_export_address_already_set_is_left_alone() -> None:
    rc = make_cluster()
    template = rc.spec.head_group_spec.template
    containers = template["spec"]["containers"]
    containers[0]["env"] = [{"name": EXPORT_ADDR_ENV, "value": "http://mine:1/e"}]
    on = OperatorSettings(ray_events=ExportSettings(url="http://p:8266", key="k"))
    env = _ray_env(build_head_pod(rc, settings=on, name="h"))
    assert env[EXPORT_ADDR_ENV] == "http://mine:1/e" and "RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES" not in env


def test_deaths_of_serve_actors_read_serve_at_once() -> None:
    def dead(name: str, namespace: str) -> dict[str, Any]:
        return {"eventType": "ACTOR_LIFECYCLE_EVENT", "actorLifecycleEvent": {"stateTransitions": [
            {"state": "DEAD", "deathCause": {"actorDiedErrorContext": {"name": name, "rayNamespace": namespace}}}]}}

    body = [dead("SERVE_REPLICA::app#Hello#abc", "serve"), dead("SERVE_CONTROLLER_ACTOR", "serve"),
            dead("mine", "default")]
    events = RayEventBatch(events=body).events
    assert serve_actor_deaths(events) == 2 and ended_submissions(events) == set()
    # The real capture's four supervisor deaths (namespace SUPERVISOR_ACTOR_RAY_NAMESPACE) are no Serve news.
    assert sum(serve_actor_deaths(RayEventBatch(events=p).events) for p in CAPTURE["posts"]) == 0
    serve = ClusterWant(namespace="ns", cluster="c", serve=True)
    assert with_pushed_ends(serve, {}, 2).poll_now == frozenset({"push/serve=2"})
    jobs_only = ClusterWant(namespace="ns", cluster="c", jobs=("j1",))
    assert with_pushed_ends(jobs_only, {}, 2) is jobs_only  # nobody declared Serve: no read


def test_after_a_pushed_serve_death_serve_stays_fast_for_the_fresh_window() -> None:
    # Real Ray 2.60 head: a replica's death was pushed 0.2 s after it, the app turned UNHEALTHY 7 s
    # later, so the read at the push alone would miss the change.
    from raybus.decisions.dashboard_contract import ClusterObservation
    from raybus.decisions.dashboard_poll import after_round

    # The push alone: no Serve cadence.
    settings = PollSettings(fast_interval_s=1.0, slow_interval_s=30.0, fresh_window_s=15.0, serve_interval_s=0)
    want = ClusterWant(namespace="ns", cluster="c", serve=True)
    obs = ClusterObservation(namespace="ns", cluster="c", serve_apps={})
    state = after_round(PollState(), want, now=0.0, failed=False)
    assert decide_poll(want, state, obs, now=2.0, wall_ms=0, settings=settings).reason == "steady state"
    pushed = with_pushed_ends(want, {}, 1)
    assert decide_poll(pushed, state, obs, now=2.0, wall_ms=0, settings=settings).due
    state = after_round(state, pushed, now=2.0, failed=False)
    fast = decide_poll(pushed, state, obs, now=3.0, wall_ms=0, settings=settings)
    assert fast.due and fast.reason == "a Serve actor died moments ago"
    state = after_round(state, pushed, now=3.0, failed=False)  # the same token again: no new push
    assert state.serve_push_at == 2.0
    late = decide_poll(pushed, state, obs, now=18.0, wall_ms=0, settings=settings)
    assert not late.due and late.reason == "steady state"
