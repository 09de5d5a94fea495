"""Log tail streams of followed jobs: which to hold open, and when (pure).

Follow streams (`DashboardInterest.follow_jobs`, HTTPMode/InteractiveMode). K8sJobMode and
SidecarMode learn of a job's end from Kubernetes: the submitter container runs `ray job submit`,
which follows the job's log tail (`GET /api/jobs/<id>/logs/tail`, a WebSocket the head closes once
the job is terminal) and exits with it. The other modes have no such container, so the poller
holds that same stream itself: one passive connection per followed job, opened (a single
request, under the head's lock like every other) once the job is observed PENDING/RUNNING, never
for a terminal, ghost or unobserved job (a not-yet-submitted job would be a 404). When it ends,
cleanly or not, the cluster is read at once (a `follow/<job>=<n>` poll_now token), and a new
stream for the same job waits `next_delay(ends)`: the ends in a row, reset by a stream that lived
`backoff_cap_s`, so a head or proxy that keeps dropping it costs at most one stream + one read per
backoff step. A followed job with a stream open does not need the "just started" fast cadence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from raybus.decisions.dashboard import next_delay
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.decisions.dashboard_poll import TERMINAL_JOB, ClusterWant, PollSettings


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class FollowState(_Frozen):
    """One followed job's stream history (monotonic seconds)."""

    ends: int = 0  # streams that ended in a row without one living `backoff_cap_s`
    retry_at: float | None = None  # no new stream before this


class FollowPlan(_Frozen):
    open: tuple[str, ...] = ()  # start a stream for these jobs
    close: tuple[str, ...] = ()  # streams no longer wanted (job terminal, undeclared)
    at: float = math.inf  # decide again at the latest (a backoff running out)


def decide_follows(want: ClusterWant | None, observation: ClusterObservation | None, *,
                   streaming: frozenset[str], follows: Mapping[str, FollowState], now: float,
                   head_ready: bool | None = None) -> FollowPlan:
    """Which log tail streams of one cluster to open or close. A stream is wanted for a followed
    job observed PENDING/RUNNING (not a ghost): never for an unobserved job (the head would answer
    404 before the submission lands) nor for a terminal one (nothing left to signal)."""
    wanted: set[str] = set()
    for job_id in want.follow if want is not None else ():
        job = observation.jobs.get(job_id) if observation is not None else None
        if job is not None and not job.ghost and job.status not in TERMINAL_JOB:
            wanted.add(job_id)
    opening: list[str] = []
    at = math.inf
    if head_ready is not False:  # a head Pod that is not Ready is not there to stream from
        for job_id in sorted(wanted - streaming):
            retry_at = follows[job_id].retry_at if job_id in follows else None
            if retry_at is not None and retry_at > now:
                at = min(at, retry_at)
            else:
                opening.append(job_id)
    return FollowPlan(open=tuple(opening), close=tuple(sorted(streaming - wanted)), at=at)


def after_follow_end(state: FollowState, *, opened_at: float, now: float,
                     settings: PollSettings) -> FollowState:
    """A stream ended (closed by the head or broken): the next one for this job waits a backoff
    that grows while streams keep ending quickly."""
    ends = 1 if now - opened_at >= settings.backoff_cap_s else state.ends + 1
    delay = next_delay(ends, base_s=settings.fast_interval_s, cap_s=settings.backoff_cap_s)
    return FollowState(ends=ends, retry_at=now + delay)


def with_follow_ends(want: ClusterWant, ends: Mapping[str, int]) -> ClusterWant:
    """A followed job's stream that ended asks for a read at once, exactly like an owner's
    poll_now token (so a round that started before the end does not count as covering it)."""
    tokens = {f"follow/{job_id}={n}" for job_id, n in ends.items() if job_id in want.follow and n}
    if not tokens:
        return want
    return want.model_copy(update={"poll_now": want.poll_now | tokens})
