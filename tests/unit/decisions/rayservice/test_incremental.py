"""NewClusterWithIncrementalUpgrade: Gateway/HTTPRoute, target_capacity steps, traffic steps, promotion."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from raybus.api.rayservice import RayService
from raybus.decisions.commands import CreateObject, DeleteObject
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.incremental import (
    build_gateway,
    calculate_traffic_routed_percent,
    check_if_need_target_capacity_update,
    is_gateway_ready,
    is_http_route_ready,
    reconcile_object,
    reconcile_serve_target_capacity,
    weights_from_http_route,
)
from raybus.decisions.rayservice.model import ServeConfigCacheEntry
from tests.unit.decisions.rayservice.world import T0, World, head_template, make_service, merge

OPTIONS = {"maxSurgePercent": 50, "stepSizePercent": 25, "intervalSeconds": 10, "gatewayClassName": "istio"}


def manifest(**options: Any) -> dict[str, Any]:
    raw = make_service(spec={"upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                                                 "clusterUpgradeOptions": {**OPTIONS, **options}}})
    raw["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    return raw


SVC = RayService.model_validate(manifest())


def status(active: dict[str, Any], pending: dict[str, Any], in_progress: bool = True) -> dict[str, Any]:
    return {"activeServiceStatus": {"rayClusterName": "a", **active},
            "pendingServiceStatus": {"rayClusterName": "p", **pending},
            "conditions": [{"type": c.UPGRADE_IN_PROGRESS, "status": "True" if in_progress else "False"}]}


@pytest.mark.parametrize(("pending", "ready", "now", "expected"), [
    ({"targetCapacity": 50, "trafficRoutedPercent": 0}, False, T0, (100, 0, None)),
    ({"targetCapacity": 50, "trafficRoutedPercent": 0}, True, T0, (75, 25, T0 + timedelta(seconds=10))),
    ({"targetCapacity": 50, "trafficRoutedPercent": 25, "lastTrafficMigratedTime": "2026-01-01T12:00:00Z"},
     True, T0 + timedelta(seconds=4), (100, 25, T0 + timedelta(seconds=10))),   # interval not elapsed
    ({"targetCapacity": 50, "trafficRoutedPercent": 25, "lastTrafficMigratedTime": "2026-01-01T12:00:00Z"},
     True, T0 + timedelta(seconds=10), (50, 50, None)),                          # capped by target_capacity
    ({"targetCapacity": 50, "trafficRoutedPercent": 50}, True, T0, (100, 50, None)),  # at capacity: stop
])
def test_calculate_traffic_routed_percent(pending: dict[str, Any], ready: bool, now: Any,
                                          expected: tuple[int, int, Any]) -> None:
    step = calculate_traffic_routed_percent(SVC, status({}, pending), is_pending_ready=ready, now=now)
    assert (step.active, step.pending, step.next_step_at) == expected


@pytest.mark.parametrize(("active", "pending", "cluster", "goal"), [
    ({"targetCapacity": 100}, {"targetCapacity": 0, "trafficRoutedPercent": 0}, "p", 50),     # scale pending up
    ({"targetCapacity": 100}, {"targetCapacity": 0, "trafficRoutedPercent": 0}, "a", None),
    ({"targetCapacity": 100}, {"targetCapacity": 50, "trafficRoutedPercent": 25}, "p", None),  # traffic lagging
    ({"targetCapacity": 100}, {"targetCapacity": 50, "trafficRoutedPercent": 50}, "a", 50),   # >100: scale active down
    ({"targetCapacity": 50}, {"targetCapacity": 50, "trafficRoutedPercent": 50}, "p", 100),
    ({"targetCapacity": 30}, {"targetCapacity": 100, "trafficRoutedPercent": 100}, "a", 0),
])
def test_reconcile_serve_target_capacity(active: dict[str, Any], pending: dict[str, Any], cluster: str,
                                         goal: int | None) -> None:
    put = reconcile_serve_target_capacity(SVC, cluster, status(active, pending), None)
    assert (put.config["target_capacity"] if put else None) == goal
    if put is not None:
        assert put.cluster == cluster
        already = reconcile_serve_target_capacity(SVC, cluster, status(active, pending),
                                                  ServeConfigCacheEntry(config_hash=put.config_hash, target_capacity=goal))
        assert already is None  # applyServeTargetCapacity: nothing to do when it is already there


def ready_gateway() -> tuple[dict[str, Any], dict[str, Any]]:
    gw = merge(build_gateway(SVC), {"status": {"conditions": [{"type": "Accepted", "status": "True"},
                                                             {"type": "Programmed", "status": "True"}]}})
    route = {"metadata": {"name": "rayservice-sample-httproute"}, "status": {"parents": [
        {"parentRef": {"name": "rayservice-sample-gateway", "namespace": "default"},
         "conditions": [{"type": "Accepted", "status": "True"}, {"type": "ResolvedRefs", "status": "True"}]}]}}
    return gw, route


def test_gateway_and_route_readiness() -> None:
    gw, route = ready_gateway()
    assert is_gateway_ready(gw) and is_http_route_ready(gw, route)
    assert not is_gateway_ready(build_gateway(SVC))
    assert not is_http_route_ready(gw, {"status": {"parents": []}})


@pytest.mark.parametrize(("active", "pending", "needed", "why"), [
    ({"targetCapacity": 0, "trafficRoutedPercent": 0}, {"targetCapacity": 100, "trafficRoutedPercent": 100}, False,
     "complete"),
    ({"targetCapacity": 100, "trafficRoutedPercent": 100}, {"targetCapacity": 0, "trafficRoutedPercent": 0}, True,
     "scaling up"),
    ({"targetCapacity": 50, "trafficRoutedPercent": 0}, {"targetCapacity": 100, "trafficRoutedPercent": 100}, True,
     "scaling down"),
    ({}, {"targetCapacity": 0, "trafficRoutedPercent": 0}, True, "missing"),
])
def test_check_if_need_target_capacity_update(active: dict[str, Any], pending: dict[str, Any], needed: bool,
                                              why: str) -> None:
    gw, route = ready_gateway()
    result = check_if_need_target_capacity_update(status(active, pending), gw, route)
    assert result[0] is needed and why in result[1]
    assert check_if_need_target_capacity_update(status(active, pending), None, route)[0] is False


def test_weights_from_http_route() -> None:
    route = {"spec": {"rules": [{"backendRefs": [{"name": "a-serve-svc", "weight": 70}, {"name": "p-serve-svc", "weight": 30}]}]}}
    assert weights_from_http_route(route, status({}, {})) == (70, 30)
    assert weights_from_http_route(None, status({}, {})) == (-1, -1)


def test_live_defaults_do_not_cause_endless_updates() -> None:
    desired = build_gateway(SVC)
    live = merge(desired, {"spec": {"listeners": [{**desired["spec"]["listeners"][0],
                                                   "allowedRoutes": {"namespaces": {"from": "Same"}}}]}})
    assert reconcile_object(desired, live, kind="Gateway", created="C", updated="U").command is None
    changed = merge(live, {"spec": {"gatewayClassName": "other"}})
    assert reconcile_object(desired, changed, kind="Gateway", created="C", updated="U").command is not None


def drive(w: World, rounds: int) -> None:
    for _ in range(rounds):
        d = w.step()
        w.start_heads()
        w.program_gateway()
        if d.requeue_after:
            w.advance(d.requeue_after)


def test_incremental_upgrade_end_to_end() -> None:
    w = World(manifest())
    drive(w, 8)
    first = w.name("active")
    assert first and w.status["activeServiceStatus"]["targetCapacity"] == 100
    assert set(w.gateways) == {"rayservice-sample-gateway"} and set(w.routes) == {"rayservice-sample-httproute"}
    assert f"{first}-serve-svc" in w.services
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template(env=[{"name": "A", "value": "1"}])}})
    seen_weights: list[tuple[int, int]] = []
    for _ in range(30):
        d = w.step()
        w.start_heads()
        w.program_gateway()
        a, p = w.status["activeServiceStatus"], w.status.get("pendingServiceStatus") or {}
        if p.get("rayClusterName"):
            seen_weights.append((a.get("trafficRoutedPercent", 100), p.get("trafficRoutedPercent", 0)))
            assert w.selector_cluster("rayservice-sample-serve-svc") == first  # traffic moves via the HTTPRoute
        if d.requeue_after:
            w.advance(d.requeue_after)
        if any(isinstance(x, DeleteObject) for x in d.commands):
            break
    second = w.name("active")
    assert second != first and first not in w.clusters
    assert all(x + y == 100 for x, y in seen_weights) and (0, 100) in seen_weights
    assert [y for _, y in seen_weights] == sorted(y for _, y in seen_weights)  # traffic only moves forward
    assert w.selector_cluster("rayservice-sample-serve-svc") == second
    route = w.routes["rayservice-sample-httproute"]["spec"]["rules"][0]["backendRefs"]
    assert route == [{"name": f"{second}-serve-svc", "namespace": "default", "port": 8000, "weight": 100}]
    assert any(isinstance(e, str) and e == c.CREATED_HTTP_ROUTE for e in w.events)
    assert not any(isinstance(x, CreateObject) for x in w.step().commands)
