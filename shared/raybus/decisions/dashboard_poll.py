"""What the dashboard-poller reads from each Ray head, and when (pure).

KubeRay polls from inside the reconcile, forever, at a fixed cadence: the RayJob controller GETs
its job every 3 s (`GetJobInfo`), the RayService controller GETs the Serve details and the head's
proxy health every 2 s, whatever is happening (KubeRay #4069, #4087, #2646). raybus aggregates
every owner's `DashboardInterest` per cluster and reads a head:

- at once when an owner asks (`poll_now` token changed: e.g. the submitter container ended, so
  the Ray job has most likely ended too), or when what is declared changed (a new job id, Serve
  newly wanted, another head pod);
- fast (`fast_interval_s`) only where a change is expected: `expect_change`, a job PENDING or just
  submitted, apps DEPLOYING/DELETING/NOT_STARTED, a proxy unhealthy or never read, a write to the
  cluster moments ago;
- slowly otherwise (`slow_interval_s`, a safety net);
- with exponential backoff while the head does not answer (a timeout is never a state).

One round is one request per part whatever the number of jobs/apps: `GET /api/serve/applications/`
once for every app; for jobs `GET /api/jobs/<id>` when one job is declared (the smallest answer,
and a definite 404 for a missing job) and `GET /api/jobs/` once when several are (one request
instead of N; README §5: 2.4 ms for a 9-job list vs 1.3 ms per single GET). Jobs already terminal
are not read again (a terminal Ray job never changes; KubeRay stops polling them too), except in
the read-back after a write. The poller runs a round's requests one after another, and never a
round and a command at the same time, so a head never has two raybus requests in flight.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from raybus.decisions.dashboard import next_delay
from raybus.decisions.dashboard_contract import ClusterObservation, DashboardInterest

TERMINAL_JOB = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})
CHANGING_APP = frozenset({"DEPLOYING", "DELETING", "NOT_STARTED"})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class PollSettings(_Frozen):
    fast_interval_s: float = 1.0  # where a change is expected (KubeRay: 2 s / 3 s always)
    slow_interval_s: float = 30.0  # steady-state safety net
    fresh_window_s: float = 15.0  # a job submitted / a cluster written to this recently stays fast
    backoff_cap_s: float = 30.0  # longest wait between attempts at a head that does not answer
    unreachable_after: int = 2  # failed rounds in a row before `reachable` turns False


class Owner(_Frozen):
    """Who declared an interest: triggered whenever the cluster's observation changes."""

    controller: str
    namespace: str
    name: str
    kind: str


class OwnedInterest(_Frozen):
    owner: Owner
    interest: DashboardInterest


class ProxyTarget(_Frozen):
    pod: str
    ip: str
    port: int


class ClusterWant(_Frozen):
    """Every owner's interest in one cluster, merged."""

    namespace: str
    cluster: str
    jobs: tuple[str, ...] = ()
    serve: bool = False
    proxies: tuple[ProxyTarget, ...] = ()
    expect_change: bool = False
    poll_now: frozenset[str] = frozenset()  # "<controller>/<owner>=<token>"
    owners: tuple[Owner, ...] = ()

    @property
    def targets(self) -> tuple[tuple[str, ...], bool, tuple[ProxyTarget, ...]]:
        """What is read (not why): a change here means a poll at once."""
        return self.jobs, self.serve, self.proxies

    @property
    def empty(self) -> bool:
        return not self.jobs and not self.serve and not self.proxies


@dataclass
class _Acc:
    jobs: set[str] = field(default_factory=set)
    serve: bool = False
    proxies: dict[str, ProxyTarget] = field(default_factory=dict)
    expect: bool = False
    tokens: set[str] = field(default_factory=set)
    owners: list[Owner] = field(default_factory=list)


