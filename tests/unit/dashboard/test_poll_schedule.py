"""What to read from a Ray head and when (decisions/dashboard_poll.py), table-driven + properties."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardInterest,
    JobObservation,
    ServeAppObservation,
)
from raybus.decisions.dashboard_poll import (
    SERVE_CADENCE,
    ClusterWant,
    JobsRequest,
    OwnedInterest,
    Owner,
    PollPlan,
    PollSettings,
    PollState,
    ProxyRequest,
    ProxyTarget,
    after_change,
    after_head_ready,
    after_round,
    after_write,
    decide_poll,
    merge_interests,
    plan_requests,
)

# The change-driven schedule alone (no Serve cadence); the Serve cadence has its own tests below.
S = PollSettings(fast_interval_s=1.0, slow_interval_s=30.0, fresh_window_s=15.0, backoff_cap_s=30.0,
                 serve_interval_s=0.0)
S2 = S.model_copy(update={"serve_interval_s": 2.0})  # KubeRay's RayService cadence, the default
NOW = 1000.0  # monotonic seconds
WALL_MS = 1_800_000_000_000  # epoch ms


def owner(name: str, controller: str = "job") -> Owner:
    return Owner(controller=controller, namespace="ns", name=name,
                 kind="rayjob" if controller == "job" else "rayservice")


def want(**kw: Any) -> ClusterWant:
    return ClusterWant(namespace="ns", cluster="rc", owners=(owner("o"),), **kw)


def job(status: str, *, start_ago_s: float = 600.0, ghost: bool = False) -> JobObservation:
    return JobObservation(job_id="j", status=status, start_time_ms=int(WALL_MS - start_ago_s * 1000),
                          ghost=ghost)


def obs(**kw: Any) -> ClusterObservation:
    return ClusterObservation(namespace="ns", cluster="rc", reachable=True, **kw)


def app(status: str) -> ServeAppObservation:
    return ServeAppObservation(status=status)


JOB = want(jobs=("j",))
SERVE = want(serve=True)
PROXY = want(proxies=(ProxyTarget(pod="head", ip="10.0.0.1", port=8000),))
POLLED_JOB = PollState(last_attempt_at=NOW - 1.5, last_success_at=NOW - 1.5, polled_targets=JOB.targets)
POLLED_SERVE = PollState(last_attempt_at=NOW - 1.5, last_success_at=NOW - 1.5,
                         polled_targets=SERVE.targets)


# (case, want, state, observation, head_ready, due, reason contains, next decision at)
CASES: list[tuple[str, ClusterWant, PollState, ClusterObservation | None, bool | None, bool, str, float]] = [
    ("nothing declared", want(), PollState(), None, None, False, "nothing declared", math.inf),
    ("head not ready", JOB, PollState(), None, False, False, "head pod not ready", math.inf),
    ("never read", JOB, PollState(), None, None, True, "never read", NOW),
    ("never read, head ready", JOB, PollState(), None, True, True, "never read", NOW),
    ("job PENDING: fast", JOB, POLLED_JOB, obs(jobs={"j": job("PENDING")}), None, True, "PENDING", NOW - 0.5),
    ("job just started: fast", JOB, POLLED_JOB, obs(jobs={"j": job("RUNNING", start_ago_s=5)}), None,
     True, "just started", NOW - 0.5),
    ("long-running job: slow", JOB, POLLED_JOB, obs(jobs={"j": job("RUNNING")}), None, False,
     "steady state", NOW - 1.5 + 30),
    ("every declared job terminal: nothing to read", JOB, POLLED_JOB, obs(jobs={"j": job("SUCCEEDED")}),
     None, False, "terminal", math.inf),
    ("a ghost is read again", JOB, POLLED_JOB, obs(jobs={"j": job("STOPPED", ghost=True)}), None, False,
     "steady state", NOW - 1.5 + 30),
    ("missing job: slow", JOB, POLLED_JOB, obs(jobs_missing=["j"]), None, False, "steady state",
     NOW - 1.5 + 30),
    ("job not observed yet: fast", JOB, POLLED_JOB, obs(), None, True, "not observed yet", NOW - 0.5),
    ("expect_change: fast", want(jobs=("j",), expect_change=True), POLLED_JOB,
     obs(jobs={"j": job("RUNNING")}), None, True, "expects a change", NOW - 0.5),
    ("written moments ago: fast", JOB, POLLED_JOB.model_copy(update={"last_write_at": NOW - 3, "write_seen": False}),
     obs(jobs={"j": job("RUNNING")}), None, True, "written", NOW - 0.5),
    ("written moments ago, its effect read since: slow", JOB,
     POLLED_JOB.model_copy(update={"last_write_at": NOW - 3, "write_seen": True}),
     obs(jobs={"j": job("RUNNING")}), None, False, "steady state", NOW - 1.5 + 30),
    ("job just started, its end signalled by the owner: slow", want(jobs=("j",), signalled=("j",)), POLLED_JOB,
     obs(jobs={"j": job("RUNNING", start_ago_s=5)}), None, False, "steady state", NOW - 1.5 + 30),
    ("job PENDING, its end signalled: still fast (the start is not)", want(jobs=("j",), signalled=("j",)),
     POLLED_JOB, obs(jobs={"j": job("PENDING", start_ago_s=5)}), None, True, "PENDING", NOW - 0.5),
    ("written long ago: slow", JOB, POLLED_JOB.model_copy(update={"last_write_at": NOW - 300, "write_seen": False}),
     obs(jobs={"j": job("RUNNING")}), None, False, "steady state", NOW - 1.5 + 30),
    ("apps DEPLOYING: fast", SERVE, POLLED_SERVE, obs(serve_apps={"a": app("DEPLOYING"), "b": app("RUNNING")}),
     None, True, "DEPLOYING", NOW - 0.5),
    ("apps DELETING: fast", SERVE, POLLED_SERVE, obs(serve_apps={"a": app("DELETING")}), None, True,
     "DELETING", NOW - 0.5),
    ("apps RUNNING: slow", SERVE, POLLED_SERVE, obs(serve_apps={"a": app("RUNNING")}), None, False,
     "steady state", NOW - 1.5 + 30),
    ("apps DEPLOY_FAILED: slow (a new config is needed)", SERVE, POLLED_SERVE,
     obs(serve_apps={"a": app("DEPLOY_FAILED")}), None, False, "steady state", NOW - 1.5 + 30),
    ("Serve never read: fast", SERVE, POLLED_SERVE, obs(), None, True, "Serve not read", NOW - 0.5),
    ("proxy unhealthy: fast", PROXY, PollState(last_attempt_at=NOW - 1.5, polled_targets=PROXY.targets),
     obs(proxy_healthy={"head": False}), None, True, "unhealthy", NOW - 0.5),
    ("proxy healthy: slow", PROXY, PollState(last_attempt_at=NOW - 1.5, polled_targets=PROXY.targets),
     obs(proxy_healthy={"head": True}), None, False, "steady state", NOW - 1.5 + 30),
    ("interest changed: at once", want(jobs=("j", "k")), POLLED_JOB, obs(jobs={"j": job("RUNNING")}), None,
     True, "declared interest changed", NOW),
    ("poll_now token: at once even in steady state", want(jobs=("j",), poll_now=frozenset({"job/o=1"})),
     POLLED_JOB, obs(jobs={"j": job("RUNNING")}), None, True, "poll_now", NOW),
    ("poll_now token: at once even with the head Pod not Ready (SidecarMode's submitter ended)",
     want(jobs=("j",), poll_now=frozenset({"job/o=1"})), POLLED_JOB, obs(jobs={"j": job("RUNNING")}), False, True,
     "poll_now", NOW),
    ("poll_now token served, head Pod not Ready: nothing more", want(jobs=("j",), poll_now=frozenset({"job/o=1"})),
     POLLED_JOB.model_copy(update={"tokens_seen": frozenset({"job/o=1"})}), obs(jobs={"j": job("RUNNING")}), False,
     False, "head pod not ready", math.inf),
    ("poll_now token already served: slow", want(jobs=("j",), poll_now=frozenset({"job/o=1"})),
     POLLED_JOB.model_copy(update={"tokens_seen": frozenset({"job/o=1"})}),
     obs(jobs={"j": job("RUNNING")}), None, False, "steady state", NOW - 1.5 + 30),
    ("backoff after 1 failure", JOB, POLLED_JOB.model_copy(update={"failures": 1}),
     obs(jobs={"j": job("PENDING")}), None, False, "backoff", NOW - 1.5 + 2),
    ("backoff after 3 failures", JOB, POLLED_JOB.model_copy(update={"failures": 3}),
     obs(jobs={"j": job("PENDING")}), None, False, "backoff", NOW - 1.5 + 8),
    ("backoff is capped", JOB, POLLED_JOB.model_copy(update={"failures": 30}), None, None, False,
     "backoff", NOW - 1.5 + 30),
    ("poll_now beats backoff", want(jobs=("j",), poll_now=frozenset({"job/o=2"})),
     POLLED_JOB.model_copy(update={"failures": 5}), None, None, True, "poll_now", NOW),
    ("read back after a write beats everything", JOB,
     after_write(POLLED_JOB.model_copy(update={"failures": 5}), now=NOW), obs(jobs={"j": job("SUCCEEDED")}),
     None, True, "read back", NOW),
]


@pytest.mark.parametrize(("case", "w", "state", "o", "ready", "due", "reason", "at"), CASES,
                         ids=[c[0] for c in CASES])
def test_decide_poll(case: str, w: ClusterWant, state: PollState, o: ClusterObservation | None,
                     ready: bool | None, due: bool, reason: str, at: float) -> None:
    decision = decide_poll(w, state, o, now=NOW, wall_ms=WALL_MS, settings=S, head_ready=ready)
    assert (decision.due, decision.at) == (due, pytest.approx(at)), decision
    assert reason in decision.reason
    assert (decision.plan is not None) == due


@pytest.mark.parametrize(("jobs", "observed", "read_back", "expected"), [
    (("j",), {}, False, JobsRequest(job_id="j", declared=("j",))),
    (("a", "b", "c"), {}, False, JobsRequest(job_id=None, declared=("a", "b", "c"))),
    # terminal jobs are not read again: two left -> the list; one left -> its own GET
    (("a", "b", "c"), {"a": "SUCCEEDED"}, False, JobsRequest(job_id=None, declared=("b", "c"))),
    (("a", "b"), {"a": "FAILED"}, False, JobsRequest(job_id="b", declared=("b",))),
    (("a", "b"), {"a": "STOPPED", "b": "SUCCEEDED"}, False, None),
    (("a", "b"), {"a": "STOPPED", "b": "SUCCEEDED"}, True, JobsRequest(job_id=None, declared=("a", "b"))),
    (("a",), {"a": "RUNNING"}, False, JobsRequest(job_id="a", declared=("a",))),
])
def test_one_jobs_request_per_round(jobs: tuple[str, ...], observed: dict[str, str], read_back: bool,
                                    expected: JobsRequest | None) -> None:
    o = obs(jobs={j: JobObservation(job_id=j, status=st) for j, st in observed.items()})
    plan = plan_requests(want(jobs=jobs, serve=True), o, read_back=read_back)
    assert plan.jobs == expected
    assert plan.serve is True  # one Serve GET for every app


def test_merge_interests_per_cluster() -> None:
    interests = [
        OwnedInterest(owner=owner("job-a"), interest=DashboardInterest(cluster="rc1", jobs=["a"])),
        OwnedInterest(owner=owner("job-b"), interest=DashboardInterest(cluster="rc1", jobs=["b", "a"],
                                                                       poll_now="submitter-ended")),
        OwnedInterest(owner=owner("svc", "service"), interest=DashboardInterest(
            cluster="rc2", serve=True, proxy_pods={"h2": "10.0.0.2"}, expect_change=True)),
        OwnedInterest(owner=owner("gone"), interest=DashboardInterest()),  # withdrawn
    ]
    merged = merge_interests(interests)
    assert set(merged) == {("ns", "rc1"), ("ns", "rc2")}
    rc1, rc2 = merged[("ns", "rc1")], merged[("ns", "rc2")]
    assert rc1.jobs == ("a", "b") and not rc1.serve and not rc1.expect_change
    assert rc1.poll_now == frozenset({"job/job-b=submitter-ended"})
    assert [o.name for o in rc1.owners] == ["job-a", "job-b"]
    assert rc2.serve and rc2.expect_change and rc2.jobs == ()
    assert rc2.proxies == (ProxyTarget(pod="h2", ip="10.0.0.2", port=8000),)


@pytest.mark.parametrize(("read_at", "seen"), [(NOW - 1, False), (NOW, True), (NOW + 2, True)])
def test_a_change_read_after_a_write_ends_its_fast_window(read_at: float, seen: bool) -> None:
    written = after_write(POLLED_JOB, now=NOW)
    assert not written.write_seen and written.read_back
    assert after_change(written, read_at=read_at).write_seen == seen  # a read begun before the write: no
    assert after_change(POLLED_JOB, read_at=NOW) == POLLED_JOB  # nothing written: nothing to see


def test_merge_job_end_signalled() -> None:
    merged = merge_interests([
        OwnedInterest(owner=owner("k8s"), interest=DashboardInterest(cluster="rc", jobs=["a"],
                                                                     job_end_signalled=True)),
        OwnedInterest(owner=owner("http"), interest=DashboardInterest(cluster="rc", jobs=["b"])),
    ])[("ns", "rc")]
    assert merged.signalled == ("a",) and merged.jobs == ("a", "b")


def test_after_round_and_head_ready() -> None:
    w = want(jobs=("j",), poll_now=frozenset({"job/o=1"}))
    failed = after_round(PollState(failures=2), w, now=NOW, failed=True)
    assert failed.failures == 3 and failed.last_success_at is None and failed.tokens_seen == w.poll_now
    ok = after_round(failed, w, now=NOW + 1, failed=False)
    assert ok.failures == 0 and ok.last_success_at == NOW + 1 and ok.polled_targets == w.targets
    fresh = after_head_ready(failed)
    assert fresh.failures == 0 and fresh.last_attempt_at is None
    assert decide_poll(w, fresh, None, now=NOW, wall_ms=WALL_MS, settings=S).due


statuses = st.sampled_from(["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"])
app_statuses = st.sampled_from(["NOT_STARTED", "DEPLOYING", "RUNNING", "DEPLOY_FAILED", "UNHEALTHY",
                                "DELETING"])


@given(job_status=statuses, app_status=app_statuses, failures=st.integers(0, 40),
       since=st.floats(0, 120), expect=st.booleans(), start_ago=st.floats(0, 3600))
def test_never_faster_than_fast_and_never_slower_than_the_safety_net(
        job_status: str, app_status: str, failures: int, since: float, expect: bool,
        start_ago: float) -> None:
    w = want(jobs=("j",), serve=True, expect_change=expect)
    state = PollState(last_attempt_at=NOW - since, failures=failures, polled_targets=w.targets)
    o = obs(jobs={"j": job(job_status, start_ago_s=start_ago)}, serve_apps={"a": app(app_status)})
    d = decide_poll(w, state, o, now=NOW, wall_ms=WALL_MS, settings=S)
    gap = d.at - (NOW - since)
    assert S.fast_interval_s - 1e-9 <= gap <= max(S.slow_interval_s, S.backoff_cap_s) + 1e-9
    assert d.due == (d.at <= NOW)
    if d.due:
        assert d.plan is not None and d.plan.request_count <= 2  # jobs + Serve: one request each


@given(n_jobs=st.integers(1, 200), serve=st.booleans())
def test_requests_per_round_do_not_grow_with_jobs_or_apps(n_jobs: int, serve: bool) -> None:
    jobs = tuple(f"j{i}" for i in range(n_jobs))
    plan = plan_requests(want(jobs=jobs, serve=serve), None)
    assert plan.request_count == 1 + serve


# --- the Serve cadence (serve_interval_s) -----------------------------------------------------------
HEAD = ProxyTarget(pod="head", ip="10.0.0.1", port=8000)
SERVICE = want(serve=True, proxies=(HEAD,))
STEADY = obs(serve_apps={"a": app("RUNNING")}, proxy_healthy={"head": True})
READ_SERVICE = PollState(last_attempt_at=NOW - 10, last_success_at=NOW - 10, polled_targets=SERVICE.targets)
SERVE_ONLY = PollPlan(serve=True, full=False)

# (case, want, state, observation, head_ready, due, reason contains, at, plan when due)
CADENCE: list[tuple[str, ClusterWant, PollState, ClusterObservation | None, bool | None, bool, str, float,
                    PollPlan | None]] = [
    ("apps RUNNING, Serve read 2.5 s ago: Serve alone", SERVICE,
     READ_SERVICE.model_copy(update={"serve_read_at": NOW - 2.5}), STEADY, None, True, SERVE_CADENCE, NOW - 0.5,
     SERVE_ONLY),
    ("apps RUNNING, Serve read 1.5 s ago: not yet", SERVICE,
     READ_SERVICE.model_copy(update={"serve_read_at": NOW - 1.5}), STEADY, None, False, SERVE_CADENCE, NOW + 0.5,
     None),
    ("no Serve-only read yet: counted from the last full round", SERVICE, READ_SERVICE, STEADY, None, True,
     SERVE_CADENCE, NOW - 8, SERVE_ONLY),
    ("jobs and proxies declared beside Serve: Serve alone is read",
     want(jobs=("j",), serve=True, proxies=(HEAD,)),
     PollState(last_attempt_at=NOW - 10, polled_targets=want(jobs=("j",), serve=True, proxies=(HEAD,)).targets,
               serve_read_at=NOW - 3), obs(jobs={"j": job("RUNNING")}, serve_apps={"a": app("RUNNING")},
                                           proxy_healthy={"head": True}), None, True, SERVE_CADENCE, NOW - 1,
     SERVE_ONLY),
    ("the slow round due: the full round (it reads Serve too)", SERVICE,
     READ_SERVICE.model_copy(update={"last_attempt_at": NOW - 31, "serve_read_at": NOW - 1}), STEADY, None, True,
     "steady state", NOW - 1, PollPlan(serve=True, proxies=(ProxyRequest(target=HEAD),))),
    ("apps DEPLOYING: the fast full round comes first", SERVICE,
     READ_SERVICE.model_copy(update={"last_attempt_at": NOW - 0.5, "serve_read_at": NOW - 0.5}),
     obs(serve_apps={"a": app("DEPLOYING")}, proxy_healthy={"head": True}), None, False, "DEPLOYING", NOW + 0.5,
     None),
    ("a head that does not answer: the backoff governs every read", SERVICE,
     READ_SERVICE.model_copy(update={"failures": 3, "last_attempt_at": NOW - 1, "serve_read_at": NOW - 5}), STEADY,
     None, False, "backoff", NOW - 1 + 8, None),
    ("head Pod not Ready: nothing", SERVICE, READ_SERVICE.model_copy(update={"serve_read_at": NOW - 5}), STEADY,
     False, False, "head pod not ready", math.inf, None),
    ("a poll_now token: the full round at once", want(serve=True, proxies=(HEAD,), poll_now=frozenset({"s/o=1"})),
     READ_SERVICE.model_copy(update={"serve_read_at": NOW - 5}), STEADY, None, True, "poll_now", NOW,
     PollPlan(serve=True, proxies=(ProxyRequest(target=HEAD),))),
    ("Serve not declared: no cadence", PROXY,
     PollState(last_attempt_at=NOW - 10, polled_targets=PROXY.targets, serve_read_at=NOW - 5),
     obs(proxy_healthy={"head": True}), None, False, "steady state", NOW + 20, None),
]


@pytest.mark.parametrize(("case", "w", "state", "o", "ready", "due", "reason", "at", "plan"), CADENCE,
                         ids=[c[0] for c in CADENCE])
def test_serve_cadence(case: str, w: ClusterWant, state: PollState, o: ClusterObservation | None,
                       ready: bool | None, due: bool, reason: str, at: float, plan: PollPlan | None) -> None:
    decision = decide_poll(w, state, o, now=NOW, wall_ms=WALL_MS, settings=S2, head_ready=ready)
    assert (decision.due, decision.at) == (due, pytest.approx(at)), decision
    assert reason in decision.reason
    assert decision.plan == plan


def test_serve_cadence_off_is_the_change_driven_schedule() -> None:
    state = READ_SERVICE.model_copy(update={"serve_read_at": NOW - 5})
    decision = decide_poll(SERVICE, state, STEADY, now=NOW, wall_ms=WALL_MS, settings=S)
    assert (decision.due, decision.at, decision.reason) == (False, NOW + 20, "steady state")


def test_a_serve_only_round_settles_nothing_else() -> None:
    w = want(jobs=("j",), serve=True, proxies=(HEAD,), poll_now=frozenset({"s/o=1"}))
    state = PollState(last_attempt_at=NOW - 10, last_success_at=NOW - 10, polled_targets=w.targets,
                      tokens_seen=frozenset({"s/o=0"}), serve_read_at=NOW - 3)
    ok = after_round(state, w, now=NOW, failed=False, plan=SERVE_ONLY)
    assert ok.serve_read_at == NOW and ok.last_success_at == NOW
    assert (ok.last_attempt_at, ok.tokens_seen, ok.polled_targets) == (NOW - 10, state.tokens_seen, w.targets)
    failed = after_round(state, w, now=NOW, failed=True, plan=SERVE_ONLY)
    assert failed.failures == 1 and failed.last_attempt_at == NOW and failed.last_success_at == NOW - 10
    # The backoff retries with a full round.
    retry = decide_poll(w.model_copy(update={"poll_now": state.tokens_seen}), failed, None, now=NOW + 2,
                        wall_ms=WALL_MS, settings=S2)
    assert retry.due and "backoff" in retry.reason and retry.plan is not None and retry.plan.full
    full = after_round(state, w, now=NOW, failed=False, plan=plan_requests(w, None))
    assert full.serve_read_at == NOW and full.last_attempt_at == NOW and full.tokens_seen == w.poll_now


def _steady_minute(settings: PollSettings, w: ClusterWant, o: ClusterObservation) -> tuple[list[float], dict[str, int]]:
    """Run the scheduler's loop (decide, read, after_round) over 10 steady minutes, ticking every 0.1 s:
    when Serve was read, and how many requests of each part were sent per minute."""
    state, now, serve_reads, sent = PollState(), 0.0, [], {"jobs": 0, "serve": 0, "proxy": 0}
    while now < 600:
        d = decide_poll(w, state, o, now=now, wall_ms=WALL_MS, settings=settings)
        if d.due:
            assert d.plan is not None
            sent["jobs"] += d.plan.jobs is not None
            sent["serve"] += d.plan.serve
            sent["proxy"] += len(d.plan.proxies)
            if d.plan.serve:
                serve_reads.append(now)
            state = after_round(state, w, now=now, failed=False, plan=d.plan)
        now = round(now + 0.1, 1)
    return serve_reads, {k: round(v / 10) for k, v in sent.items()}


def test_a_steady_service_cluster_costs_serve_every_2_s_and_the_rest_at_the_safety_net() -> None:
    w = want(jobs=("j",), serve=True, proxies=(HEAD,))
    o = obs(jobs={"j": job("RUNNING")}, serve_apps={"a": app("RUNNING")}, proxy_healthy={"head": True})
    reads, per_minute = _steady_minute(S2, w, o)
    assert max(b - a for a, b in itertools.pairwise(reads)) == pytest.approx(2.0)
    assert per_minute == {"jobs": 2, "serve": 30, "proxy": 2}  # KubeRay: Serve 30 + proxy 30 per RayService
    assert _steady_minute(S, w, o)[1] == {"jobs": 2, "serve": 2, "proxy": 2}


@given(app_status=app_statuses, since=st.floats(0, 60), serve_since=st.floats(0, 60), expect=st.booleans())
def test_serve_is_never_read_later_than_its_cadence(app_status: str, since: float, serve_since: float,
                                                    expect: bool) -> None:
    w = want(serve=True, proxies=(HEAD,), expect_change=expect)
    state = PollState(last_attempt_at=NOW - since, polled_targets=w.targets, serve_read_at=NOW - serve_since)
    o = obs(serve_apps={"a": app(app_status)}, proxy_healthy={"head": True})
    d = decide_poll(w, state, o, now=NOW, wall_ms=WALL_MS, settings=S2)
    assert d.due == (d.at <= NOW)
    assert d.due or d.at <= NOW - serve_since + S2.serve_interval_s + 1e-9
    if d.due:
        assert d.plan is not None and d.plan.serve and d.plan.request_count <= 2
