"""Invalid CRs get what KubeRay gives them: status + Warning event with a message saying what to
fix, and no service crashes (e2e, over the API)."""

from __future__ import annotations

import copy

import yaml

from raybus.adapters.kube import resource_for
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import Kube

RJ = resource_for("ray.io/v1", "RayJob")
RS = resource_for("ray.io/v1", "RayService")


def _doc(name: str, kind: str) -> dict:  # type: ignore[type-arg]
    return next(d for d in yaml.safe_load_all((SAMPLES / name).read_text())
                if isinstance(d, dict) and d.get("kind") == kind)


async def _warning(kube: Kube, name: str, reason: str) -> dict:  # type: ignore[type-arg]
    found: list[dict] = []  # type: ignore[type-arg]

    async def check() -> bool:
        found[:] = await kube.events(name, reason)
        return bool(found) and found[0]["type"] == "Warning"

    await kube.eventually(check, what=f"Warning {reason} on {name}")
    return found[0]


async def test_invalid_rayjob_is_validation_failed(kube: Kube) -> None:
    job = copy.deepcopy(_doc("ray-job.sample.yaml", "RayJob"))
    job["metadata"] = {"name": "e2e-badjob", "namespace": "default"}
    job["spec"]["shutdownAfterJobFinishes"] = False
    job["spec"]["ttlSecondsAfterFinished"] = 10  # only valid with shutdownAfterJobFinishes
    await kube.c.create(RJ, job, namespace="default")

    async def failed() -> bool:
        status = (await kube.c.get(RJ, namespace="default", name="e2e-badjob")).get("status") or {}
        return status.get("jobDeploymentStatus") == "ValidationFailed"

    await kube.eventually(failed, what="RayJob ValidationFailed")
    status = (await kube.c.get(RJ, namespace="default", name="e2e-badjob"))["status"]
    assert status["reason"] == "ValidationFailed"
    assert "ttlsecondsafterfinished" in status["message"].lower()  # says what to fix
    event = await _warning(kube, "e2e-badjob", "InvalidRayJobSpec")
    assert "ttlsecondsafterfinished" in event["message"].lower()


async def test_invalid_rayservice_is_not_ready_validation_failed(kube: Kube) -> None:
    svc = copy.deepcopy(_doc("ray-service.sample.yaml", "RayService"))
    svc["metadata"] = {"name": "e2e-badsvc", "namespace": "default"}
    svc["spec"]["serveConfigV2"] = "applications: [unclosed"
    await kube.c.create(RS, svc, namespace="default")

    async def failed() -> bool:
        status = (await kube.c.get(RS, namespace="default", name="e2e-badsvc")).get("status") or {}
        return any(c["type"] == "Ready" and c["reason"] == "ValidationFailed"
                   for c in status.get("conditions") or [])

    await kube.eventually(failed, what="RayService Ready=False ValidationFailed")
    await _warning(kube, "e2e-badsvc", "InvalidRayServiceSpec")


async def test_invalid_raycluster_gets_warning_and_no_pods(kube: Kube) -> None:
    def duplicate_group(body: dict) -> None:  # type: ignore[type-arg]
        body["spec"]["workerGroupSpecs"].append(copy.deepcopy(body["spec"]["workerGroupSpecs"][0]))

    await kube.apply_cluster("e2e-badrc", mutate=duplicate_group)
    event = await _warning(kube, "e2e-badrc", "InvalidRayClusterSpec")
    assert "workergroup" in event["message"]
    await kube.settled("e2e-badrc")
    assert await kube.pods("e2e-badrc") == []
