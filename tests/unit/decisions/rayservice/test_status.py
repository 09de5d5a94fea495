"""calculateConditions, the initializing timeout, InconsistentRayServiceStatuses, Go durations."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.status import (
    calculate_conditions,
    find_condition,
    go_duration,
    inconsistent_statuses,
    initializing_deadline,
    initializing_timeout_seconds,
    is_initializing_timeout,
    rfc3339,
    set_condition,
)
from tests.unit.decisions.rayservice.world import T0

ANN = {c.INITIALIZING_TIMEOUT_ANNOTATION: "5m"}


def status_with(cond_type: str, cond_status: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"conditions": [{"type": cond_type, "status": cond_status, "reason": reason,
                            "lastTransitionTime": rfc3339(T0)}], **extra}


# --- TestCalculateConditions ---------------------------------------------------------------------------
@pytest.mark.parametrize(("status", "cond_type", "expected_status", "expected_reason"), [
    ({}, c.READY, "False", c.INITIALIZING),
    ({}, c.UPGRADE_IN_PROGRESS, "False", c.INITIALIZING),
    (status_with(c.READY, "False", "WhateverReason"), c.READY, "False", "WhateverReason"),
    (status_with(c.READY, "True", "WhateverReason", numServeEndpoints=1), c.READY, "True", c.NON_ZERO_SERVE_ENDPOINTS),
    (status_with(c.READY, "False", "WhateverReason", numServeEndpoints=1), c.READY, "True", c.NON_ZERO_SERVE_ENDPOINTS),
    (status_with(c.READY, "True", c.NON_ZERO_SERVE_ENDPOINTS), c.READY, "False", c.ZERO_SERVE_ENDPOINTS),
    (status_with(c.UPGRADE_IN_PROGRESS, "False", "WhateverReason",
                 activeServiceStatus={"rayClusterName": "a"}, pendingServiceStatus={"rayClusterName": "p"}),
     c.UPGRADE_IN_PROGRESS, "True", c.BOTH_ACTIVE_PENDING_CLUSTERS_EXIST),
    (status_with(c.UPGRADE_IN_PROGRESS, "True", c.BOTH_ACTIVE_PENDING_CLUSTERS_EXIST,
                 activeServiceStatus={"rayClusterName": "a"}),
     c.UPGRADE_IN_PROGRESS, "False", c.NO_PENDING_CLUSTER),
    (status_with(c.UPGRADE_IN_PROGRESS, "True", c.BOTH_ACTIVE_PENDING_CLUSTERS_EXIST),
     c.UPGRADE_IN_PROGRESS, "Unknown", c.NO_ACTIVE_CLUSTER),
    (status_with(c.UPGRADE_IN_PROGRESS, "False", c.INITIALIZING, pendingServiceStatus={"rayClusterName": "p"}),
     c.UPGRADE_IN_PROGRESS, "False", c.INITIALIZING),
    (status_with(c.UPGRADE_IN_PROGRESS, "False", c.INITIALIZING_TIMEOUT), c.UPGRADE_IN_PROGRESS, "False",
     c.INITIALIZING_TIMEOUT),
])
def test_calculate_conditions(status: dict[str, Any], cond_type: str, expected_status: str, expected_reason: str) -> None:
    work = copy.deepcopy(status)
    calculate_conditions(work, None, now=T0)
    cond = find_condition(work, cond_type)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == (expected_status, expected_reason)


def test_set_condition_moves_transition_time_only_on_flip() -> None:
    st: dict[str, Any] = {"observedGeneration": 3}
    set_condition(st, c.READY, "False", c.INITIALIZING, "m", now=T0)
    later = T0 + timedelta(seconds=30)
    set_condition(st, c.READY, "False", c.ZERO_SERVE_ENDPOINTS, "m2", now=later)
    cond = find_condition(st, c.READY)
    assert cond is not None and cond["lastTransitionTime"] == rfc3339(T0) and cond["reason"] == c.ZERO_SERVE_ENDPOINTS
    assert cond["observedGeneration"] == 3
    set_condition(st, c.READY, "True", c.NON_ZERO_SERVE_ENDPOINTS, "m3", now=later)
    cond = find_condition(st, c.READY)
    assert cond is not None and cond["lastTransitionTime"] == rfc3339(later)


# --- initializing timeout --------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "seconds"), [("5m", 300.0), ("1h30m", 5400.0), ("90", 90.0), ("", None),
                                                ("1.5s", 1.5)])
def test_initializing_timeout_parsing(value: str, seconds: float | None) -> None:
    assert initializing_timeout_seconds({c.INITIALIZING_TIMEOUT_ANNOTATION: value} if value else None) == seconds


def test_timeout_fires_after_the_configured_time_and_is_terminal() -> None:
    st = status_with(c.READY, "False", c.INITIALIZING, activeServiceStatus={"rayClusterName": "a"},
                     pendingServiceStatus={"rayClusterName": "p"})
    assert initializing_deadline(st, ANN) == T0 + timedelta(minutes=5)
    early = copy.deepcopy(st)
    assert calculate_conditions(early, ANN, now=T0 + timedelta(seconds=299)) is None
    assert not is_initializing_timeout(early)
    late = copy.deepcopy(st)
    event = calculate_conditions(late, ANN, now=T0 + timedelta(minutes=5, seconds=0.5))
    assert event == "RayService initializing timeout exceeded after 5m0.5s (configured timeout: 5m0s)"
    assert is_initializing_timeout(late)
    ready = find_condition(late, c.READY)
    assert ready is not None and ready["message"] == (
        "RayService failed to become ready within the configured timeout of 5m0s. Time spent initializing: 5m0.5s")
    assert "rayClusterName" not in late["activeServiceStatus"] and "rayClusterName" not in late["pendingServiceStatus"]


def test_endpoints_win_over_the_timeout() -> None:
    st = status_with(c.READY, "False", c.INITIALIZING, numServeEndpoints=2)
    assert calculate_conditions(st, ANN, now=T0 + timedelta(hours=1)) is None
    assert find_condition(st, c.READY)["status"] == "True"


@pytest.mark.parametrize("reason", [c.ZERO_SERVE_ENDPOINTS, c.VALIDATION_FAILED])
def test_timeout_only_applies_while_initializing(reason: str) -> None:
    st = status_with(c.READY, "False", reason)
    assert initializing_deadline(st, ANN) is None
    assert calculate_conditions(st, ANN, now=T0 + timedelta(hours=1)) is None


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (1, "1s"), (90, "1m30s"), (3600, "1h0m0s"), (300.5, "5m0.5s"), (0.0015, "1.5ms"),
    (2e-6, "2µs"), (5e-9, "5ns"), (86400 + 61, "24h1m1s"), (-2.5, "-2.5s"),
])
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


# --- TestInconsistentRayServiceStatuses ---------------------------------------------------------------------
OLD: dict[str, Any] = {
    "activeServiceStatus": {"rayClusterName": "new-cluster", "applicationStatuses": {"default": {
        "status": "RUNNING", "message": "OK",
        "serveDeploymentStatuses": {"serve-1": {"status": "UNHEALTHY", "message": "error"}}}}},
    "pendingServiceStatus": {"rayClusterName": "old-cluster", "applicationStatuses": {"default": {
        "status": "NOT_STARTED", "message": "application not started yet",
        "serveDeploymentStatuses": {"serve-1": {"status": "HEALTHY", "message": "Serve is healthy"}}}}},
    "conditions": [{"type": "Ready", "status": "False", "reason": "Initializing", "lastTransitionTime": "t"}],
}


def _edit(path: list[str], value: Any) -> dict[str, Any]:
    new = copy.deepcopy(OLD)
    node = new
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return new


@pytest.mark.parametrize(("new", "expected"), [
    (copy.deepcopy(OLD), False),
    (_edit(["serviceStatus"], "Running"), True),
    (_edit(["numServeEndpoints"], 2), True),
    (_edit(["lastUpdateTime"], "2026-01-01T00:00:00Z"), False),
    (_edit(["observedGeneration"], 9), False),
    (_edit(["activeServiceStatus", "rayClusterStatus"], {"state": "ready"}), False),
    (_edit(["activeServiceStatus", "rayClusterName"], "x"), True),
    (_edit(["pendingServiceStatus", "applicationStatuses", "default", "status"], "RUNNING"), True),
    (_edit(["activeServiceStatus", "applicationStatuses", "default", "message"], "changed"), True),
    (_edit(["activeServiceStatus", "applicationStatuses", "default", "serveDeploymentStatuses", "serve-1", "status"],
           "HEALTHY"), True),
    (_edit(["activeServiceStatus", "applicationStatuses", "other"], {"status": "RUNNING"}), True),
    (_edit(["pendingServiceStatus", "applicationStatuses"], None), True),
    (_edit(["conditions"], [{"type": "Ready", "status": "True", "reason": "X", "lastTransitionTime": "t"}]), True),
    (_edit(["pendingServiceStatus", "targetCapacity"], 50), True),  # raybus addition
    (_edit(["activeServiceStatus", "trafficRoutedPercent"], 20), True),  # raybus addition
])
def test_inconsistent_statuses(new: dict[str, Any], expected: bool) -> None:
    assert inconsistent_statuses(OLD, new) is expected
