"""Every RayJob sample in ../shared/kuberay-samples completes on the local stack (issue 11).

None needs an external scheduler to run: the Volcano/YuniKorn samples only carry their schedulers'
labels (`volcano.sh/queue-name`, `yunikorn.apache.org/*`, `ray.io/gang-scheduling-enabled`), which
KubeRay without --batch-scheduler ignores, and so does raybus; Volcano's Queue object in the same
file is not applied (no such CRD here). The Kueue toy sample carries no queue label (Kueue would
admit it by suspending/resuming it). What each needs from the user is done as a user would:
the file's ConfigMaps/ServiceAccounts/RBAC, the RayCluster `ray-cluster-kuberay` that
ray-job.use-existing-raycluster.yaml selects, and InteractiveMode's own submission + spec.jobId.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from raybus.adapters.kube import KubeError, resource_for
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import NS, Kube
from tests.integration.e2e.rayjob_kit import Jobs, docs, rayjob_doc, status

RAYJOB_SAMPLES = sorted(p for p in SAMPLES.glob("*.yaml") if any(d.get("kind") == "RayJob" for d in docs(p)))
SA = resource_for("v1", "ServiceAccount")


@pytest.fixture
async def jobs(kube: Kube) -> AsyncIterator[Jobs]:
    j = Jobs(kube)
    yield j
    await j.delete_all()


def _service_accounts(doc: dict[str, Any]) -> set[str]:
    spec = doc["spec"]
    cluster = spec.get("rayClusterSpec") or {}
    templates = [(cluster.get("headGroupSpec") or {}).get("template") or {},
                 *[g.get("template") or {} for g in cluster.get("workerGroupSpecs") or []],
                 spec.get("submitterPodTemplate") or {}]
    return {str(t.get("spec", {}).get("serviceAccountName")) for t in templates
            if t.get("spec", {}).get("serviceAccountName")}


async def _run_sample(jobs: Jobs, path: Path) -> tuple[str, dict[str, Any]]:
    doc = rayjob_doc(path, name=f"s-{path.stem.replace('.', '-').replace('_', '-')}"[:32].rstrip("-"))
    await jobs.prerequisites(path)
    for account in _service_accounts(doc):
        try:
            await jobs.c.create(SA, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
                                namespace=NS)
        except KubeError as exc:
            if not exc.already_exists:
                raise
    name = await jobs.apply(doc)
    if doc["spec"].get("submissionMode") == "InteractiveMode":
        waiting = await jobs.wait_status(name, "Waiting", timeout=90)
        await jobs.submit_by_hand(status(waiting)["rayClusterName"], f"{name}-by-hand", "python sample_code.py")
        await jobs.patch(name, {"spec": {"jobId": f"{name}-by-hand"}})
    return path.name, await jobs.wait_status(name, "Complete", "SUCCEEDED", timeout=120)


async def test_every_rayjob_sample_completes(jobs: Jobs) -> None:
    assert len(RAYJOB_SAMPLES) >= 19
    # ray-job.use-existing-raycluster.yaml runs on a cluster the user created beforehand.
    await jobs.kube.apply_cluster("ray-cluster-kuberay")
    try:
        await jobs.kube.wait_ready("ray-cluster-kuberay", workers=1, timeout=90)
        results = await asyncio.gather(*(_run_sample(jobs, p) for p in RAYJOB_SAMPLES), return_exceptions=True)
        failures = {p.name: r for p, r in zip(RAYJOB_SAMPLES, results, strict=True) if isinstance(r, BaseException)}
        assert failures == {}
        for result in results:
            assert not isinstance(result, BaseException)
            sample, job = result
            assert status(job)["succeeded"] == 1, sample
    finally:
        await jobs.c.delete(resource_for("ray.io/v1", "RayCluster"), namespace=NS, name="ray-cluster-kuberay")
