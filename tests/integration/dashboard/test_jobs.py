"""Job lifecycle over real HTTP: RayDashboardClient -> simulated head."""

from __future__ import annotations

import asyncio

import pytest

from raybus.adapters.dashboard import JobAlreadyExists, JobNotFound, JobNotTerminal, RayDashboardClient
from raybus.adapters.dashboard_models import JobDetails, JobStatus, JobSubmitRequest, JobType
from tests.integration.dashboard.conftest import Sim

pytestmark = pytest.mark.integration


async def wait_terminal(client: RayDashboardClient, job_id: str, *, timeout: float = 5.0) -> JobDetails:
    seen: list[JobStatus] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        info = await client.get_job_info(job_id)
        seen.append(info.status)
        if info.status.is_terminal:
            return info
        await asyncio.sleep(0.02)
    raise AssertionError(f"{job_id} not terminal, saw {seen}")


async def test_job_runs_to_succeeded(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"job_pending_s": 0.5})  # wide enough to see PENDING
    client = sim.client()
    sid = await client.submit_job(JobSubmitRequest(entrypoint='python -c "print(1)"', submission_id="ok-1"))
    assert sid == "ok-1"
    first = await client.get_job_info("ok-1")
    assert first.status is JobStatus.PENDING and first.type is JobType.SUBMISSION and first.end_time is None
    done = await wait_terminal(client, "ok-1")
    assert done.status is JobStatus.SUCCEEDED and done.driver_exit_code == 0
    assert done.message == "Job finished successfully."
    assert done.start_time is not None and done.end_time is not None and done.end_time >= done.start_time
    assert done.driver_node_id is not None and done.driver_agent_http_address is not None
    assert (await client.get_job_log("ok-1")).endswith(
        'Running entrypoint for job ok-1: python -c "print(1)"\n1\n'
    )
    assert [j.submission_id for j in await client.list_jobs()] == ["ok-1"]


async def test_job_fails_with_exit_code(sim: Sim) -> None:
    client = sim.client()
    await client.submit_job(
        JobSubmitRequest(entrypoint='python -c "import sys; sys.exit(3)"', submission_id="f")
    )
    done = await wait_terminal(client, "f")
    assert done.status is JobStatus.FAILED and done.driver_exit_code == 3
    assert done.error_type == "JOB_ENTRYPOINT_COMMAND_ERROR"
    assert done.message is not None and done.message.startswith(
        "Job entrypoint command failed with exit code 3"
    )


async def test_control_api_plans_outcome_before_submission(sim: Sim) -> None:
    await sim.control(
        "PUT", "/ns/rc/jobs/planned/plan", {"outcome": "FAILED", "exit_code": 7, "running_s": 0.1}
    )
    client = sim.client()
    await client.submit_job(JobSubmitRequest(entrypoint="echo fine", submission_id="planned"))
    done = await wait_terminal(client, "planned")
    assert done.status is JobStatus.FAILED and done.driver_exit_code == 7


async def test_script_plans_apply_to_entrypoints_naming_the_script_in_that_namespace(sim: Sim) -> None:
    """What a mounted script does, told once per namespace, applies at every submission that runs
    it, on any cluster of the namespace and of no other."""
    await sim.control("PUT", "/ns/scripts", {"/home/ray/jobs/fail.py": {"outcome": "FAILED", "exit_code": 1}})
    client = sim.client()
    await client.submit_job(JobSubmitRequest(entrypoint="python /home/ray/jobs/fail.py", submission_id="f"))
    await client.submit_job(JobSubmitRequest(entrypoint="python /home/ray/jobs/ok.py", submission_id="ok"))
    failed, ok = await wait_terminal(client, "f"), await wait_terminal(client, "ok")
    assert failed.status is JobStatus.FAILED and failed.driver_exit_code == 1
    assert ok.status is JobStatus.SUCCEEDED
    await sim.control("POST", "/other/rc/head", {"up": True})
    other = sim.client(namespace="other")
    await other.submit_job(JobSubmitRequest(entrypoint="python /home/ray/jobs/fail.py", submission_id="f"))
    assert (await wait_terminal(other, "f")).status is JobStatus.SUCCEEDED


async def test_control_api_finishes_a_hanging_job(sim: Sim) -> None:
    client = sim.client()
    await client.submit_job(JobSubmitRequest(entrypoint="python train.py RAYBUS_SIM_HANG", submission_id="h"))
    await asyncio.sleep(0.3)
    assert (await client.get_job_info("h")).status is JobStatus.RUNNING
    await sim.control("PUT", "/ns/rc/jobs/h/plan", {"outcome": "SUCCEEDED", "finish_now": True})
    assert (await client.get_job_info("h")).status is JobStatus.SUCCEEDED