def merge_interests(interests: Iterable[OwnedInterest]) -> dict[tuple[str, str], ClusterWant]:
    """(namespace, cluster) -> merged want. An interest without a cluster declares nothing."""
    acc: dict[tuple[str, str], _Acc] = {}
    for item in sorted(interests, key=lambda i: (i.owner.controller, i.owner.namespace, i.owner.name)):
        want = item.interest
        if not want.cluster:
            continue
        cur = acc.setdefault((item.owner.namespace, want.cluster), _Acc())
        cur.jobs.update(want.jobs)
        cur.serve = cur.serve or want.serve
        for pod, ip in want.proxy_pods.items():
            cur.proxies[pod] = ProxyTarget(pod=pod, ip=ip, port=want.proxy_port)
        cur.expect = cur.expect or want.expect_change
        if want.poll_now:
            cur.tokens.add(f"{item.owner.controller}/{item.owner.name}={want.poll_now}")
        cur.owners.append(item.owner)
    return {
        (namespace, cluster): ClusterWant(
            namespace=namespace, cluster=cluster, jobs=tuple(sorted(cur.jobs)), serve=cur.serve,
            proxies=tuple(cur.proxies[p] for p in sorted(cur.proxies)), expect_change=cur.expect,
            poll_now=frozenset(cur.tokens), owners=tuple(cur.owners))
        for (namespace, cluster), cur in acc.items()
    }


class PollState(_Frozen):
    """What the poller remembers about one cluster between rounds (monotonic seconds)."""

    last_attempt_at: float | None = None
    last_success_at: float | None = None
    failures: int = 0  # rounds in a row with a transient failure
    polled_targets: tuple[tuple[str, ...], bool, tuple[ProxyTarget, ...]] | None = None
    tokens_seen: frozenset[str] = frozenset()
    last_write_at: float | None = None
    read_back: bool = False  # a write just finished: read everything declared, at once


class JobsRequest(_Frozen):
    """job_id None: GET /api/jobs/ (every job at once); else GET /api/jobs/<job_id>."""

    job_id: str | None
    declared: tuple[str, ...]  # the ids this request answers for


class ProxyRequest(_Frozen):
    target: ProxyTarget


class PollPlan(_Frozen):
    jobs: JobsRequest | None = None
    serve: bool = False
    proxies: tuple[ProxyRequest, ...] = ()

    @property
    def request_count(self) -> int:
        return (self.jobs is not None) + self.serve + len(self.proxies)


class PollDecision(_Frozen):
    due: bool
    at: float  # when to decide again at the latest (math.inf: only when something changes)
    reason: str
    plan: PollPlan | None = None


def fast_reason(want: ClusterWant, observation: ClusterObservation | None, state: PollState, *,
                now: float, wall_ms: int, settings: PollSettings) -> str | None:
    """Why this cluster should be read at the fast cadence, or None for the slow one."""
    if want.expect_change:
        return "an owner expects a change"
    if state.last_write_at is not None and now - state.last_write_at < settings.fresh_window_s:
        return "written to moments ago"
    obs = observation
    for job_id in want.jobs:
        job = obs.jobs.get(job_id) if obs else None
        if job is None:
            if obs is None or job_id not in obs.jobs_missing:
                return f"job {job_id} not observed yet"
            continue
        if job.status == "PENDING":
            return f"job {job_id} PENDING"
        young = job.start_time_ms is not None and wall_ms - job.start_time_ms < settings.fresh_window_s * 1000
        if job.status == "RUNNING" and young:
            return f"job {job_id} just started"
    if want.serve:
        if obs is None or obs.serve_apps is None:
            return "Serve not read yet"
        changing = sorted(n for n, a in obs.serve_apps.items() if a.status in CHANGING_APP)
        if changing:
            return f"apps {','.join(changing)} {obs.serve_apps[changing[0]].status}"
    for target in want.proxies:
        healthy = obs.proxy_healthy.get(target.pod) if obs else None
        if healthy is not True:
            return f"proxy on {target.pod} {'not read yet' if healthy is None else 'unhealthy'}"
    return None


