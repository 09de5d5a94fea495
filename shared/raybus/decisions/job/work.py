"""The mutable state of one RayJob reconcile: KubeRay mutates ``rayJobInstance.Status`` in place and
writes it once at the end; this accumulator plays that role for the pure decision."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from raybus.api.rayjob import RayJob
from raybus.decisions.commands import Command, ObjectRef, RecordEvent
from raybus.decisions.dashboard_contract import DashboardCommand
from raybus.decisions.job.model import JobSnapshot
from raybus.decisions.job.settings import JobSettings
from raybus.decisions.job.submitter import submission_mode
from raybus.decisions.job.timefmt import parse_time


def rayjob_ref(job: RayJob) -> ObjectRef:
    return ObjectRef(api_version="ray.io/v1", kind="RayJob", namespace=job.namespace, name=job.name,
                     uid=job.metadata.uid)


class Work:
    """One reconcile in progress."""

    def __init__(self, snapshot: JobSnapshot, *, settings: JobSettings, now: datetime) -> None:
        self.snapshot = snapshot
        self.job = snapshot.rayjob
        self.settings = settings
        self.now = now
        self.mode = submission_mode(self.job)
        self.original: dict[str, Any] = self.job.status.to_dict() if self.job.status is not None else {}
        self.st: dict[str, Any] = copy.deepcopy(self.original)
        self.commands: list[Command] = []
        self.dashboard_commands: list[DashboardCommand] = []
        self.reasons: list[str] = []
        self.error: str | None = None
        self.deadlines: list[datetime] = []
        self.poll_now = ""

    # --- status accessors (camelCase, Go zero values for missing fields) ---
    def get(self, key: str) -> str:
        value = self.st.get(key)
        return value if isinstance(value, str) else ""

    @property
    def jds(self) -> str:
        return self.get("jobDeploymentStatus")

    @jds.setter
    def jds(self, value: str) -> None:
        self.st["jobDeploymentStatus"] = value

    @property
    def job_status(self) -> str:
        return self.get("jobStatus")

    @job_status.setter
    def job_status(self, value: str) -> None:
        self.st["jobStatus"] = value

    def time(self, key: str) -> datetime | None:
        return parse_time(self.st.get(key))

    @property
    def start_time(self) -> datetime | None:
        return self.time("startTime")

    def ray_job_info_end(self) -> datetime | None:
        info = self.st.get("rayJobInfo")
        return parse_time(info.get("endTime")) if isinstance(info, dict) else None

    def fail(self, reason: str, message: str) -> None:
        self.jds = "Failed"
        self.st["reason"] = reason
        self.st["message"] = message
        self.log(f"JobDeploymentStatus -> Failed ({reason}): {message}")

    # --- outputs ---
    def log(self, message: str) -> None:
        self.reasons.append(message)

    def event(self, reason: str, message: str, *, warning: bool = False) -> None:
        self.commands.append(RecordEvent(reason=message, target=rayjob_ref(self.job), event_reason=reason,
                                         type="Warning" if warning else "Normal", message=message))

    def fail_reconcile(self, message: str) -> None:
        """KubeRay's ``return ctrl.Result{RequeueAfter: 3s}, err``: the rate limiter retries."""
        self.error = message
        self.log(f"error: {message}")

    def deadline(self, when: datetime | None) -> None:
        if when is not None:
            self.deadlines.append(when)