async def test_stop_then_delete(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"stop_delay_s": 0.5})
    client = sim.client()
    await client.submit_job(JobSubmitRequest(entrypoint="sleep 60", submission_id="long"))
    await asyncio.sleep(0.1)
    assert (await client.get_job_info("long")).status is JobStatus.RUNNING
    with pytest.raises(JobNotTerminal):  # 33_*: 500 "non-terminal state RUNNING"
        await client.delete_job("long")
    assert await client.stop_job("long") is True
    assert (await client.get_job_info("long")).status is JobStatus.RUNNING  # 35_*: not stopped at once
    stopped = await wait_terminal(client, "long")
    assert stopped.status is JobStatus.STOPPED and stopped.driver_exit_code is None
    assert await client.stop_job("long") is False  # 36_*
    await asyncio.sleep(0.6)  # past the ghost window: a clean delete (70-74)
    await client.delete_job("long")
    with pytest.raises(JobNotFound):
        await client.get_job_info("long")
    await asyncio.sleep(0.4)
    with pytest.raises(JobNotFound):
        await client.get_job_info("long")


async def test_deleted_job_comes_back_as_ghost(sim: Sim) -> None:
    """README §3: DELETE right after STOPPED -> 404, then a FAILED/JOB_SUPERVISOR_ACTOR_DIED ghost."""
    await sim.control("PUT", "/ns/rc/settings", {"ghost_window_s": 10, "ghost_delay_s": 1.0})
    client = sim.client()
    await client.submit_job(JobSubmitRequest(entrypoint="sleep 60", submission_id="test-job-long"))
    await asyncio.sleep(0.1)
    await client.stop_job("test-job-long")
    await wait_terminal(client, "test-job-long")
    await client.delete_job("test-job-long")
    with pytest.raises(JobNotFound):  # 39_*
        await client.get_job_info("test-job-long")
    with pytest.raises(JobNotFound):
        await client.delete_job("test-job-long")
    await asyncio.sleep(1.1)
    ghost = await client.get_job_info("test-job-long")  # 39b_*
    assert ghost.status is JobStatus.FAILED and ghost.is_supervisor_ghost
    assert ghost.error_type == "JOB_SUPERVISOR_ACTOR_DIED" and ghost.entrypoint == "Entrypoint not found."
    assert ghost.start_time is None and ghost.metadata is None and ghost.runtime_env is None
    assert ghost.message is not None and ghost.message.startswith("Job supervisor actor died: ")
    assert "test-job-long" in [j.submission_id for j in await client.list_jobs()]  # 39c_*
    await client.delete_job("test-job-long")  # re-deleting the ghost is clean
    await asyncio.sleep(1.1)
    with pytest.raises(JobNotFound):
        await client.get_job_info("test-job-long")


async def test_stop_while_pending(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"job_pending_s": 5})
    client = sim.client()
    await client.submit_job(JobSubmitRequest(entrypoint="sleep 5", submission_id="pend"))
    with pytest.raises(JobNotTerminal):  # 81_*
        await client.delete_job("pend")
    assert await client.stop_job("pend") is True  # 82_*
    assert (await wait_terminal(client, "pend")).status is JobStatus.STOPPED  # 83_*


async def test_duplicate_submission_id(sim: Sim) -> None:
    client = sim.client()
    request = JobSubmitRequest(entrypoint="echo hi", submission_id="dup", metadata={"owner": "raybus"})
    await client.submit_job(request)
    with pytest.raises(JobAlreadyExists):
        await client.submit_job(request)


async def test_auto_id_resources_message_and_hex_job_id(sim: Sim) -> None:
    await sim.control("PUT", "/ns/rc/settings", {"job_pending_s": 1.0})
    client = sim.client()
    sid = await client.submit_job(JobSubmitRequest(entrypoint="echo auto", entrypoint_num_cpus=0.5))
    assert sid.startswith("raysubmit_") and len(sid) == len("raysubmit_kA4KQMdnrVcaN7aY")
    pending = await client.get_job_info(sid)
    assert pending.message is not None and "waiting for resources" in pending.message  # 31_*
    await client.submit_job(
        JobSubmitRequest(entrypoint="python -c 'import ray; ray.init()'", submission_id="ri")
    )
    assert (await client.get_job_info("ri")).job_id is None  # null while PENDING (66_*)
    running = await wait_terminal(client, "ri")
    assert running.job_id is not None and running.driver_info is not None
    assert (await client.get_job_info(running.job_id)).submission_id == "ri"  # 68_*: by hex id


async def test_driver_entries_in_list(sim: Sim) -> None:
    created = (
        await sim.control("POST", "/ns/rc/drivers", {"entrypoint": "python d.py", "running_s": None})
    ).json()
    client = sim.client()
    jobs = await client.list_jobs()
    assert [(j.type, j.submission_id, j.job_id) for j in jobs] == [(JobType.DRIVER, None, created["job_id"])]
    driver = await client.get_job_info(created["job_id"])
    assert driver.end_time == 0 and driver.ended_at_ms is None and driver.message is None  # 201_*
