"""Simulated Ray Jobs: a job's state is derived lazily from the clock, never from a background task.

A job is planned at submission (pending for `pending_s`, running for `running_s`, then SUCCEEDED or
FAILED with `exit_code`); every GET computes the state at "now". That keeps many thousands of jobs
cheap and lets tests drive a fake clock. Entrypoint conventions (see `plan_from_entrypoint`):

* `sys.exit(N)` / `exit N`             -> FAILED, driver_exit_code N (N=0 means success)
* `time.sleep(S)` / `sleep S`          -> running for S seconds
* `ray.init(`                          -> job_id/driver_info are filled once RUNNING (README §3, 66_*)
* `RAYBUS_SIM_FAIL`                    -> FAILED with exit code 1
* `RAYBUS_SIM_HANG`                    -> RUNNING until stopped or re-planned via the control API
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from raybus_sim.dashboard import texts

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
NODE_ID = "1d5d05fe23e4a86ec359508d3476a0587506e5eada8c743f55aaa6a5"

_EXIT = re.compile(r"(?:sys\.exit\(|\bexit\s+)(\d+)")
_SLEEP = re.compile(r"(?:time\.sleep\(|\bsleep\s+)(\d+(?:\.\d+)?)")
_PRINT = re.compile(r"""print\((?:'([^']*)'|"([^"]*)"|(\d+))""")
_ECHO = re.compile(r"^echo\s+(.*)$")


@dataclass(kw_only=True)
class JobPlan:
    """How a job will evolve. `running_s=None` means it runs until stopped or re-planned."""

    pending_s: float
    running_s: float | None
    exit_code: int = 0
    calls_ray_init: bool = False


def plan_from_entrypoint(entrypoint: str, *, pending_s: float, running_s: float) -> JobPlan:
    exit_match = _EXIT.search(entrypoint)
    sleep_match = _SLEEP.search(entrypoint)
    code = int(exit_match.group(1)) if exit_match else 0
    if "RAYBUS_SIM_FAIL" in entrypoint:
        code = 1
    run: float | None = float(sleep_match.group(1)) if sleep_match else running_s
    if "RAYBUS_SIM_HANG" in entrypoint:
        run = None
    return JobPlan(
        pending_s=pending_s, running_s=run, exit_code=code, calls_ray_init="ray.init(" in entrypoint
    )


def _ms(t: float) -> int:
    return int(t * 1000)


def _stdout(entrypoint: str) -> str:
    match = _PRINT.search(entrypoint) or _ECHO.search(entrypoint)
    if match is None:
        return ""
    return next(g for g in match.groups() if g is not None) + "\n"


