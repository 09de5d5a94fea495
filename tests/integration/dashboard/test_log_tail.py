"""Log tail streams (`GET /api/jobs/<id>/logs/tail`, a WebSocket): the simulated head closes it
when the job ends, the client reports how it ended, and the dashboard-poller uses the end of a
followed job's stream as its job-end signal (HTTPMode/InteractiveMode) instead of polling."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from nats.aio.client import Client as NATS

from dashboard_poller.app import DashboardPollerService
from raybus.adapters.dashboard import DashboardBadRequest, DashboardUnreachable, JobNotFound
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.adapters.dashboard_tail import open_log_tail
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.conftest import Sim
from tests.integration.dashboard.poller_kit import (
    CLUSTER,
    NS,
    ObservationTap,
    Reconciler,
    requests,
    start_poller,
    until,
)

pytestmark = pytest.mark.integration
TAIL = "GET /api/jobs/{id}/logs/tail"
BASE = f"/{NS}/{CLUSTER}"


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def _submit(sim: Sim, job_id: str, entrypoint: str = "sleep 900") -> None:
    await sim.client().submit_job(JobSubmitRequest(entrypoint=entrypoint, submission_id=job_id))


def _base(sim: Sim) -> str:
    return sim.root + BASE


# --- the simulated head and the client ----------------------------------------------------------------
async def test_the_head_closes_the_stream_when_the_job_ends(sim: Sim, session: aiohttp.ClientSession) -> None:
    await sim.control("PUT", f"{BASE}/settings", {"log_tail_interval_s": 0.1})
    await _submit(sim, "j")
    tail = await open_log_tail(session, base_url=_base(sim), job_id="j")
    await sim.control("PUT", f"{BASE}/jobs/j/plan", {"finish_now": True})
    finished = time.monotonic()
    end = await tail.wait_closed()
    assert end.clean and end.code == 1000 and end.frames >= 1  # the log text, then the close frame
    assert time.monotonic() - finished < 2.0
    counts = await requests(sim)
    assert counts[TAIL] == 1 and counts["total"] == 2  # one request for the whole stream (+ the POST)


async def test_the_stream_closes_as_late_after_the_end_as_on_a_real_head(
        sim: Sim, session: aiohttp.ClientSession) -> None:
    """A real Ray 2.60 head closes the tail 2.9-3.9 s after the job's end_time
    (tests/integration/realray measure it); the simulator waits `log_tail_close_lag_s`."""
    await sim.control("PUT", f"{BASE}/settings", {"log_tail_interval_s": 0.1, "log_tail_close_lag_s": 1.5})
    await _submit(sim, "j")
    tail = await open_log_tail(session, base_url=_base(sim), job_id="j")
    await sim.control("PUT", f"{BASE}/jobs/j/plan", {"finish_now": True})
    finished = time.monotonic()
    end = await tail.wait_closed()
    assert end.clean and end.code == 1000
    assert 1.4 <= time.monotonic() - finished < 3.0
    info = await sim.client().get_job_info("j")
    assert info.status == "SUCCEEDED" and info.end_time is not None  # readable before the close


@pytest.mark.parametrize("how", ["stop", "already_terminal"])
async def test_stopped_and_already_terminal_jobs_close_cleanly(sim: Sim, session: aiohttp.ClientSession,
                                                               how: str) -> None:
    await _submit(sim, "j", "sleep 900" if how == "stop" else "echo hi")
    if how == "stop":
        await sim.client().stop_job("j")
    else:
        await until(lambda: _terminal(sim, "j"), what="j ended")
    end = await (await open_log_tail(session, base_url=_base(sim), job_id="j")).wait_closed()
    assert end.clean


async def _terminal(sim: Sim, job_id: str) -> bool:
    return (await sim.client().get_job_info(job_id)).status in ("SUCCEEDED", "FAILED", "STOPPED")


async def test_handshake_answers_are_typed(sim: Sim, session: aiohttp.ClientSession) -> None:
    with pytest.raises(JobNotFound):  # real Ray: a plain 404 before any upgrade
        await open_log_tail(session, base_url=_base(sim), job_id="nope")
    driver = (await sim.control("POST", f"{BASE}/drivers", {"running_s": None})).json()["job_id"]
    with pytest.raises(DashboardBadRequest):  # "Can only get logs of submission type jobs"
        await open_log_tail(session, base_url=_base(sim), job_id=driver)
    await _submit(sim, "j")
    await sim.control("POST", f"{BASE}/faults", {"kind": "html_502", "count": 1, "path_contains": "/logs/tail"})
    with pytest.raises(DashboardUnreachable):
        await open_log_tail(session, base_url=_base(sim), job_id="j")
    sim.registry.head_down(NS, CLUSTER)
    with pytest.raises(DashboardUnreachable):
        await open_log_tail(session, base_url=_base(sim), job_id="j")


async def test_a_head_going_away_breaks_the_stream(sim: Sim, session: aiohttp.ClientSession) -> None:
    await sim.control("PUT", f"{BASE}/settings", {"log_tail_interval_s": 0.1})
    await _submit(sim, "j")
    tail = await open_log_tail(session, base_url=_base(sim), job_id="j")
    sim.registry.head_down(NS, CLUSTER)
    end = await tail.wait_closed()
    assert not end.clean  # no close frame: the connection dropped


# --- the dashboard-poller following a job ---------------------------------------------------------------
def _status(tap: ObservationTap, job_id: str, status: str) -> bool:
    last = tap.last()
    return last is not None and job_id in last.observation.jobs and last.observation.jobs[job_id].status == status


async def _handshakes(sim: Sim, n: int) -> bool:
    return (await requests(sim)).get(TAIL, 0) >= n


async def _streams(poller: DashboardPollerService, n: int) -> bool:
    return poller.follower is not None and poller.follower.open_streams == n


async def test_a_followed_job_end_is_read_at_once_without_polling(
        nats_server: NatsServer, sim: Sim, nc: NATS, tap: ObservationTap) -> None:
    """The safety net is 60 s: only the stream's end can make the poller read the job in time."""
    await sim.control("PUT", f"{BASE}/settings", {"log_tail_interval_s": 0.2})
    await _submit(sim, "j")
    owner = Reconciler(nc)
    await owner.want(jobs=["j"], follow_jobs=["j"])
    poller = await start_poller(nats_server.url, sim, slow_interval_s=60.0, fresh_window_s=60.0)
    try:
        await until(lambda: _async(_status(tap, "j", "RUNNING")), what="j RUNNING observed")
        await until(lambda: _streams(poller, 1), what="the stream open")
        before = await requests(sim)
        await sim.control("PUT", f"{BASE}/jobs/j/plan", {"finish_now": True})
        finished = time.monotonic()
        await until(lambda: _async(_status(tap, "j", "SUCCEEDED")), timeout=5, what="j SUCCEEDED observed")
        assert time.monotonic() - finished < 3.0
        await until(lambda: _streams(poller, 0), what="no stream for a terminal job")
        after = await requests(sim)
        assert after[TAIL] == 1  # one stream for the job's whole life, never reopened once terminal
        assert after["total"] - before["total"] <= 2  # the read the end caused (+ at most one more)
        # "just started" does not keep a streamed job at the fast cadence: a handful of reads in all
        assert after.get("GET /api/jobs/{id}", 0) <= 4, after
    finally:
        await poller.stop()


