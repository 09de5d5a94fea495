"""Log tail streams of followed jobs (decisions/dashboard_follow.py): which to hold,
the backoff between streams of one job, and a stream's end as a read at once. Table-driven +
properties."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.decisions.dashboard_contract import ClusterObservation, DashboardInterest, JobObservation
from raybus.decisions.dashboard_follow import FollowState, after_follow_end, decide_follows, with_follow_ends
from raybus.decisions.dashboard_poll import (
    ClusterWant,
    OwnedInterest,
    Owner,
    PollSettings,
    PollState,
    after_round,
    decide_poll,
    merge_interests,
)

S = PollSettings(fast_interval_s=1.0, slow_interval_s=30.0, fresh_window_s=15.0, backoff_cap_s=30.0)
NOW = 1000.0
WALL_MS = 1_800_000_000_000
OWNER = Owner(controller="job", namespace="ns", name="o", kind="rayjob")


def want(**kw: Any) -> ClusterWant:
    follow = kw.setdefault("follow", ("j",))
    kw.setdefault("jobs", tuple(sorted(set(follow))))
    return ClusterWant(namespace="ns", cluster="rc", owners=(OWNER,), **kw)


def job(status: str, *, ghost: bool = False, start_ago_s: float = 600.0, job_id: str = "j") -> JobObservation:
    return JobObservation(job_id=job_id, status=status, ghost=ghost,
                          start_time_ms=int(WALL_MS - start_ago_s * 1000))


def obs(**jobs: JobObservation) -> ClusterObservation:
    return ClusterObservation(namespace="ns", cluster="rc", reachable=True, jobs=jobs)


NONE: frozenset[str] = frozenset()
BACKING_OFF = {"j": FollowState(ends=2, retry_at=NOW + 3)}
BACKED_OFF = {"j": FollowState(ends=2, retry_at=NOW - 0.1)}

# (case, want, observation, streaming, follows, head_ready, open, close, at)
CASES: list[tuple[str, ClusterWant | None, ClusterObservation | None, frozenset[str],
                  dict[str, FollowState], bool | None, tuple[str, ...], tuple[str, ...], float]] = [
    ("RUNNING: open", want(), obs(j=job("RUNNING")), NONE, {}, None, ("j",), (), math.inf),
    ("PENDING: open (the head holds it until the job ends)", want(), obs(j=job("PENDING")), NONE, {}, True,
     ("j",), (), math.inf),
    ("not observed yet: wait for the first read (a 404 otherwise)", want(), obs(), NONE, {}, None, (), (),
     math.inf),
    ("never read: wait", want(), None, NONE, {}, None, (), (), math.inf),
    ("terminal: never a stream", want(), obs(j=job("SUCCEEDED")), NONE, {}, None, (), (), math.inf),
    ("a ghost: never a stream", want(), obs(j=job("FAILED", ghost=True)), NONE, {}, None, (), (), math.inf),
    ("already streaming: nothing to do", want(), obs(j=job("RUNNING")), frozenset({"j"}), {}, None, (), (),
     math.inf),
    ("seen terminal by a poll: close ours", want(), obs(j=job("STOPPED")), frozenset({"j"}), {}, None, (),
     ("j",), math.inf),
    ("no longer followed: close", want(follow=(), jobs=("j",)), obs(j=job("RUNNING")), frozenset({"j"}), {},
     None, (), ("j",), math.inf),
    ("cluster withdrawn: close everything", None, obs(j=job("RUNNING")), frozenset({"j", "k"}), {}, None, (),
     ("j", "k"), math.inf),
    ("head pod not Ready: no new stream", want(), obs(j=job("RUNNING")), NONE, {}, False, (), (), math.inf),
    ("head pod not Ready: an open stream is kept", want(), obs(j=job("RUNNING")), frozenset({"j"}), {}, False,
     (), (), math.inf),
    ("backing off after ends: wait", want(), obs(j=job("RUNNING")), NONE, BACKING_OFF, None, (), (), NOW + 3),
    ("backoff over: open", want(), obs(j=job("RUNNING")), NONE, BACKED_OFF, None, ("j",), (), math.inf),
    ("only the followed jobs of a cluster", want(follow=("a",), jobs=("a", "b")),
     obs(a=job("RUNNING", job_id="a"), b=job("RUNNING", job_id="b")), NONE, {}, None, ("a",), (), math.inf),
]


@pytest.mark.parametrize(("case", "w", "o", "streaming", "follows", "ready", "opening", "closing", "at"),
                         CASES, ids=[c[0] for c in CASES])
def test_decide_follows(case: str, w: ClusterWant | None, o: ClusterObservation | None,
                        streaming: frozenset[str], follows: dict[str, FollowState], ready: bool | None,
                        opening: tuple[str, ...], closing: tuple[str, ...], at: float) -> None:
    plan = decide_follows(w, o, streaming=streaming, follows=follows, now=NOW, head_ready=ready)
    assert (plan.open, plan.close, plan.at) == (opening, closing, at)


@pytest.mark.parametrize(("state", "lived_s", "ends", "delay"), [
    (FollowState(), 0.5, 1, 2.0),  # the first quick end: a short pause (the job most likely ended)
    (FollowState(ends=1, retry_at=NOW), 0.5, 2, 4.0),
    (FollowState(ends=3, retry_at=NOW), 0.0, 4, 16.0),
    (FollowState(ends=9, retry_at=NOW), 0.0, 10, 30.0),  # capped at backoff_cap_s
    (FollowState(ends=9, retry_at=NOW), 30.0, 1, 2.0),  # a stream that lived long resets the count
])
def test_after_follow_end_backs_off_while_streams_end_quickly(state: FollowState, lived_s: float, ends: int,
                                                               delay: float) -> None:
    after = after_follow_end(state, opened_at=NOW - lived_s, now=NOW, settings=S)
    assert after.ends == ends and after.retry_at == pytest.approx(NOW + delay)


def test_a_stream_end_is_a_read_at_once_like_poll_now() -> None:
    w = want()
    o = obs(j=job("RUNNING"))
    polled = after_round(PollState(), w, now=NOW - 1, failed=False)
    steady = decide_poll(w, polled, o, now=NOW, wall_ms=WALL_MS, settings=S, streaming=frozenset({"j"}))
    assert not steady.due and steady.reason == "steady state"
    ended = with_follow_ends(w, {"j": 1})
    d = decide_poll(ended, polled, o, now=NOW, wall_ms=WALL_MS, settings=S)
    assert d.due and "follow/j=1" in d.reason and d.plan is not None and d.plan.jobs is not None
    # even with the head Pod not Ready (the head going away is one reason a stream ends)
    assert decide_poll(ended, polled, o, now=NOW, wall_ms=WALL_MS, settings=S, head_ready=False).due
    served = after_round(polled, ended, now=NOW, failed=False)
    assert not decide_poll(ended, served, o, now=NOW + 1, wall_ms=WALL_MS, settings=S).due
    again = with_follow_ends(w, {"j": 2})  # the next stream's end is news again
    assert decide_poll(again, served, o, now=NOW + 1, wall_ms=WALL_MS, settings=S).due


def test_ends_of_unfollowed_jobs_ask_nothing() -> None:
    w = want(follow=("a",), jobs=("a", "b"))
    assert with_follow_ends(w, {"b": 3}) is w and with_follow_ends(w, {"a": 0}) is w
    assert with_follow_ends(w, {"a": 1, "b": 1}).poll_now == frozenset({"follow/a=1"})


def test_a_streamed_job_needs_no_just_started_fast_cadence() -> None:
    w = want()
    o = obs(j=job("RUNNING", start_ago_s=3))
    polled = after_round(PollState(), w, now=NOW - 1.5, failed=False)
    unstreamed = decide_poll(w, polled, o, now=NOW, wall_ms=WALL_MS, settings=S)
    assert unstreamed.due and "just started" in unstreamed.reason
    streamed = decide_poll(w, polled, o, now=NOW, wall_ms=WALL_MS, settings=S, streaming=frozenset({"j"}))
    assert not streamed.due and streamed.at == pytest.approx(NOW - 1.5 + S.slow_interval_s)
    pending = obs(j=job("PENDING", start_ago_s=3))  # PENDING -> RUNNING is not signalled: still fast
    assert decide_poll(w, polled, pending, now=NOW, wall_ms=WALL_MS, settings=S, streaming=frozenset({"j"})).due


def test_merge_follow_jobs_are_declared_jobs() -> None:
    owner_b = Owner(controller="job", namespace="ns", name="b", kind="rayjob")
    merged = merge_interests([
        OwnedInterest(owner=OWNER, interest=DashboardInterest(cluster="rc", jobs=["x"], follow_jobs=["x"])),
        OwnedInterest(owner=owner_b, interest=DashboardInterest(cluster="rc", follow_jobs=["y"])),
    ])[("ns", "rc")]
    assert merged.follow == ("x", "y") and merged.jobs == ("x", "y")
    assert merged.targets == (("x", "y"), False, ())


statuses = st.sampled_from(["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"])
job_ids = st.sampled_from(["a", "b", "c", "d"])


@given(followed=st.sets(job_ids), observed=st.dictionaries(job_ids, st.tuples(statuses, st.booleans())),
       streaming=st.frozensets(job_ids), retry=st.dictionaries(job_ids, st.floats(NOW - 50, NOW + 50)),
       ready=st.sampled_from([None, True, False]))
def test_follow_plan_properties(followed: set[str], observed: dict[str, tuple[str, bool]],
                                streaming: frozenset[str], retry: dict[str, float], ready: bool | None) -> None:
    w = want(follow=tuple(sorted(followed)), jobs=tuple(sorted(followed)))
    o = obs(**{j: job(status, ghost=ghost, job_id=j) for j, (status, ghost) in observed.items()})
    follows = {j: FollowState(ends=1, retry_at=at) for j, at in retry.items()}
    plan = decide_follows(w, o, streaming=streaming, follows=follows, now=NOW, head_ready=ready)
    for j in plan.open:  # only followed, observed, non-terminal, non-ghost jobs; one stream each
        status, ghost = observed[j]
        assert j in followed and not ghost and status in ("PENDING", "RUNNING") and j not in streaming
        assert ready is not False and (j not in retry or retry[j] <= NOW)
    assert set(plan.close) <= streaming and not set(plan.close) & set(plan.open)
    for j in streaming - set(plan.close):  # what is kept is still wanted
        assert j in followed and observed[j][0] in ("PENDING", "RUNNING") and not observed[j][1]
    assert plan.at == math.inf or NOW < plan.at <= NOW + 50


@given(lifetimes=st.lists(st.floats(0, 5), min_size=1, max_size=30))
def test_quickly_ending_streams_cost_at_most_one_per_backoff_step(lifetimes: list[float]) -> None:
    """A head that keeps dropping the stream: each new stream waits longer, up to the cap, so the
    streams (and the read each end causes) never come faster than the backoff allows."""
    state, t, delays = FollowState(), NOW, []
    for lived in lifetimes:
        opened = state.retry_at if state.retry_at is not None else t
        state = after_follow_end(state, opened_at=opened, now=opened + lived, settings=S)
        assert state.retry_at is not None
        delays.append(state.retry_at - (opened + lived))
    assert delays == sorted(delays) and all(2.0 - 1e-9 <= d <= S.backoff_cap_s + 1e-9 for d in delays)
