"""ray-operator/test/e2erayjob/rayjob_cluster_selector_test.go (TestRayJobWithClusterSelector)
and rayjob_recovery_test.go (TestRayJobRecovery): one Python test per subtest."""

from __future__ import annotations

import pytest

from raybus.adapters.kube import KubeError
from tests.integration.e2e.kuberay_v17.support import (
    CM,
    COUNTER_RUNTIME_ENV,
    E2E,
    POD,
    RC,
    RJ,
    TEST_TIMEOUT_MEDIUM,
    deployment_status,
    is_job_terminal,
    job_status,
    job_submitter_pod_template,
    jobs_config_map,
    new_ray_cluster_spec,
    rayjob,
    status,
)


async def selected_cluster(e: E2E) -> str:
    """The Go test's shared RayCluster "raycluster", Ready before the subtests."""
    await e.apply(CM, jobs_config_map(e.ns, "counter.py", "fail.py"))
    await e.apply(RC, {"metadata": {"name": "raycluster"}, "spec": new_ray_cluster_spec(mount_jobs=True)})
    await e.eventually(lambda: e.raycluster("raycluster"), lambda c: status(c).get("state") == "ready",
                       timeout=TEST_TIMEOUT_MEDIUM, what="raycluster ready")
    return "raycluster"


async def test_cluster_selector_successful(e2e: E2E) -> None:
    """rayjob_cluster_selector_test.go TestRayJobWithClusterSelector / "Successful RayJob"."""
    e = e2e
    rc = await selected_cluster(e)
    await e.apply(RJ, rayjob("counter", e.ns, clusterSelector={"ray.io/cluster": rc},
                             entrypoint="python /home/ray/jobs/counter.py", runtimeEnvYAML=COUNTER_RUNTIME_ENV,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.rayjob_eventually("counter", lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("counter")) == "SUCCEEDED"


async def test_cluster_selector_failing(e2e: E2E) -> None:
    """rayjob_cluster_selector_test.go TestRayJobWithClusterSelector / "Failing RayJob"."""
    e = e2e
    rc = await selected_cluster(e)
    await e.apply(RJ, rayjob("fail", e.ns, clusterSelector={"ray.io/cluster": rc},
                             entrypoint="python /home/ray/jobs/fail.py", shutdownAfterJobFinishes=False,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.rayjob_eventually("fail", lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("fail")) == "FAILED"


async def test_cluster_selector_managed_externally(e2e: E2E) -> None:
    """rayjob_cluster_selector_test.go TestRayJobWithClusterSelector / "RayJob should be created
    but not to be updated when managed externally": New for 3 s."""
    e = e2e
    rc = await selected_cluster(e)
    await e.apply(RJ, rayjob("managed-externally", e.ns, clusterSelector={"ray.io/cluster": rc},
                             entrypoint="python /home/ray/jobs/counter.py", runtimeEnvYAML=COUNTER_RUNTIME_ENV,
                             submitterPodTemplate=job_submitter_pod_template(), managedBy="kueue.x-k8s.io/multikueue"))
    await e.consistently(lambda: e.rayjob("managed-externally"), lambda j: deployment_status(j) == "", duration=3)


async def test_cluster_selector_managed_by_invalid(e2e: E2E) -> None:
    """rayjob_cluster_selector_test.go TestRayJobWithClusterSelector / "RayJob should not be
    created due to managedBy invalid value": 422 Invalid."""
    e = e2e
    rc = await selected_cluster(e)
    with pytest.raises(KubeError) as err:
        await e.apply(RJ, rayjob("managed-externally-invalid", e.ns, clusterSelector={"ray.io/cluster": rc},
                                 entrypoint="python /home/ray/jobs/counter.py", runtimeEnvYAML=COUNTER_RUNTIME_ENV,
                                 submitterPodTemplate=job_submitter_pod_template(), managedBy="invalid.com/controller"))
    assert err.value.code == 422 and err.value.reason == "Invalid", err.value


async def test_rayjob_recovers_after_submitter_pod_deletion(e2e: E2E) -> None:
    """rayjob_recovery_test.go TestRayJobRecovery / "RayJob should recover after pod deletion":
    the submitter Pod is deleted while the job runs; a new submitter Pod runs and the RayJob
    completes. (Go sleeps 15 s before deleting; here the deletion waits for the submitter Pod to
    be Running, which is what the sleep is for. Go's check of "a new Pod" compares nothing; this
    one requires a Running Pod with another name.)"""
    e = e2e
    await e.apply(CM, jobs_config_map(e.ns, "long_running_counter.py"))
    await e.apply(RJ, rayjob("counter", e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="python /home/ray/jobs/long_running_counter.py",
                             runtimeEnvYAML=COUNTER_RUNTIME_ENV, shutdownAfterJobFinishes=True,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.job_status_eventually("counter", "RUNNING", timeout=TEST_TIMEOUT_MEDIUM)
    old = await e.eventually(lambda: e.pods("job-name=counter"),
                             lambda ps: any((p.get("status") or {}).get("phase") == "Running" for p in ps),
                             what="submitter Pod Running")
    old_names = {p["metadata"]["name"] for p in old}
    for p in old:
        await e.c.delete(POD, namespace=e.ns, name=p["metadata"]["name"], propagation="Background")
    await e.eventually(lambda: e.pods("job-name=counter"),
                       lambda ps: any((p.get("status") or {}).get("phase") == "Running"
                                      and p["metadata"]["name"] not in old_names for p in ps),
                       timeout=TEST_TIMEOUT_MEDIUM, what="a new submitter Pod Running")
    await e.job_status_eventually("counter", "SUCCEEDED", timeout=TEST_TIMEOUT_MEDIUM)
    await e.deployment_status_eventually("counter", "Complete", timeout=TEST_TIMEOUT_MEDIUM)
