"""reconcileServe and the serve-config cache (checkIfNeedSubmitServeApplications, getAndCheckServeStatus,
updateServeDeployment/cacheServeConfig one round later, cleanUpServeConfigCache)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.api.settings import FeatureGates
from raybus.decisions.commands import RecordEvent
from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardCommandResult,
    PutServeConfig,
    ServeAppObservation,
    ServeDeploymentObservation,
)
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.model import DashboardOutcome, ServeConfigCacheEntry, TimedObservation
from raybus.decisions.rayservice.serve import (
    RESUBMIT_GRACE,
    TARGET_CAPACITY_REASON,
    apply_dashboard_results,
    check_if_need_submit_serve_applications,
    clean_up_serve_config_cache,
    is_head_ready,
    parse_serve_config,
    reconcile_serve,
    serve_applications,
    serve_config_hash,
)
from tests.unit.decisions.rayservice.world import SERVE_CONFIG, T0, make_service

SVC = RayService.model_validate(make_service())
HASH = serve_config_hash(SERVE_CONFIG)
RUNNING = {"myapp": {"status": "RUNNING"}}


# --- TestCheckIfNeedSubmitServeApplications -------------------------------------------------------------
@pytest.mark.parametrize(("cached", "spec", "apps", "expected"), [
    ("", "h1", {}, True),            # new cluster: nothing cached
    ("h1", "h1", RUNNING, False),    # unchanged
    ("h1", "h2", RUNNING, True),     # serveConfigV2 updated
    ("h1", "h1", {}, True),          # head Pod crashed without GCS FT: apps gone
    ("", "h1", RUNNING, True),       # operator restarted (KubeRay lost its LRU): submit for safety
])
def test_check_if_need_submit(cached: str, spec: str, apps: dict[str, Any], expected: bool) -> None:
    assert check_if_need_submit_serve_applications(cached, spec, apps)[0] is expected


# --- TestGetAndCheckServeStatus -------------------------------------------------------------------------
@pytest.mark.parametrize(("apps", "ready"), [
    ({"serve-app-1": ("DEPLOYING", "UPDATING")}, False),
    ({"serve-app-1": ("RUNNING", "HEALTHY")}, True),
    ({"serve-app-1": ("UNHEALTHY", "UNHEALTHY")}, False),
    ({"serve-app-1": ("DEPLOY_FAILED", "UPDATING")}, False),
    ({}, False),
    ({"a": ("RUNNING", "HEALTHY"), "b": ("DEPLOYING", "UPDATING")}, False),
    ({"a": ("RUNNING", "HEALTHY"), "b": ("RUNNING", "HEALTHY")}, True),
])
def test_serve_applications(apps: dict[str, tuple[str, str]], ready: bool) -> None:
    obs = {name: ServeAppObservation(status=s, message="m" if s != "RUNNING" else "",
                                     deployments={"d": ServeDeploymentObservation(status=d)})
           for name, (s, d) in apps.items()}
    is_ready, statuses = serve_applications(obs)
    assert is_ready is ready
    for name, (s, d) in apps.items():
        assert statuses[name]["status"] == s
        assert statuses[name]["serveDeploymentStatuses"] == {"d": {"status": d}}


def test_unnamed_app_is_reported_as_default() -> None:
    _, statuses = serve_applications({"": ServeAppObservation(status="RUNNING")})
    assert statuses == {c.DEFAULT_SERVE_APP_NAME: {"status": "RUNNING"}}


def test_parse_serve_config_is_json_safe() -> None:
    cfg = parse_serve_config("applications:\n  - name: a\n    runtime_env: {x: 2026-01-01}\n")
    assert cfg == {"applications": [{"name": "a", "runtime_env": {"x": "2026-01-01"}}]}
    assert parse_serve_config("") == {}


# --- the result of the previous round's PutServeConfig -----------------------------------------------------
def outcome(state: str, *, config: dict[str, Any] | None = None, reason: str = "submit",
            cluster: str = "c1") -> DashboardOutcome:
    cmd = PutServeConfig(reason=reason, cluster=cluster, config=config or {}, config_hash=HASH)
    return DashboardOutcome(command=cmd, finished_at=T0, result=DashboardCommandResult(
        command_id="1", op=cmd.op, cluster=cluster, state=state, message="" if state == "ok" else "boom"))


def test_ok_result_caches_what_the_cluster_was_given() -> None:
    out = apply_dashboard_results(SVC, [outcome("ok")], {}, now=T0 + timedelta(seconds=1))
    assert out.cache == {"c1": ServeConfigCacheEntry(config_hash=HASH, submitted_at=T0)}
    assert out.error is None
    event = out.events[0]
    assert isinstance(event, RecordEvent) and event.event_reason == c.UPDATED_SERVE_APPLICATIONS
    assert event.message == "Updated serve applications to the RayCluster default/c1"


@pytest.mark.parametrize("state", ["failed", "unknown"])
def test_failed_result_caches_nothing_and_is_kuberays_error(state: str) -> None:
    out = apply_dashboard_results(SVC, [outcome(state)], {}, now=T0)
    assert out.cache == {}
    assert out.error is not None and out.error.startswith("fail to create / update Serve applications")
    event = out.events[0]
    assert isinstance(event, RecordEvent) and event.type == "Warning"
    assert event.event_reason == c.FAILED_TO_UPDATE_SERVE_APPLICATIONS


def test_expired_command_is_decided_again_without_event_or_error() -> None:
    """A PUT revoked in the ledger before a poller claimed it never reached the dashboard."""
    expired = outcome("failed")
    expired = expired.model_copy(update={"result": expired.result.model_copy(update={"expired": True})})
    out = apply_dashboard_results(SVC, [expired], {}, now=T0)
    assert out.cache == {} and out.events == [] and out.error is None


def test_target_capacity_result_updates_the_cluster_status() -> None:
    status: dict[str, Any] = {"pendingServiceStatus": {"rayClusterName": "c1", "targetCapacity": 0}}
    out = apply_dashboard_results(SVC, [outcome("ok", config={"target_capacity": 40},
                                                reason=f"{TARGET_CAPACITY_REASON} 40")], status, now=T0)
    assert status["pendingServiceStatus"]["targetCapacity"] == 40
    assert out.cache["c1"] is not None and out.cache["c1"].target_capacity == 40
    assert out.events[0].event_reason == c.UPDATED_SERVE_TARGET_CAPACITY


def test_cache_cleanup_keeps_only_active_and_pending() -> None:
    cache = {n: ServeConfigCacheEntry(config_hash="h") for n in ("a", "p", "old", "older")}
    status = {"activeServiceStatus": {"rayClusterName": "a"}, "pendingServiceStatus": {"rayClusterName": "p"}}
    assert clean_up_serve_config_cache(cache, status) == {"old": None, "older": None}


# --- reconcile_serve -----------------------------------------------------------------------------------
def cluster(ready: bool = True) -> RayCluster:
    conds = [{"type": "HeadPodReady", "status": "True" if ready else "False"}]
    return RayCluster.model_validate({"metadata": {"name": "c1", "namespace": "default"}, "status": {"conditions": conds}})


def observe(apps: dict[str, str] | None, *, reachable: bool = True, at: Any = T0) -> TimedObservation:
    serve = {k: ServeAppObservation(status=v) for k, v in apps.items()} if apps is not None else None
    return TimedObservation(observation=ClusterObservation(namespace="default", cluster="c1", reachable=reachable,
                                                           serve_apps=serve), observed_at=at)


def serve(obs: TimedObservation | None, cached: ServeConfigCacheEntry | None, *, ready: bool = True,
          skip: bool = False, now: Any = T0) -> Any:
    return reconcile_serve(SVC, cluster(ready), None, status={}, observation=obs, cached=cached, gates=FeatureGates(),
                           incremental=False, skip_config_update=skip, now=now)


def test_head_not_ready_means_no_dashboard_call() -> None:
    out = serve(observe({"a": "RUNNING"}), None, ready=False)
    assert (out.ready, out.apps, out.dashboard_commands, out.dashboard_unavailable) == (False, None, [], False)


@pytest.mark.parametrize("obs", [None, observe(None), observe({"a": "RUNNING"}, reachable=False)])
def test_no_answer_from_the_dashboard_ends_the_round(obs: TimedObservation | None) -> None:
    out = serve(obs, ServeConfigCacheEntry(config_hash=HASH))
    assert out.dashboard_unavailable and not out.dashboard_commands and out.apps is None


def test_submits_when_nothing_cached_and_not_again_once_cached() -> None:
    first = serve(observe({}), None)
    assert [cmd.cluster for cmd in first.dashboard_commands] == ["c1"]
    put = first.dashboard_commands[0]
    assert put.config_hash == HASH and put.config == parse_serve_config(SERVE_CONFIG)
    again = serve(observe({"fruit_app": "RUNNING", "math_app": "RUNNING"}), ServeConfigCacheEntry(config_hash=HASH))
    assert again.dashboard_commands == [] and again.ready


def test_blocked_for_the_active_cluster_during_incremental_upgrade() -> None:
    out = serve(observe({"a": "RUNNING"}), ServeConfigCacheEntry(config_hash="old"), skip=True)
    assert out.dashboard_commands == [] and out.ready


def test_zero_apps_right_after_our_submit_waits_instead_of_resubmitting() -> None:
    cached = ServeConfigCacheEntry(config_hash=HASH, submitted_at=T0)
    stale = serve(observe({}, at=T0 - timedelta(seconds=1)), cached, now=T0 + timedelta(seconds=0.5))
    assert stale.dashboard_commands == [] and stale.requeue_at == T0 + RESUBMIT_GRACE
    fresh = serve(observe({}, at=T0 + timedelta(seconds=1)), cached, now=T0 + timedelta(seconds=1))
    assert len(fresh.dashboard_commands) == 1  # the poller saw the cluster after our submit: apps are gone
    late = serve(observe({}, at=T0 - timedelta(seconds=1)), cached, now=T0 + RESUBMIT_GRACE)
    assert len(late.dashboard_commands) == 1  # KubeRay's 2 s cadence at most


def test_head_ready_without_status_conditions_gate_reads_the_pod() -> None:
    gates = FeatureGates(ray_cluster_status_conditions=False)
    pod = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert is_head_ready(cluster(False), pod, gates)
    assert not is_head_ready(cluster(True), {"status": {"phase": "Pending"}}, gates)
