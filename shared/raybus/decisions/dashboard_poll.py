"""What the dashboard-poller reads from each Ray head, and when (pure).

KubeRay polls from inside the reconcile, forever, at a fixed cadence: the RayJob controller GETs
its job every 3 s (`GetJobInfo`), the RayService controller GETs the Serve details and the head's
proxy health every 2 s, whatever is happening (KubeRay #4069, #4087, #2646). raybus aggregates
every owner's `DashboardInterest` per cluster and reads a head:

- at once when an owner asks (`poll_now` token changed: e.g. the submitter container ended, so
  the Ray job has most likely ended too), when the log tail stream of a followed job ended (the
  head closes it when the job reaches a terminal state: `ray job logs --follow`'s signal, see
  "Follow streams" below), or when what is declared changed (a new job id, Serve newly wanted,
  another head pod);
- fast (`fast_interval_s`) only where a change is expected: `expect_change`, a job PENDING or just
  started (unless its end is signalled: a followed job's open stream, or an owner whose submitter
  container reports it, `job_end_signalled`), apps DEPLOYING/DELETING/NOT_STARTED, a proxy
  unhealthy or never read, a write to the cluster moments ago whose effect no read has shown yet
  (a read after the write that changed the observation ends that: the other rules take over);
- Serve's application status alone every `serve_interval_s` (KubeRay's 2 s RayService requeue)
  for a cluster whose Serve apps are declared: an app can turn UNHEALTHY with no signal at all (a
  replica failing its health checks, a deployment stuck), and users alert on the RayService's
  Ready condition, so that one read keeps KubeRay's cadence; it is one GET for every app, and the
  round covers nothing else (jobs, proxies, tokens and the slow timer are left as they were);
- slowly otherwise (`slow_interval_s`, a safety net);
- with exponential backoff while the head does not answer (a timeout is never a state).

One round is one request per part whatever the number of jobs/apps: `GET /api/serve/applications/`
once for every app; for jobs `GET /api/jobs/<id>` when one job is declared (the smallest answer,
and a definite 404 for a missing job) and `GET /api/jobs/` once when several are (one request
instead of N; README §5: 2.4 ms for a 9-job list vs 1.3 ms per single GET). Jobs already terminal
are not read again (a terminal Ray job never changes; KubeRay stops polling them too), except in
the read-back after a write. The poller runs a round's requests one after another, and never a
round and a command at the same time, so a head never has two raybus requests in flight.

Follow streams (log tail streams of followed jobs) are decided in dashboard_follow.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from raybus.decisions.dashboard import next_delay
from raybus.decisions.dashboard_contract import ClusterObservation, DashboardInterest

TERMINAL_JOB = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})
CHANGING_APP = frozenset({"DEPLOYING", "DELETING", "NOT_STARTED"})
SERVE_PUSH_TOKEN = "push/serve="  # poll_now token of pushed Serve actor deaths (with_pushed_ends)
SERVE_CADENCE = "Serve status cadence"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class PollSettings(_Frozen):
    fast_interval_s: float = 1.0  # where a change is expected (KubeRay: 2 s / 3 s always)
    slow_interval_s: float = 30.0  # steady-state safety net
    fresh_window_s: float = 15.0  # a job submitted / a cluster written to this recently stays fast
    serve_interval_s: float = 2.0  # Serve's app status alone (KubeRay: 2 s); 0 = no such reads
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
    follow: tuple[str, ...] = ()  # jobs whose log tail stream to hold open (all also in `jobs`)
    signalled: tuple[str, ...] = ()  # jobs whose end an owner learns of from Kubernetes

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
    follow: set[str] = field(default_factory=set)
    signalled: set[str] = field(default_factory=set)


def merge_interests(interests: Iterable[OwnedInterest]) -> dict[tuple[str, str], ClusterWant]:
    """(namespace, cluster) -> merged want. An interest without a cluster declares nothing."""
    acc: dict[tuple[str, str], _Acc] = {}
    for item in sorted(interests, key=lambda i: (i.owner.controller, i.owner.namespace, i.owner.name)):
        want = item.interest
        if not want.cluster:
            continue
        cur = acc.setdefault((item.owner.namespace, want.cluster), _Acc())
        cur.jobs.update(want.jobs)
        cur.jobs.update(want.follow_jobs)
        cur.follow.update(want.follow_jobs)
        if want.job_end_signalled:
            cur.signalled.update(want.jobs)
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
            poll_now=frozenset(cur.tokens), owners=tuple(cur.owners), follow=tuple(sorted(cur.follow)),
            signalled=tuple(sorted(cur.signalled)))
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
    write_seen: bool = True  # a read after the last write changed the observation
    read_back: bool = False  # a write just finished: read everything declared, at once
    serve_push_at: float | None = None  # a round covered a pushed death of a Serve actor
    serve_read_at: float | None = None  # the last round that read Serve (either kind) ended


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
    # False: the Serve cadence's round (Serve only). It stands for no other rule: the tokens,
    # targets and slow timer a full round settles stay as they were.
    full: bool = True

    @property
    def request_count(self) -> int:
        return (self.jobs is not None) + self.serve + len(self.proxies)


class PollDecision(_Frozen):
    due: bool
    at: float  # when to decide again at the latest (math.inf: only when something changes)
    reason: str
    plan: PollPlan | None = None


def fast_reason(want: ClusterWant, observation: ClusterObservation | None, state: PollState, *,
                now: float, wall_ms: int, settings: PollSettings,
                streaming: frozenset[str] = frozenset()) -> str | None:
    """Why this cluster should be read at the fast cadence, or None for the slow one. `streaming`:
    followed jobs whose log tail stream is open (their end is signalled)."""
    if want.expect_change:
        return "an owner expects a change"
    if (state.last_write_at is not None and not state.write_seen
            and now - state.last_write_at < settings.fresh_window_s):
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
        if job.status == "RUNNING" and young and job_id not in streaming and job_id not in want.signalled:
            return f"job {job_id} just started"
    if want.serve:
        if obs is None or obs.serve_apps is None:
            return "Serve not read yet"
        if state.serve_push_at is not None and now - state.serve_push_at < settings.fresh_window_s:
            # On a real Ray 2.60 head a replica's death was pushed 0.2 s after it, Serve's status
            # turned UNHEALTHY 7 s later: the read at the push is too early, so stay fast a while.
            return "a Serve actor died moments ago"
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
                head_ready: bool | None = None, streaming: frozenset[str] = frozenset()) -> PollDecision:
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
        fast = fast_reason(want, observation, state, now=now, wall_ms=wall_ms, settings=settings,
                           streaming=streaming)
        interval = settings.fast_interval_s if fast else settings.slow_interval_s
        at, reason = last + interval, fast or "steady state"
        serve_at = serve_due_at(want, state, settings)
        if serve_at < at and at > now:
            # Only Serve is due: read it alone, the other parts keep their own cadence.
            due = serve_at <= now
            return PollDecision(due=due, at=serve_at, reason=SERVE_CADENCE,
                                plan=PollPlan(serve=True, full=False) if due else None)
    return PollDecision(due=at <= now, at=at, reason=reason, plan=plan if at <= now else None)


def serve_due_at(want: ClusterWant, state: PollState, settings: PollSettings) -> float:
    """When Serve's status is next due at `serve_interval_s`, counted from the last round that read
    it (a full round reads it too); math.inf when Serve is not declared or the cadence is off."""
    if not want.serve or settings.serve_interval_s <= 0:
        return math.inf
    last = state.serve_read_at if state.serve_read_at is not None else state.last_attempt_at
    return math.inf if last is None else last + settings.serve_interval_s


def after_round(state: PollState, want: ClusterWant, *, now: float, failed: bool,
                plan: PollPlan | None = None) -> PollState:
    """State after a round: tokens and targets it covered are seen; failures count up or reset; a
    pushed Serve actor death it covered keeps Serve at the fast cadence for `fresh_window_s`.
    A Serve-only round (`plan.full` False) covers none of that: it moves the Serve cadence, counts
    a failure (the backoff then governs every read), and a success resets the failures."""
    reads_serve = plan.serve if plan is not None else want.serve
    serve_read_at = now if reads_serve else state.serve_read_at
    if plan is not None and not plan.full:
        return state.model_copy(update={
            "serve_read_at": serve_read_at,
            "last_attempt_at": now if failed else state.last_attempt_at,
            "last_success_at": state.last_success_at if failed else now,
            "failures": state.failures + 1 if failed else 0,
        })
    serve_push = any(t.startswith(SERVE_PUSH_TOKEN) for t in want.poll_now - state.tokens_seen)
    return state.model_copy(update={
        "serve_push_at": now if serve_push else state.serve_push_at,
        "serve_read_at": serve_read_at,
        "last_attempt_at": now,
        "last_success_at": state.last_success_at if failed else now,
        "failures": state.failures + 1 if failed else 0,
        "polled_targets": want.targets,
        "tokens_seen": want.poll_now,
        "read_back": False,
    })


def after_write(state: PollState, *, now: float) -> PollState:
    """A command just ran on this cluster: read it back at once, then stay fast for a while."""
    return state.model_copy(update={"last_write_at": now, "write_seen": False, "read_back": True})


def after_change(state: PollState, *, read_at: float) -> PollState:
    """A read that started at `read_at` changed the observation: if it started after the last
    write, the write's effect is visible and "written to moments ago" is no reason to stay fast
    (what still changes, apps DEPLOYING or a job PENDING, keeps the fast cadence by its own rule)."""
    if state.last_write_at is None or state.write_seen or read_at < state.last_write_at:
        return state
    return state.model_copy(update={"write_seen": True})


def after_head_ready(state: PollState) -> PollState:
    """The head pod just became Ready: forget the backoff of the head that was not there."""
    return state.model_copy(update={"failures": 0, "last_attempt_at": None})


def with_pushed_ends(want: ClusterWant, ends: Mapping[str, int], serve_deaths: int = 0) -> ClusterWant:
    """A job end pushed by the head (decisions/ray_events.py) asks for a read at once, like a
    follow stream's end; only for jobs an owner declared (a head cannot make raybus read for jobs
    nobody asked about), and counted per job so a second push is a new token. Pushed deaths of
    Serve's actors do the same for a cluster whose Serve apps are declared."""
    declared = set(want.jobs)
    tokens = {f"push/{job_id}={n}" for job_id, n in ends.items() if job_id in declared and n}
    if want.serve and serve_deaths:
        tokens.add(f"{SERVE_PUSH_TOKEN}{serve_deaths}")
    if not tokens:
        return want
    return want.model_copy(update={"poll_now": want.poll_now | tokens})