def plan_requests(want: ClusterWant, observation: ClusterObservation | None, *,
                  read_back: bool = False) -> PollPlan:
    """The requests of one round. Terminal jobs are skipped unless reading back after a write."""
    jobs = list(want.jobs)
    if not read_back and observation is not None:
        jobs = [j for j in jobs if not (j in observation.jobs and not observation.jobs[j].ghost
                                        and observation.jobs[j].status in TERMINAL_JOB)]
    request = None
    if len(jobs) == 1:
        request = JobsRequest(job_id=jobs[0], declared=(jobs[0],))
    elif jobs:
        request = JobsRequest(job_id=None, declared=tuple(jobs))
    return PollPlan(jobs=request, serve=want.serve,
                    proxies=tuple(ProxyRequest(target=t) for t in want.proxies))


def decide_poll(want: ClusterWant, state: PollState, observation: ClusterObservation | None, *,
                now: float, wall_ms: int, settings: PollSettings,
                head_ready: bool | None = None) -> PollDecision:
    """Whether to read this cluster now, and if not, when to look again.

    `now` is monotonic seconds (intervals), `wall_ms` epoch ms (job start times). `head_ready`
    is the RayCluster's HeadPodReady condition, None when unknown (then the head is tried).
    """
    if want.empty:
        return PollDecision(due=False, at=math.inf, reason="nothing declared")
    new_tokens = want.poll_now - state.tokens_seen
    # An owner's explicit ask is tried even when the head Pod is not Ready: SidecarMode's submitter
    # container ending (the Ray job most likely ended) is exactly what makes the head Pod not Ready.
    if head_ready is False and not new_tokens:
        return PollDecision(due=False, at=math.inf, reason="head pod not ready")
    plan = plan_requests(want, observation, read_back=state.read_back)
    if plan.request_count == 0:
        return PollDecision(due=False, at=math.inf, reason="every declared job is terminal")
    last = state.last_attempt_at
    if state.read_back:
        return PollDecision(due=True, at=now, reason="read back after a write", plan=plan)
    if new_tokens:
        return PollDecision(due=True, at=now, reason=f"poll_now {min(new_tokens)}", plan=plan)
    if last is None:
        return PollDecision(due=True, at=now, reason="never read", plan=plan)
    if state.failures > 0:
        at = last + next_delay(state.failures, base_s=settings.fast_interval_s,
                               cap_s=settings.backoff_cap_s)
        reason = f"backoff after {state.failures} failed rounds"
    elif state.polled_targets != want.targets:
        return PollDecision(due=True, at=now, reason="declared interest changed", plan=plan)
    else:
        fast = fast_reason(want, observation, state, now=now, wall_ms=wall_ms, settings=settings)
        interval = settings.fast_interval_s if fast else settings.slow_interval_s
        at, reason = last + interval, fast or "steady state"
    return PollDecision(due=at <= now, at=at, reason=reason, plan=plan if at <= now else None)


def after_round(state: PollState, want: ClusterWant, *, now: float, failed: bool) -> PollState:
    """State after a round: tokens and targets it covered are seen; failures count up or reset."""
    return state.model_copy(update={
        "last_attempt_at": now,
        "last_success_at": state.last_success_at if failed else now,
        "failures": state.failures + 1 if failed else 0,
        "polled_targets": want.targets,
        "tokens_seen": want.poll_now,
        "read_back": False,
    })


def after_write(state: PollState, *, now: float) -> PollState:
    """A command just ran on this cluster: read it back at once, then stay fast for a while."""
    return state.model_copy(update={"last_write_at": now, "read_back": True})


def after_head_ready(state: PollState) -> PollState:
    """The head pod just became Ready: forget the backoff of the head that was not there."""
    return state.model_copy(update={"failures": 0, "last_attempt_at": None})