async def test_stream_failures_back_off_and_the_end_is_still_seen(
        nats_server: NatsServer, sim: Sim, nc: NATS, tap: ObservationTap) -> None:
    await sim.control("PUT", f"{BASE}/settings", {"log_tail_interval_s": 0.2})
    await _submit(sim, "j")
    await sim.control("POST", f"{BASE}/faults", {"kind": "html_502", "count": 3, "path_contains": "/logs/tail"})
    owner = Reconciler(nc)
    await owner.want(jobs=["j"], follow_jobs=["j"])
    started = time.monotonic()
    # no "just started" fast cadence while the stream is refused: every read here is one an end asked for
    poller = await start_poller(nats_server.url, sim, slow_interval_s=60.0, fresh_window_s=0.0)
    try:
        # a stream task counts as open from its handshake on, so wait for the fourth handshake itself
        await until(lambda: _handshakes(sim, 4), timeout=20, what="the fourth handshake after three refusals")
        # FAST_POLLER: fast 0.2 s, cap 1.6 s -> waits of 0.4 + 0.8 + 1.6 s between the attempts
        assert time.monotonic() - started >= 2.5
        await until(lambda: _streams(poller, 1), timeout=5, what="the stream open after the faults")
        counts = await requests(sim)
        assert counts[TAIL] == 4  # three refused handshakes, then the stream
        assert counts.get("GET /api/jobs/{id}", 0) <= 1 + 3  # the first read + one per failed handshake
        await sim.control("PUT", f"{BASE}/jobs/j/plan", {"finish_now": True})
        await until(lambda: _async(_status(tap, "j", "SUCCEEDED")), timeout=5, what="j SUCCEEDED observed")
    finally:
        await poller.stop()


async def test_a_head_restart_breaks_the_stream_and_it_is_opened_again(
        nats_server: NatsServer, sim: Sim, nc: NATS, tap: ObservationTap) -> None:
    await sim.control("PUT", f"{BASE}/settings", {"log_tail_interval_s": 0.1})
    await _submit(sim, "j")
    owner = Reconciler(nc)
    await owner.want(jobs=["j"], follow_jobs=["j"])
    poller = await start_poller(nats_server.url, sim, slow_interval_s=60.0)
    try:
        await until(lambda: _streams(poller, 1), what="the stream open")
        sim.registry.head_down(NS, CLUSTER)
        await until(lambda: _streams(poller, 0), what="the stream broken")
        await until(lambda: _async(_unreachable(tap)), what="the read at once found the head down")
        sim.registry.head_up(NS, CLUSTER, keep_state=True)  # GCS fault tolerance: the job survives
        await until(lambda: _streams(poller, 1), timeout=20, what="the stream open again")
        await sim.control("PUT", f"{BASE}/jobs/j/plan", {"finish_now": True})
        await until(lambda: _async(_status(tap, "j", "SUCCEEDED")), timeout=5, what="j SUCCEEDED observed")
    finally:
        await poller.stop()


def _unreachable(tap: ObservationTap) -> bool:
    last = tap.last()
    return last is not None and not last.observation.reachable


async def _async(value: bool) -> bool:
    return value
