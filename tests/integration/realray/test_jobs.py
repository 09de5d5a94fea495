"""The dashboard client and the log tail against a real Ray 2.60 head: submit, status, logs, stop,
delete, and the log-tail WebSocket's close after the job's end (whose lag the simulator copies:
ClusterSettings.log_tail_close_lag_s)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
import pytest

from raybus.adapters.dashboard import JobNotFound, JobNotTerminal, RayDashboardClient
from raybus.adapters.dashboard_models import JobDetails, JobStatus, JobSubmitRequest
from raybus.adapters.dashboard_tail import open_log_tail
from raybus_sim.dashboard import ClusterSettings

from .conftest import RayHead

pytestmark = pytest.mark.integration
T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T | None]], *, timeout: float = 120) -> T:
    import asyncio
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        await asyncio.sleep(0.2)


async def _status(dashboard: RayDashboardClient, job_id: str, *wanted: JobStatus) -> JobDetails:
    async def probe() -> JobDetails | None:
        info = await dashboard.get_job_info(job_id)
        return info if info.status in wanted else None

    return await eventually(probe)


def _id() -> str:
    return f"realray-{uuid.uuid4().hex[:8]}"


async def test_submit_status_logs_delete(dashboard: RayDashboardClient) -> None:
    job_id = _id()
    submitted = await dashboard.submit_job(JobSubmitRequest(entrypoint='python -c "print(6 * 7)"',
                                                            submission_id=job_id))
    assert submitted == job_id
    info = await _status(dashboard, job_id, JobStatus.SUCCEEDED, JobStatus.FAILED)
    assert info.status is JobStatus.SUCCEEDED, info.message
    assert info.end_time and info.start_time and info.end_time >= info.start_time
    assert "42" in (await dashboard.get_job_log(job_id)).splitlines()
    assert job_id in {j.submission_id for j in await dashboard.list_jobs()}
    assert await dashboard.stop_job(job_id) is False  # already terminal

    async def gone() -> bool:
        # A job deleted within seconds of its end can come back as the supervisor's FAILED ghost
        # (README §3): delete that too, as the poller does.
        try:
            info = await dashboard.get_job_info(job_id)
        except JobNotFound:
            return True
        if info.status.is_terminal():
            await dashboard.delete_job(job_id)
        return False

    await dashboard.delete_job(job_id)
    await eventually(gone, timeout=60)


async def test_stop_a_running_job(dashboard: RayDashboardClient) -> None:
    job_id = _id()
    await dashboard.submit_job(JobSubmitRequest(entrypoint="sleep 120", submission_id=job_id))
    await _status(dashboard, job_id, JobStatus.RUNNING)
    with pytest.raises(JobNotTerminal):
        await dashboard.delete_job(job_id)
    assert await dashboard.stop_job(job_id) is True
    info = await _status(dashboard, job_id, JobStatus.STOPPED, JobStatus.FAILED, JobStatus.SUCCEEDED)
    assert info.status is JobStatus.STOPPED
    await dashboard.delete_job(job_id)


async def test_unknown_job_is_not_found(dashboard: RayDashboardClient, ray_head: RayHead) -> None:
    with pytest.raises(JobNotFound):
        await dashboard.get_job_info("realray-no-such-job")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(JobNotFound):
            await open_log_tail(session, base_url=ray_head.dashboard, job_id="realray-no-such-job",
                                connect_timeout_s=10)


async def test_log_tail_closes_a_few_seconds_after_the_job_ends(
        dashboard: RayDashboardClient, ray_head: RayHead) -> None:
    """The head closes the tail cleanly once it sees the job terminal: measured here as close time
    minus the job's end_time, the lag the simulator's default `log_tail_close_lag_s` copies."""
    job_id = _id()
    await dashboard.submit_job(JobSubmitRequest(
        entrypoint="python -c \"import time; print('tail-me', flush=True); time.sleep(2)\"", submission_id=job_id))
    await _status(dashboard, job_id, JobStatus.RUNNING)
    async with aiohttp.ClientSession() as session:
        tail = await open_log_tail(session, base_url=ray_head.dashboard, job_id=job_id, connect_timeout_s=10)
        end = await tail.wait_closed()
        closed_at = time.time()
    assert end.clean and end.frames >= 1, end
    info = await dashboard.get_job_info(job_id)
    assert info.status is JobStatus.SUCCEEDED and info.end_time is not None
    lag = closed_at - info.end_time / 1000
    print(f"\nlog-tail close lag on the real head: {lag:.2f} s after end_time")
    assert 0 < lag < 10, lag
    # The simulator's default is within a second of what this head does.
    assert abs(ClusterSettings().log_tail_close_lag_s - lag) < 1.5, lag
    await dashboard.delete_job(job_id)
