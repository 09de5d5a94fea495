"""Simulated heads push Ray's events, as a real Ray 2.60 head does when its Pod carries
RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR (raybus's head Pods do with RAYBUS_RAY_EVENTS_URL
/ _KEY set; raybus_sim.heads copies the address from the head Pod's Ray container).

Only what raybus reads is pushed: the job supervisor actor's ACTOR_LIFECYCLE_EVENT DEAD, in the
shape a real head sends (tests/unit/dashboard/ray260_pushed_events.json), `events_push_lag_s`
after the job's end_time (on a real head the supervisor dies 0.06-0.2 s after end_time, then the
GCS flush and the aggregator's send add up to 0.1 s each with raybus's 100 ms report interval). A
POST that fails is tried again on the next tick, as Ray's publisher retries forever.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

import aiohttp

from raybus_sim.dashboard.jobs import TERMINAL
from raybus_sim.dashboard.registry import ClusterState, DashboardRegistry

log = logging.getLogger(__name__)
SUPERVISOR_PREFIX = "_ray_internal_job_actor_"


def supervisor_dead_event(submission_id: str, *, at: float, session: str) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    actor_id = base64.b64encode(submission_id.encode()[:16].ljust(16, b"\0")).decode()
    return {
        "eventId": base64.b64encode(f"sim-{submission_id}".encode()).decode(), "sourceType": "GCS",
        "eventType": "ACTOR_LIFECYCLE_EVENT", "timestamp": stamp, "severity": "INFO", "message": "",
        "sessionName": session, "nodeId": "",
        "actorLifecycleEvent": {"actorId": actor_id, "stateTransitions": [{
            "state": "DEAD", "timestamp": stamp,
            "deathCause": {"actorDiedErrorContext": {
                "errorMessage": "The actor is dead because its worker process has died. Worker exit type: "
                                "INTENDED_USER_EXIT Worker exit detail: Worker exits by an user request. "
                                "Worker exits with an exit code 0. exit_actor() is called.",
                "name": SUPERVISOR_PREFIX + submission_id, "rayNamespace": "SUPERVISOR_ACTOR_RAY_NAMESPACE",
                "className": "JobSupervisor", "actorId": actor_id, "neverStarted": False,
                "reason": "WORKER_DIED"}},
        }]},
    }


class RayEventPusher:
    def __init__(self, registry: DashboardRegistry, *, tick_s: float = 0.05) -> None:
        self._registry = registry
        self._tick_s = tick_s
        self._pushed: set[tuple[str, str, str, str]] = set()  # (ns, cluster, session, submission id)
        self.posts = 0

    def _due(self, state: ClusterState, now: float) -> list[dict[str, Any]]:
        events = []
        for job in list(state.jobs.jobs.values()):
            if job.submission_id is None or job.job_type != "SUBMISSION" or job.ghost_at is not None:
                continue
            status, end = job.status_at(now)
            key = (state.namespace, state.name, state.session, job.submission_id)
            if status in TERMINAL and end is not None and end + state.settings.events_push_lag_s <= now \
                    and key not in self._pushed:
                events.append(supervisor_dead_event(job.submission_id, at=end, session=state.session))
        return events

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as http:
            while True:
                await asyncio.sleep(self._tick_s)
                now = self._registry.clock()
                for state in self._registry.clusters():
                    if not (state.up and state.events_export_addr):
                        continue
                    events = self._due(state, now)
                    if events and await self._post(http, state.events_export_addr, events):
                        for event in events:
                            name = event["actorLifecycleEvent"]["stateTransitions"][0]["deathCause"][
                                "actorDiedErrorContext"]["name"]
                            self._pushed.add((state.namespace, state.name, state.session,
                                              name[len(SUPERVISOR_PREFIX):]))

    async def _post(self, http: aiohttp.ClientSession, url: str, events: list[dict[str, Any]]) -> bool:
        try:
            async with http.post(url, json=events) as resp:
                self.posts += 1
                return resp.status < 300
        except (aiohttp.ClientError, OSError, TimeoutError):
            return False


async def start_pusher(app: Any, registry: DashboardRegistry) -> asyncio.Task[None]:
    task = asyncio.create_task(RayEventPusher(registry).run())

    async def _stop(_: Any) -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.on_cleanup.append(_stop)
    return task
