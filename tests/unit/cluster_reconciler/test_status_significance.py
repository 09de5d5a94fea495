"""Which RayCluster status changes are written at once and which may wait runtime.status_writes.STATUS_INTERVAL_S
(cluster_reconciler.reconciler.significant): state, reason, head and conditions as KubeRay writes them
(at once); only counters, desired resources and endpoints are folded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_reconciler.reconciler import significant

BASE: dict[str, Any] = {
    "state": "",
    "observedGeneration": 1,
    "readyWorkerReplicas": 0,
    "availableWorkerReplicas": 0,
    "head": {"serviceName": "c-head-svc"},
    "conditions": [
        {"type": "HeadPodReady", "status": "False", "reason": "HeadPodNotFound", "message": ""},
        {"type": "RayClusterProvisioned", "status": "False", "reason": "RayClusterPodsProvisioning"},
    ],
}


def _with(**changes: Any) -> dict[str, Any]:
    return {**BASE, **changes}


def _condition(kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


@pytest.mark.parametrize(("new", "urgent"), [
    # At once: the state, its failure reason, a new generation, a condition's status.
    (_with(state="ready"), True),
    (_with(state="failed", reason="RayCluster has failed"), True),
    (_with(observedGeneration=2), True),
    (_with(conditions=[_condition("HeadPodReady", "True", "HeadPodRunningAndReady"),
                       BASE["conditions"][1]]), True),
    (_with(conditions=[*BASE["conditions"],
                       _condition("ReplicaFailure", "True", "FailedCreateWorkerPod")]), True),
    (_with(conditions=BASE["conditions"][:1]), True),  # a condition removed
    # At once too: a head Pod's steps while HeadPodReady stays False, its name and IPs.
    (_with(conditions=[_condition("HeadPodReady", "False", "ContainerCreating"),
                       BASE["conditions"][1]]), True),
    (_with(head={"serviceName": "c-head-svc", "podName": "c-head-x", "podIP": "10.0.0.3"}), True),
    # May wait: a condition's message alone, counters, endpoints.
    (_with(conditions=[_condition("HeadPodReady", "False", "HeadPodNotFound", "containers not ready"),
                       BASE["conditions"][1]]), False),
    (_with(readyWorkerReplicas=3, availableWorkerReplicas=3), False),
    (_with(endpoints={"dashboard": "8265"}), False),
    (dict(BASE), False),
])
def test_which_changes_are_written_at_once(new: dict[str, Any], urgent: bool) -> None:
    assert significant(BASE, new) is urgent


def test_the_first_status_is_written_at_once() -> None:
    assert significant({}, BASE) is True


_conditions = st.lists(st.tuples(st.sampled_from(["HeadPodReady", "RayClusterProvisioned", "ReplicaFailure"]),
                                 st.sampled_from(["True", "False", "Unknown"]),
                                 st.sampled_from(["A", "B", ""])), max_size=3, unique_by=lambda c: c[0])


@given(before=_conditions, after=_conditions, ready=st.integers(0, 5))
def test_urgent_exactly_when_a_condition_changes(before: list[tuple[str, str, str]],
                                                         after: list[tuple[str, str, str]],
                                                         ready: int) -> None:
    old = _with(conditions=[_condition(*c) for c in before])
    new = _with(conditions=[_condition(*c) for c in after], readyWorkerReplicas=ready,
                head={**BASE["head"]})
    assert significant(old, new) is (set(before) != set(after))
