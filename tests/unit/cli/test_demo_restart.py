"""`make run` after an interrupted one: which samples of the earlier run the demo starts afresh."""

from __future__ import annotations

from typing import Any

import pytest

from raybus_sim.devstack.demo import left_unfinished


def _job(deployment: str | None, job_status: str | None = None, reason: str | None = None) -> dict[str, Any]:
    status = {k: v for k, v in {"jobDeploymentStatus": deployment, "jobStatus": job_status,
                                "reason": reason}.items() if v}
    return {"kind": "RayJob", "status": status}


def test_a_rayjob_that_succeeded_is_kept() -> None:
    assert left_unfinished("RayJob", _job("Complete", "SUCCEEDED")) == ""


@pytest.mark.parametrize(("job", "why"), [
    (_job("Failed", reason="SubmissionFailed"), "jobDeploymentStatus=Failed jobStatus=- reason=SubmissionFailed"),
    (_job("Failed", "FAILED", "JobDeploymentStatusTransitionGracePeriodExceeded"), "jobStatus=FAILED"),
    (_job("ValidationFailed", reason="ValidationFailed"), "ValidationFailed"),
    (_job("Running", "PENDING"), "jobDeploymentStatus=Running jobStatus=PENDING"),
    (_job("Initializing"), "Initializing"),
    (_job(None), "jobDeploymentStatus=New"),
])
def test_a_rayjob_the_restart_left_unfinished_starts_afresh(job: dict[str, Any], why: str) -> None:
    assert why in left_unfinished("RayJob", job)


@pytest.mark.parametrize("kind", ["RayCluster", "RayService"])
def test_clusters_and_services_converge_again_on_their_own(kind: str) -> None:
    assert left_unfinished(kind, {"status": {"state": "failed", "serviceStatus": "Pending"}}) == ""
