"""Every RayJob sample of KubeRay parses, validates, and its decisions take it from New to Running
(Waiting in InteractiveMode, Suspended when created suspended) with KubeRay's objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raybus.api.load import parse_manifests
from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.decisions.job.model import JobSnapshot
from tests.unit.decisions.job.fixtures import created, decide, ready_status

SAMPLES = Path(__file__).resolve().parents[4].parent / "shared" / "kuberay-samples"


def _jobs() -> list[tuple[str, RayJob]]:
    out = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for obj in parse_manifests(path.read_text()):
            if isinstance(obj, RayJob):
                obj.metadata.namespace = obj.metadata.namespace or "default"
                obj.metadata.uid, obj.metadata.generation = "uid-sample", 1
                out.append((f"{path.stem}/{obj.name}", obj))
    return out


JOBS = _jobs()


def test_samples_found() -> None:
    assert len(JOBS) >= 15


def _with(job: RayJob, status: dict[str, Any] | None, finalizers: list[str]) -> RayJob:
    body = job.to_manifest()
    body["metadata"]["finalizers"] = finalizers
    if status is not None:
        body["status"] = status
    return RayJob.model_validate(body)


@pytest.mark.parametrize(("name", "job"), JOBS, ids=[n for n, _ in JOBS])
def test_sample_reaches_running(name: str, job: RayJob) -> None:
    d = decide(JobSnapshot(rayjob=job))
    assert d.status is None and [c.op for c in d.commands] == ["patch"]  # the finalizer first
    job = _with(job, None, ["ray.io/rayjob-finalizer"])
    d = decide(JobSnapshot(rayjob=job))
    assert d.error is None and d.status is not None, d.reasons
    assert d.status["jobDeploymentStatus"] == "Initializing", d.reasons
    job = _with(job, d.status, ["ray.io/rayjob-finalizer"])
    cluster_name = d.status["rayClusterName"]
    selected = bool(job.spec.cluster_selector)
    cluster: dict[str, Any] | None = None
    if selected:
        cluster = {"metadata": {"name": cluster_name, "namespace": job.namespace},
                   "spec": {"headGroupSpec": {"template": {"spec": {"containers": [
                       {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}}
    else:
        d = decide(JobSnapshot(rayjob=job))
        if job.spec.suspend:
            assert d.status is not None and d.status["jobDeploymentStatus"] == "Suspending"
            return
        [cluster] = created(d, "RayCluster")
        RayCluster.model_validate(cluster)  # a manifest our API models accept
        assert cluster["metadata"]["ownerReferences"][0]["name"] == job.name
    cluster = cluster | {"status": ready_status()}
    d = decide(JobSnapshot(rayjob=job, cluster=cluster))
    assert d.error is None and d.status is not None, d.reasons
    mode = job.spec.submission_mode or "K8sJobMode"
    assert d.status["jobDeploymentStatus"] == ("Waiting" if mode == "InteractiveMode" else "Running")
    submitters = created(d, "Job")
    assert len(submitters) == (1 if mode == "K8sJobMode" else 0)
    if submitters:
        args = submitters[0]["spec"]["template"]["spec"]["containers"][0].get("args") or [""]
        if not job.spec.submitter_pod_template:
            assert "ray job submit" in args[0] and d.status["jobId"] in args[0]
