"""Scale expectations: mirrors expectations/scale_expectations_test.go semantics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.decisions.cluster.expectations import (
    HEAD_GROUP,
    ScaleAction,
    ScaleExpectations,
    check_satisfied,
    clear_expectations,
    expect_scale_pod,
    forget_pods,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _expect(
    exp: ScaleExpectations, group: str, name: str, action: ScaleAction, at: datetime = T0
) -> ScaleExpectations:
    return expect_scale_pod(exp, group=group, pod_name=name, action=action, now=at)


@pytest.mark.parametrize(
    ("action", "pod_exists", "elapsed", "satisfied"),
    [
        (ScaleAction.CREATE, True, 0, True),  # created Pod visible
        (ScaleAction.CREATE, False, 0, False),  # not yet visible
        (ScaleAction.CREATE, False, 29, False),  # still inside the 30 s timeout
        (ScaleAction.CREATE, False, 31, True),  # ExpectationsTimeout elapsed
        (ScaleAction.DELETE, False, 0, True),  # Pod gone
        (ScaleAction.DELETE, True, 0, False),  # Pod still there
        (ScaleAction.DELETE, True, 3600, False),  # deletes never time out
    ],
)
def test_is_pod_scaled_table(action: ScaleAction, pod_exists: bool, elapsed: int, satisfied: bool) -> None:
    exp = _expect(ScaleExpectations(), "g", "pod-a", action)
    ok, remaining = check_satisfied(
        exp,
        group="g",
        existing_pod_names=["pod-a"] if pod_exists else [],
        now=T0 + timedelta(seconds=elapsed),
    )
    assert ok is satisfied
    assert remaining.is_empty() is satisfied  # met expectations are dropped


def test_groups_are_independent_and_head_group_is_empty_string() -> None:
    exp = _expect(ScaleExpectations(), HEAD_GROUP, "head-x", ScaleAction.CREATE)
    exp = _expect(exp, "small", "w-1", ScaleAction.CREATE)
    ok_head, exp = check_satisfied(exp, group=HEAD_GROUP, existing_pod_names=["head-x"], now=T0)
    ok_small, exp = check_satisfied(exp, group="small", existing_pod_names=["head-x"], now=T0)
    ok_other, exp = check_satisfied(exp, group="other", existing_pod_names=[], now=T0)
    assert (ok_head, ok_small, ok_other) == (True, False, True)
    assert [p.name for p in exp.for_group("small")] == ["w-1"]
    assert exp.for_group(HEAD_GROUP) == ()


def test_partial_satisfaction_keeps_only_pending() -> None:
    exp = _expect(ScaleExpectations(), "g", "a", ScaleAction.CREATE)
    exp = _expect(exp, "g", "b", ScaleAction.CREATE)
    ok, exp = check_satisfied(exp, group="g", existing_pod_names=["a"], now=T0)
    assert not ok
    assert [p.name for p in exp.for_group("g")] == ["b"]


def test_same_pod_name_overwrites_across_groups() -> None:
    exp = _expect(ScaleExpectations(), "g1", "p", ScaleAction.CREATE)
    exp = _expect(exp, "g2", "p", ScaleAction.DELETE)
    assert exp.for_group("g1") == ()
    assert [(p.name, p.action) for p in exp.for_group("g2")] == [("p", ScaleAction.DELETE)]


def test_clear_and_json_round_trip() -> None:
    exp = _expect(ScaleExpectations(), "g", "p", ScaleAction.CREATE)
    again = ScaleExpectations.model_validate(exp.model_dump(mode="json"))
    assert again == exp
    assert clear_expectations().is_empty()


@given(
    names=st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=6),
    existing=st.sets(st.sampled_from(["a", "b", "c", "d"])),
    elapsed=st.integers(min_value=0, max_value=120),
    deletes=st.booleans(),
)
def test_satisfied_iff_nothing_pending(
    names: list[str], existing: set[str], elapsed: int, deletes: bool
) -> None:
    exp = ScaleExpectations()
    action = ScaleAction.DELETE if deletes else ScaleAction.CREATE
    for name in names:
        exp = _expect(exp, "g", name, action)
    ok, remaining = check_satisfied(
        exp, group="g", existing_pod_names=existing, now=T0 + timedelta(seconds=elapsed)
    )
    assert ok == remaining.is_empty()
    # Checking again without changes is a fixed point.
    ok2, remaining2 = check_satisfied(
        remaining, group="g", existing_pod_names=existing, now=T0 + timedelta(seconds=elapsed)
    )
    assert (ok2, remaining2) == (ok, remaining)


def test_forget_pods_drops_failed_ones_everywhere() -> None:
    exp = _expect(ScaleExpectations(), "g", "a", ScaleAction.CREATE)
    exp = _expect(exp, "g", "b", ScaleAction.CREATE)
    exp = _expect(exp, HEAD_GROUP, "h", ScaleAction.DELETE)
    out = forget_pods(exp, ["a", "h"])
    assert [p.name for p in out.for_group("g")] == ["b"] and out.for_group(HEAD_GROUP) == ()
    assert forget_pods(exp, []) == exp


# --- batch-aware expectations: late commands and lagging caches -------------------------------------
from raybus.decisions.batches import IN_FLIGHT, BatchState
from raybus.decisions.cluster.expectations import pod_target, take_retry_name

DONE = BatchState(settled=True, finished_at=T0, created_rv={pod_target("ns", "pod-a"): 50})
FAILED = BatchState(settled=True, finished_at=T0, not_applied=frozenset({pod_target("ns", "pod-a")}))
REVOKED = BatchState(settled=True, finished_at=T0, revoked=True)
DONE_NO_RV = BatchState(settled=True, finished_at=T0)


@pytest.mark.parametrize(("state", "exists", "watermark", "elapsed", "satisfied", "retry"), [
    (IN_FLIGHT, False, 100, 3600, False, ()),  # queued for an hour: still expected, never replaced
    (DONE, True, 10, 0, True, ()),  # seen
    (DONE, False, 49, 3600, False, ()),  # created at 50, cache only at 49: not seen yet
    # Cache past its creation and it is not there: created and gone already (the GC removed the
    # head of a RayCluster deleted meanwhile). KubeRay's Get finds nothing either: met only after
    # ExpectationsTimeout, so no second head within those 30 s (the chaos soak made 2-7).
    (DONE, False, 50, 0, False, ()),
    (DONE, False, 50, 29, False, ()),
    (DONE, False, 50, 31, True, ()),
    (DONE, False, None, 3600, False, ()),  # the cache has seen no Pod event at all yet
    (DONE_NO_RV, False, 100, 29, False, ()),  # unknown version: KubeRay's 30 s from completion
    (DONE_NO_RV, False, 100, 31, True, ()),
    (FAILED, False, 100, 0, True, ("pod-a",)),  # rejected: dropped, its name reused
    (REVOKED, False, 100, 0, True, ("pod-a",)),  # never applied: dropped, its name reused
])
def test_create_expectation_with_batch_states(state: BatchState, exists: bool, watermark: int | None,
                                              elapsed: int, satisfied: bool, retry: tuple[str, ...]) -> None:
    exp = expect_scale_pod(ScaleExpectations(), group="g", pod_name="pod-a", action=ScaleAction.CREATE,
                           now=T0 - timedelta(hours=2), batch="b1")
    ok, remaining = check_satisfied(exp, group="g", existing_pod_names=["pod-a"] if exists else [],
                                    now=T0 + timedelta(seconds=elapsed), batches={"b1": state},
                                    namespace="ns", watermark=watermark)
    assert ok is satisfied
    assert remaining.retry.get("g", ()) == retry


def test_retry_names_are_reused_once_and_skip_existing_pods() -> None:
    exp = ScaleExpectations(retry={"g": ("a", "b")})
    name, exp = take_retry_name(exp, group="g", taken=["a"])
    assert name == "b" and exp.retry == {}
    name, exp = take_retry_name(exp, group="g", taken=[])
    assert name is None
    exp = expect_scale_pod(ScaleExpectations(retry={"g": ("c",)}), group="g", pod_name="c",
                           action=ScaleAction.CREATE, now=T0, batch="b2")
    assert exp.retry == {} and exp.for_group("g")[0].batch == "b2"
