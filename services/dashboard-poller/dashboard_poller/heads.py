"""Talking to Ray heads: one lock per head, poll rounds, and publishing what changed.

Every request to a head (a poll round, a command, its read-back) happens under that head's lock,
so a head never has two raybus requests in flight (KubeRay #4069: a slow head held the single
reconcile worker; here it holds only its own lock). An observation is published only when it
differs from the last published one (observed_at is not compared), then every owner interested in
the cluster is triggered with the observation's RAYBUS_DASHBOARD sequence.

Triggers are owed until published: the owners wait for them (raybus has no fixed 3 s requeue of a
running RayJob, as KubeRay has), and a later read equal to the published observation publishes
nothing, so a trigger lost to a NATS node's death would never be sent again. The 2-minute soak saw
exactly that: a RayJob's end was observed and published, its trigger failed, and the job stayed
Running. So an owed trigger stays in `owed` until NATS takes it, and is retried by every later
round of that cluster and by the scheduler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from datetime import UTC, datetime

import httpx
from nats.js import JetStreamContext

from dashboard_poller.settings import PollerSettings
from dashboard_poller.view import BusView, ClusterKey
from raybus.adapters.dashboard import (
    DashboardError,
    DashboardRequestError,
    DashboardTransientError,
    DashboardUnreachable,
    JobNotFound,
    RayDashboardClient,
    RayHttpProxyClient,
)
from raybus.adapters.dashboard_convert import job_observation, jobs_by_submission_id, serve_observation
from raybus.bus import subjects as s
from raybus.bus.envelopes import DashboardObservation, ObjectKey
from raybus.bus.publish import DASHBOARD_KIND, publish_dashboard_observation, publish_trigger
from raybus.decisions.dashboard_contract import ClusterObservation, JobObservation
from raybus.decisions.dashboard_observe import RoundResult, changed_parts, merge_round, newly_ended_jobs
from raybus.decisions.dashboard_poll import ClusterWant, Owner, PollPlan, PollState, after_change, after_round
from raybus.observability.metrics import DASHBOARD_OBSERVATION_LAG

log = logging.getLogger(__name__)


class Heads:
    def __init__(self, *, settings: PollerSettings, http: httpx.AsyncClient, js: JetStreamContext,
                 view: BusView) -> None:
        self.settings = settings
        self._http = http
        self._js = js
        self.view = view
        self.locks: defaultdict[ClusterKey, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.states: dict[ClusterKey, PollState] = {}
        self.deleted_jobs: defaultdict[ClusterKey, set[str]] = defaultdict(set)
        # cluster -> (observation seq, cause, owners not yet triggered for it); see the docstring
        self.owed: dict[ClusterKey, tuple[int, str, tuple[Owner, ...]]] = {}
        self.requests = 0  # observable for tests and the benchmark
        self.published = 0

    def client(self, namespace: str, cluster: str) -> RayDashboardClient:
        # One attempt per request: the poller's own backoff decides when to try again.
        return RayDashboardClient.for_cluster(self._http, template=self.settings.dashboard_url_template,
                                              namespace=namespace, cluster=cluster,
                                              timeouts=self.settings.timeouts(), get_attempts=1)

    def proxy(self, want: ClusterWant, pod: str, ip: str, port: int) -> RayHttpProxyClient:
        base = self.settings.proxy_url_template.format(namespace=want.namespace, cluster=want.cluster,
                                                       pod=pod, pod_ip=ip, port=port)
        return RayHttpProxyClient(self._http, base_url=base, timeout_s=self.settings.read_timeout_s)

    # --- one round --------------------------------------------------------------------------------
    async def read(self, want: ClusterWant, plan: PollPlan) -> RoundResult:
        """Run `plan`'s requests one after another. A head that refuses or times out is not asked
        anything else this round; garbage and 5xx are faults of one request only."""
        client = self.client(want.namespace, want.cluster)
        deleted = self.deleted_jobs[(want.namespace, want.cluster)]
        answered = failed = down = False
        jobs: dict[str, JobObservation] = {}
        absent: set[str] = set()
        serve = None
        proxies: dict[str, bool] = {}
        if plan.jobs is not None:
            self.requests += 1
            try:
                if plan.jobs.job_id is not None:
                    job_id = plan.jobs.job_id
                    details = await client.get_job_info(job_id)
                    jobs[job_id] = job_observation(job_id, details, deleted_by_us=job_id in deleted)
                else:
                    listing = jobs_by_submission_id(await client.list_jobs())
                    for job_id in plan.jobs.declared:
                        if job_id in listing:
                            jobs[job_id] = job_observation(job_id, listing[job_id],
                                                           deleted_by_us=job_id in deleted)
                        else:
                            absent.add(job_id)
                answered = True
            except JobNotFound:
                answered = True
                absent.add(plan.jobs.declared[0])
            except DashboardError as exc:
                answered, failed = answered or isinstance(exc, DashboardRequestError), True
                down = type(exc) is DashboardUnreachable and exc.status_code is None
                self._log_fault(want, exc)
        if plan.serve and not down:
            self.requests += 1
            try:
                serve = serve_observation(await client.get_serve_details())
                answered = True
            except DashboardError as exc:
                answered, failed = answered or isinstance(exc, DashboardRequestError), True
                down = type(exc) is DashboardUnreachable and exc.status_code is None
                self._log_fault(want, exc)
        if not down:
            for request in plan.proxies:
                t = request.target
                self.requests += 1
                proxies[t.pod] = await self.proxy(want, t.pod, t.ip, t.port).is_healthy()
        return RoundResult(answered=answered, failed=failed, jobs=jobs, jobs_absent=frozenset(absent),
                           serve_apps=serve, proxy_healthy=proxies)

    @staticmethod
    def _log_fault(want: ClusterWant, exc: DashboardError) -> None:
        level = logging.INFO if isinstance(exc, DashboardTransientError) else logging.WARNING
        log.log(level, "dashboard fault; keeping the last observation",
                extra={"cluster": f"{want.namespace}/{want.cluster}", "error": str(exc)[:200]})

    async def poll(self, want: ClusterWant, plan: PollPlan, *, reason: str) -> int:
        """One round under the head's lock: read, merge, publish if changed. Returns the cluster's
        current observation sequence (0 if none was ever published)."""
        key = (want.namespace, want.cluster)
        async with self.locks[key]:
            read_at = time.monotonic()
            result = await self.read(want, plan)
            state = self.states.get(key, PollState())
            previous_success = state.last_success_at
            state = after_round(state, want, now=time.monotonic(), failed=result.failed, plan=plan)
            self.states[key] = state
            return await self.observe(want, result, failures=state.failures, reason=reason,
                                      previous_success=previous_success, read_at=read_at)

    async def observe(self, want: ClusterWant, result: RoundResult, *, failures: int, reason: str,
                      previous_success: float | None, read_at: float) -> int:
        """Merge a read into the observation; publish and trigger the owners only if it changed
        (and then the poll state learns that a read at `read_at` showed a change)."""
        key = (want.namespace, want.cluster)
        previous, seq = self.view.observation(*key)
        current = merge_round(previous, want, result, failures=failures, settings=self.settings.poll())
        parts = changed_parts(previous, current) if current != previous else []
        if parts:
            seq = await self.publish(current)
            self.states[key] = after_change(self.states.get(key, PollState()), read_at=read_at)
            self._record_lag(previous, current, previous_success)
            log.info("observation changed", extra={"cluster": f"{want.namespace}/{want.cluster}",
                                                   "parts": parts, "seq": seq, "reason": reason})
            self.owe(key, seq, f"dashboard: {','.join(parts)} changed", want.owners)
        await self.pay(key)
        return seq

    def owe(self, key: ClusterKey, seq: int, cause: str, owners: tuple[Owner, ...]) -> None:
        """Owners to trigger for observation `seq` (still owed ones of an older seq included: the
        newer sequence covers what they had not been told)."""
        _, _, before = self.owed.get(key, (0, "", ()))
        merged = before + tuple(o for o in owners if o not in before)
        if merged:
            self.owed[key] = (seq, cause, merged)

    def owe_recent(self, since: datetime) -> int:
        """At takeover: owe the owners of every observation published since `since` a trigger
        again, since the previous leader may have died between an observation and its triggers
        (triggers are "look again": one too many costs a reconcile, one too few a stuck job)."""
        wants, owed = self.view.wants(), 0
        for key, seq in self.view.published_since(since):
            want = wants.get(key)
            if want is not None and want.owners:
                self.owe(key, seq, "dashboard: observation published before a takeover", want.owners)
                owed += 1
        return owed

    async def pay(self, key: ClusterKey) -> None:
        """Publish the triggers owed for one cluster; raises (keeping the rest owed) on a NATS error."""
        while key in self.owed:
            seq, cause, owners = self.owed[key]
            owner = owners[0]
            await publish_trigger(self._js, controller=s.Controller(owner.controller),
                                  key=ObjectKey(namespace=owner.namespace, name=owner.name),
                                  kind=owner.kind, cause=cause, objects_seq=seq, cause_kind=DASHBOARD_KIND,
                                  partitions=self.settings.partitions)
            if self.owed.get(key) == (seq, cause, owners):
                if len(owners) > 1:
                    self.owed[key] = (seq, cause, owners[1:])
                else:
                    del self.owed[key]

    async def publish(self, obs: ClusterObservation) -> int:
        envelope = DashboardObservation(key=ObjectKey(namespace=obs.namespace, name=obs.cluster),
                                        kind=s.Kind.RAYCLUSTER.value, observation=obs,
                                        observed_at=datetime.now(UTC))
        seq = await publish_dashboard_observation(self._js, envelope)
        self.view.record_observation(obs, seq, observed_at=envelope.observed_at)
        self.published += 1
        return seq

    @staticmethod
    def _record_lag(previous: ClusterObservation | None, current: ClusterObservation,
                    previous_success: float | None) -> None:
        wall_ms = time.time() * 1000
        for job in newly_ended_jobs(previous, current):
            if job.end_time_ms:
                DASHBOARD_OBSERVATION_LAG.labels(part="job_end").observe(
                    max(0.0, (wall_ms - job.end_time_ms) / 1000))
        if previous is not None and previous_success is not None:
            DASHBOARD_OBSERVATION_LAG.labels(part="change").observe(
                max(0.0, time.monotonic() - previous_success))
