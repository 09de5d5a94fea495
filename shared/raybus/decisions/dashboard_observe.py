"""One poll round's answers -> the cluster's next observation (pure).

Rules (a fault never produces a wrong state):
- A part that could not be read this round (timeout, 5xx, garbage, HTML 502) keeps its last known
  value; only a definite answer changes it. A 404 on a declared job, or its absence from the full
  job list, is definite: the job moves to `jobs_missing`.
- `reachable` turns False only after `unreachable_after` failed rounds in a row (one glitch is not
  worth two observations), and True as soon as the dashboard answers anything.
- The ghost record real Ray re-creates after DELETE of a job (FAILED/JOB_SUPERVISOR_ACTOR_DIED,
  ../shared/ray-dashboard/README.md §3) is never the job's status: a job last seen for real keeps
  that observation, flagged `ghost=True`; a job never seen for real (or seen missing) stays in
  `jobs_missing` only.
- Only what is declared is reported: undeclared jobs, Serve when no one wants it, and proxies of
  pods no longer declared are dropped.
The poller publishes the result only when it differs from the last published observation.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    JobObservation,
    ServeAppObservation,
)
from raybus.decisions.dashboard_poll import TERMINAL_JOB, ClusterWant, PollSettings


class RoundResult(BaseModel):
    """What one round read. Absent keys / None mean "not read this round" (skipped or failed)."""

    model_config = ConfigDict(frozen=True)
    answered: bool = False  # the dashboard answered at least one request (any HTTP status)
    failed: bool = False  # at least one request got no usable answer
    jobs: dict[str, JobObservation] = Field(default_factory=dict)  # declared jobs found
    jobs_absent: frozenset[str] = frozenset()  # declared jobs definitely not there
    serve_apps: dict[str, ServeAppObservation] | None = None
    proxy_healthy: dict[str, bool] = Field(default_factory=dict)


def _job(job_id: str, read: JobObservation | None, previous: ClusterObservation | None,
         absent: bool) -> JobObservation | None:
    """The job's observation after this round; None = missing."""
    before = previous.jobs.get(job_id) if previous else None
    if read is None and not absent:
        return before  # not read (terminal, skipped, or a fault): keep the last known
    if absent or read is None:
        return None
    if read.ghost:
        # Keep the real last status if we ever had one; a ghost alone says only "deleted".
        if before is not None:
            return before if before.ghost else before.model_copy(update={"ghost": True})
        return None
    return read


def merge_round(previous: ClusterObservation | None, want: ClusterWant, result: RoundResult, *,
                failures: int, settings: PollSettings) -> ClusterObservation:
    """`failures` counts failed rounds in a row including this one (0 if this one succeeded)."""
    jobs: dict[str, JobObservation] = {}
    missing: list[str] = []
    for job_id in want.jobs:
        absent = job_id in result.jobs_absent
        read = result.jobs.get(job_id)
        job = _job(job_id, read, previous, absent)
        if job is not None:
            jobs[job_id] = job
        elif absent or (read is not None and read.ghost) or (
                previous is not None and job_id in previous.jobs_missing):
            missing.append(job_id)
    serve: dict[str, ServeAppObservation] | None = None
    if want.serve:
        serve = result.serve_apps if result.serve_apps is not None else (
            previous.serve_apps if previous else None)
    proxies: dict[str, bool] = {}
    for target in want.proxies:
        if target.pod in result.proxy_healthy:
            proxies[target.pod] = result.proxy_healthy[target.pod]
        elif previous is not None and target.pod in previous.proxy_healthy:
            proxies[target.pod] = previous.proxy_healthy[target.pod]
    if result.answered:
        reachable = True
    elif failures >= settings.unreachable_after:
        reachable = False
    else:
        reachable = previous.reachable if previous else False
    return ClusterObservation(namespace=want.namespace, cluster=want.cluster, reachable=reachable,
                              jobs=jobs, jobs_missing=sorted(missing), serve_apps=serve,
                              proxy_healthy=proxies)


def changed_parts(previous: ClusterObservation | None, current: ClusterObservation) -> list[str]:
    """Which parts differ (for logs and the lag metric); empty = nothing to publish."""
    if previous is None:
        return ["new"]
    parts = []
    for name in ("reachable", "jobs", "jobs_missing", "serve_apps", "proxy_healthy"):
        if getattr(previous, name) != getattr(current, name):
            parts.append(name)
    return parts


def newly_ended_jobs(previous: ClusterObservation | None,
                     current: ClusterObservation) -> list[JobObservation]:
    """Jobs that are terminal now and were not (or not seen) before: their end_time gives the
    exact observation lag."""
    out = []
    for job_id, job in current.jobs.items():
        before = previous.jobs.get(job_id) if previous else None
        if job.status in TERMINAL_JOB and not job.ghost and (
                before is None or before.status not in TERMINAL_JOB):
            out.append(job)
    return out
