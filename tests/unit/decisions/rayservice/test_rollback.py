"""Incremental upgrade rollback (KubeRay v1.7): TestReconcileRollbackState,
TestShouldCompleteIncrementalRollback, the rollback traffic / target_capacity steps, and an
A -> B -> A rollback on the decision world."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.decisions.commands import DeleteObject, RecordEvent
from raybus.decisions.dashboard_contract import PutServeConfig
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.clusters import spec_for_hashing, spec_hash
from raybus.decisions.rayservice.incremental import (
    calculate_traffic_routed_percent,
    check_if_need_target_capacity_update,
    reconcile_serve_target_capacity,
)
from raybus.decisions.rayservice.rollback import (
    reconcile_rollback_state,
    should_complete_incremental_rollback,
)
from tests.unit.decisions.rayservice.test_incremental import SVC, manifest
from tests.unit.decisions.rayservice.world import T0, World, head_template, merge

ROLLING = {"type": c.ROLLBACK_IN_PROGRESS, "status": "True", "reason": "DesiredClusterSpecChanged"}
UPGRADING = {"type": c.UPGRADE_IN_PROGRESS, "status": "True", "reason": "BothActivePendingClustersExist"}


def _service(version: str) -> RayService:
    raw = manifest()
    raw["spec"]["rayClusterConfig"]["rayVersion"] = version
    return RayService.model_validate(raw)


def _cluster(name: str, version: str) -> RayCluster:
    return RayCluster.model_validate({"metadata": {"name": name, "namespace": "default", "annotations": {
        c.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY: spec_hash(spec_for_hashing(_service(version)))}},
        "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head"}]}}}}})


@pytest.mark.parametrize(("name", "goal", "pending", "rolling", "expected"), [
    ("Normal RayService upgrade, goal matches pending", "2.50.0", "2.50.0", False, False),
    ("RayService Spec changed, initiate rollback", "2.54.0", "2.50.0", False, True),
    ("Rollback in progress, continues rolling back", "2.54.0", "2.50.0", True, True),
    ("Rollback canceled, user updated spec back to pending", "2.50.0", "2.50.0", True, False),
    ("Third-spec scenario: Goal updated to third spec mid-upgrade", "2.56.0", "2.50.0", False, True),
    ("Fast rollback: Goal matches active, but pending already updated to match active", "2.54.0", "2.54.0",
     False, True),
])
def test_reconcile_rollback_state(name: str, goal: str, pending: str, rolling: bool, expected: bool) -> None:
    status: dict[str, Any] = {"conditions": [UPGRADING, *([ROLLING] if rolling else [])]}
    assert reconcile_rollback_state(_service(goal), status, _cluster("active", "2.54.0"), _cluster("pending", pending),
                                    now=T0) is None
    cond = next((x for x in status["conditions"] if x["type"] == c.ROLLBACK_IN_PROGRESS), None)
    assert (cond is not None and cond["status"] == "True") is expected, name
    if expected and not rolling:
        assert cond is not None and cond["reason"] == "DesiredClusterSpecChanged"


def test_rollback_impossible_without_an_active_cluster() -> None:
    status: dict[str, Any] = {"conditions": [UPGRADING]}
    msg = reconcile_rollback_state(_service("2.54.0"), status, None, _cluster("pending", "2.50.0"), now=T0)
    assert msg == "Active cluster not found, rollback cannot be initiated"
    assert reconcile_rollback_state(_service("2.54.0"), {"conditions": []}, None, None, now=T0) is None


def _head_ready(ready: bool) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "HeadPodReady", "status": "True" if ready else "False"}]}}


@pytest.mark.parametrize(("name", "active", "pending", "cluster", "want"), [
    ("healthy pending at zero capacity and traffic — complete", (100, 100), (0, 0), _head_ready(True), True),
    ("unhealthy pending with leftover capacity — bypass complete", (100, 100), (30, 0), _head_ready(False), True),
    ("no pending RayCluster — complete when active is full", (100, 100), (0, 0), None, True),
    ("healthy pending still holding target capacity — not complete", (100, 100), (50, 0), _head_ready(True), False),
    ("active not back at full traffic", (100, 75), (0, 25), _head_ready(False), False),
])
def test_should_complete_incremental_rollback(name: str, active: tuple[int, int], pending: tuple[int, int],
                                              cluster: dict[str, Any] | None, want: bool) -> None:
    status = {"activeServiceStatus": {"targetCapacity": active[0], "trafficRoutedPercent": active[1]},
              "pendingServiceStatus": {"targetCapacity": pending[0], "trafficRoutedPercent": pending[1]}}
    pend = _cluster("pending", "2.50.0") if cluster is not None else None
    assert should_complete_incremental_rollback(status, pend, cluster) is want, name


def _rolling(active: dict[str, Any], pending: dict[str, Any]) -> dict[str, Any]:
    return {"activeServiceStatus": {"rayClusterName": "a", **active},
            "pendingServiceStatus": {"rayClusterName": "p", **pending}, "conditions": [UPGRADING, ROLLING]}


@pytest.mark.parametrize(("active", "pending", "pending_ready", "now", "expected"), [
    # traffic goes back by stepSizePercent (25) whether or not the pending cluster is ready
    ({"targetCapacity": 100, "trafficRoutedPercent": 50}, {"trafficRoutedPercent": 50}, False, T0,
     (75, 25, T0 + timedelta(seconds=10))),
    # timed from the ACTIVE cluster's lastTrafficMigratedTime
    ({"targetCapacity": 100, "trafficRoutedPercent": 75, "lastTrafficMigratedTime": "2026-01-01T12:00:00Z"},
     {"trafficRoutedPercent": 25}, True, T0 + timedelta(seconds=4), (75, 25, T0 + timedelta(seconds=10))),
    # capped by the active cluster's target_capacity, then stops
    ({"targetCapacity": 60, "trafficRoutedPercent": 50}, {"trafficRoutedPercent": 50}, True, T0, (60, 40, None)),
    ({"targetCapacity": 100, "trafficRoutedPercent": 100}, {"trafficRoutedPercent": 0}, True, T0, (100, 0, None)),
])
def test_rollback_traffic_moves_back_to_the_active_cluster(active: dict[str, Any], pending: dict[str, Any],
                                                           pending_ready: bool, now: Any,
                                                           expected: tuple[int, int, Any]) -> None:
    step = calculate_traffic_routed_percent(SVC, _rolling(active, pending), is_pending_ready=pending_ready, now=now)
    assert (step.active, step.pending, step.next_step_at) == expected


@pytest.mark.parametrize(("active", "pending", "cluster", "goal"), [
    # maxSurgePercent 50: traffic back first, then the pending cluster down, then the active one up
    ({"targetCapacity": 50, "trafficRoutedPercent": 25}, {"targetCapacity": 100}, "a", None),
    ({"targetCapacity": 50, "trafficRoutedPercent": 50}, {"targetCapacity": 100}, "p", 50),
    ({"targetCapacity": 50, "trafficRoutedPercent": 50}, {"targetCapacity": 100}, "a", None),
    ({"targetCapacity": 50, "trafficRoutedPercent": 50}, {"targetCapacity": 50}, "a", 100),
    ({"targetCapacity": 100, "trafficRoutedPercent": 100}, {"targetCapacity": 50}, "p", 0),
])
def test_rollback_target_capacity(active: dict[str, Any], pending: dict[str, Any], cluster: str,
                                  goal: int | None) -> None:
    put = reconcile_serve_target_capacity(SVC, cluster, _rolling(active, pending), None)
    assert (put.config["target_capacity"] if put else None) == goal


def test_rollback_target_capacity_check_messages() -> None:
    from tests.unit.decisions.rayservice.test_incremental import ready_gateway

    gw, route = ready_gateway()
    done = _rolling({"targetCapacity": 100, "trafficRoutedPercent": 100}, {"targetCapacity": 0,
                                                                           "trafficRoutedPercent": 0})
    assert check_if_need_target_capacity_update(done, gw, route) == (
        False, "Rollback complete: all traffic has been restored to the active cluster.")
    going = _rolling({"targetCapacity": 50, "trafficRoutedPercent": 50}, {"targetCapacity": 50,
                                                                          "trafficRoutedPercent": 50})
    assert check_if_need_target_capacity_update(going, gw, route) == (
        True, "Rollback in progress: traffic is being restored to the active cluster.")


# --- A -> B -> A on the decision world ----------------------------------------------------------------------
def _round(w: World) -> Any:
    d = w.step()
    w.start_heads()
    w.program_gateway()
    for put in d.dashboard_commands:
        if isinstance(put, PutServeConfig):
            w.deploy(put.cluster, put.config)
    if d.requeue_after:
        w.advance(d.requeue_after)
    return d


def _upgrade_to_b(w: World, *, pending_traffic: int) -> tuple[str, str]:
    for _ in range(8):
        _round(w)
    a = w.name("active")
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template(env=[{"name": "B", "value": "1"}])}})
    for _ in range(40):
        _round(w)
        if (w.status.get("pendingServiceStatus") or {}).get("trafficRoutedPercent", 0) >= pending_traffic:
            break
    b = w.name("pending")
    assert a and b and b != a
    assert w.status["pendingServiceStatus"]["trafficRoutedPercent"] >= pending_traffic
    return a, b


def test_a_b_a_rollback_brings_traffic_back_to_a_and_drops_b() -> None:
    w = World(manifest())
    a, b = _upgrade_to_b(w, pending_traffic=50)
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template()}})  # back to A
    puts_before = len(w.puts)
    weights: list[tuple[int, int]] = []
    for _ in range(60):
        d = _round(w)
        assert w.name("active") == a  # never promoted during the rollback
        assert not any(isinstance(x, RecordEvent) and x.event_reason == "RollbackImpossible" for x in d.commands)
        st = w.status
        if w.condition(c.ROLLBACK_IN_PROGRESS):
            weights.append((st["activeServiceStatus"].get("trafficRoutedPercent", 100),
                            (st.get("pendingServiceStatus") or {}).get("trafficRoutedPercent", 0)))
        if b not in w.clusters:
            break
    # stepSizePercent 25 every intervalSeconds, from 50/50 back to A
    assert weights[:3] == [(50, 50), (75, 25), (100, 0)], weights
    assert [x for x, _ in weights] == sorted(x for x, _ in weights)  # traffic only moves back to A
    assert all(x + y == 100 for x, y in weights)
    assert b not in w.clusters and w.name("pending") == "" and w.name("active") == a
    assert not w.condition(c.ROLLBACK_IN_PROGRESS)
    assert w.condition(c.UPGRADE_IN_PROGRESS)["status"] == "False"
    assert w.status["activeServiceStatus"]["targetCapacity"] == 100
    # The pending cluster never got a Serve config during the rollback, only target_capacity steps.
    assert all(p.cluster == a or "target_capacity" in p.config for p in w.puts[puts_before:])
    route = w.routes["rayservice-sample-httproute"]["spec"]["rules"][0]["backendRefs"]
    assert route == [{"name": f"{a}-serve-svc", "namespace": "default", "port": 8000, "weight": 100}]
    assert not any(isinstance(x, DeleteObject) and x.target.name == a for d in w.history for x in d.commands)


def test_rollback_completes_with_a_crashed_pending_head() -> None:
    w = World(manifest())
    a, b = _upgrade_to_b(w, pending_traffic=25)
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template()}})
    for _ in range(40):
        _round(w)
        # The pending head keeps crashing: HeadPodReady=False, its dashboard unreachable.
        if b in w.clusters:
            w.clusters[b]["status"] = {"conditions": [{"type": "HeadPodReady", "status": "False"}]}
            w.reachable[b] = False
        if b not in w.clusters or not w.name("pending"):
            break
    assert w.name("pending") == "" and w.name("active") == a
    assert not w.condition(c.ROLLBACK_IN_PROGRESS)


def test_rollback_cancelled_when_the_spec_returns_to_b() -> None:
    w = World(manifest())
    _a, b = _upgrade_to_b(w, pending_traffic=25)
    spec_b = w.service["spec"]["rayClusterConfig"]
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template()}})
    _round(w)
    assert w.condition(c.ROLLBACK_IN_PROGRESS)["status"] == "True"
    w.update_spec(rayClusterConfig=merge(spec_b, {}))
    _round(w)
    assert not w.condition(c.ROLLBACK_IN_PROGRESS) and w.name("pending") == b