@dataclass(kw_only=True)
class SimJob:
    submission_id: str | None
    entrypoint: str
    submitted_at: float
    plan: JobPlan
    metadata: dict[str, Any] | None = None
    runtime_env: dict[str, Any] | None = None
    wants_resources: bool = False
    ray_job_id: str | None = None  # hex id like "03000000" (README §3)
    job_type: str = "SUBMISSION"
    stop_at: float | None = None  # when a requested stop takes effect
    ghost_at: float | None = None  # set on ghost records: when the supervisor died
    driver_pid: int = 13689

    def natural_end(self) -> float | None:
        if self.plan.running_s is None:
            return None
        return self.submitted_at + self.plan.pending_s + self.plan.running_s

    def status_at(self, now: float) -> tuple[str, float | None]:
        """(status, end time in seconds or None) as seen at `now`."""
        if self.ghost_at is not None:
            return "FAILED", self.ghost_at
        end = self.natural_end()
        if self.stop_at is not None and self.stop_at <= now and (end is None or self.stop_at < end):
            return "STOPPED", self.stop_at
        if end is not None and now >= end:
            return ("SUCCEEDED" if self.plan.exit_code == 0 else "FAILED"), end
        if now >= self.submitted_at + self.plan.pending_s:
            return "RUNNING", None
        return "PENDING", None

    def is_terminal(self, now: float) -> bool:
        return self.status_at(now)[0] in TERMINAL

    def logs(self, now: float) -> str:
        """12_job1_logs: runtime-env line, 'Running entrypoint ...', then the program's output."""
        stamp = datetime.fromtimestamp(self.submitted_at, UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:23]
        head = (
            f"{stamp}\tINFO job_manager.py:581 -- Runtime env is setting up.\n"
            f"Running entrypoint for job {self.submission_id}: {self.entrypoint}\n"
        )
        status, _ = self.status_at(now)
        if status == "PENDING":
            return head.split("\n", 1)[0] + "\n"
        return head + _stdout(self.entrypoint)

    def details(self, now: float) -> dict[str, Any]:
        """JobDetails with the exact key order of the captures (README §3 "field names")."""
        if self.ghost_at is not None:
            return self._ghost_details()
        status, end = self.status_at(now)
        started = status != "PENDING"
        if self.job_type == "DRIVER":
            message: str | None = None
        else:
            message = {
                "PENDING": texts.MSG_PENDING_RESOURCES if self.wants_resources else texts.MSG_PENDING,
                "RUNNING": texts.MSG_RUNNING,
                "SUCCEEDED": texts.MSG_SUCCEEDED,
                "STOPPED": texts.MSG_STOPPED,
                "FAILED": texts.MSG_FAILED_PREFIX.format(code=self.plan.exit_code) + self.logs(now),
            }[status]
        has_driver = started and (self.plan.calls_ray_init or self.job_type == "DRIVER")
        driver_info = (
            {"id": self.ray_job_id, "node_ip_address": texts.NODE_IP, "pid": str(self.driver_pid)}
            if has_driver
            else None
        )
        exit_code = None
        if status in ("SUCCEEDED", "FAILED") and self.job_type == "SUBMISSION":
            exit_code = self.plan.exit_code
        submission_agent = started and self.job_type == "SUBMISSION"
        end_ms: int | None = _ms(end) if end is not None else None
        if self.job_type == "DRIVER" and end is None:
            end_ms = 0  # 201_job_GET_DRIVER_by_job_id: a running DRIVER shows end_time 0
        return {
            "type": self.job_type,
            "job_id": self.ray_job_id if has_driver else None,
            "submission_id": self.submission_id,
            "driver_info": driver_info,
            "status": status,
            "entrypoint": self.entrypoint,
            "message": message,
            "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR" if status == "FAILED" and exit_code else None,
            "start_time": _ms(self.submitted_at),
            "end_time": end_ms,
            "metadata": self.metadata,
            "runtime_env": self.runtime_env,
            "driver_agent_http_address": f"http://{texts.NODE_IP}:{texts.AGENT_PORT}"
            if submission_agent
            else None,
            "driver_node_id": NODE_ID if submission_agent else None,
            "driver_exit_code": exit_code,
        }

    def _ghost_details(self) -> dict[str, Any]:
        """39b_*: the record re-created by the dying supervisor after a DELETE."""
        assert self.ghost_at is not None and self.submission_id is not None
        return {
            "type": "SUBMISSION",
            "job_id": None,
            "submission_id": self.submission_id,
            "driver_info": None,
            "status": "FAILED",
            "entrypoint": texts.GHOST_ENTRYPOINT,
            "message": texts.ghost_message(self.submission_id, self.driver_pid),
            "error_type": "JOB_SUPERVISOR_ACTOR_DIED",
            "start_time": None,
            "end_time": _ms(self.ghost_at),
            "metadata": None,
            "runtime_env": None,
            "driver_agent_http_address": None,
            "driver_node_id": None,
            "driver_exit_code": None,
        }


@dataclass(kw_only=True)
class JobTable:
    """All job records of one head. Deleted jobs may come back as ghosts (see `delete`)."""

    jobs: dict[str, SimJob] = field(default_factory=dict)  # by submission id or hex id (DRIVER)
    pending_ghosts: list[SimJob] = field(default_factory=list)
    next_ray_job: int = 1

    def new_ray_job_id(self) -> str:
        value = f"{self.next_ray_job:02x}000000"  # Ray's JobID hex: counter in the first byte(s)
        self.next_ray_job += 1
        return value

    def settle(self, now: float) -> None:
        """Materialise ghosts whose supervisor has died by `now`."""
        due = [g for g in self.pending_ghosts if g.ghost_at is not None and g.ghost_at <= now]
        for ghost in due:
            self.pending_ghosts.remove(ghost)
            assert ghost.submission_id is not None
            self.jobs.setdefault(ghost.submission_id, ghost)

    def find(self, key: str, now: float) -> SimJob | None:
        """GET /api/jobs/<id> accepts a submission id or a hex Ray job id (68_*, 201_*)."""
        self.settle(now)
        job = self.jobs.get(key)
        if job is not None:
            return job
        for candidate in self.jobs.values():
            if candidate.ray_job_id == key and candidate.details(now)["job_id"] == key:
                return candidate
        return None

    def delete(self, job: SimJob, now: float, *, ghost_window_s: float, ghost_delay_s: float) -> None:
        """Delete a terminal job; README §3 "a deleted job comes back as a ghost".

        If the job ended less than `ghost_window_s` ago its supervisor actor is still alive; it dies
        `ghost_delay_s` after the DELETE and re-creates the record as FAILED/JOB_SUPERVISOR_ACTOR_DIED
        (33-39c). Waiting longer than the window gives a clean 404 (control run 70-74).
        """
        key = job.submission_id or job.ray_job_id
        assert key is not None
        self.jobs.pop(key, None)
        _, end = job.status_at(now)
        recent = end is not None and now - end < ghost_window_s
        if job.ghost_at is None and job.job_type == "SUBMISSION" and recent:
            ghost = SimJob(
                submission_id=job.submission_id,
                entrypoint=texts.GHOST_ENTRYPOINT,
                submitted_at=job.submitted_at,
                plan=job.plan,
                ghost_at=now + ghost_delay_s,
                driver_pid=job.driver_pid,
            )
            self.pending_ghosts.append(ghost)

    def listing(self, now: float) -> list[dict[str, Any]]:
        self.settle(now)
        return [job.details(now) for job in self.jobs.values()]
