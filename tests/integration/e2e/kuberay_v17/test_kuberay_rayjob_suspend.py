"""ray-operator/test/e2erayjob/rayjob_suspend_test.go, TestRayJobSuspend: one Python test per subtest."""

from __future__ import annotations

from tests.integration.e2e.kuberay_v17.support import (
    CM,
    COUNTER_RUNTIME_ENV,
    E2E,
    RC,
    RJ,
    TEST_TIMEOUT_MEDIUM,
    job_status,
    job_submitter_pod_template,
    jobs_config_map,
    new_ray_cluster_spec,
    rayjob,
    status,
)


async def test_rayjob_suspend_running_then_resume(e2e: E2E) -> None:
    """rayjob_suspend_test.go TestRayJobSuspend / "Suspend the RayJob when its status is
    'Running', and then resume it."."""
    e = e2e
    await e.apply(CM, jobs_config_map(e.ns, "long_running.py", "counter.py"))
    ac = rayjob("long-running", e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                entrypoint="python /home/ray/jobs/long_running.py", shutdownAfterJobFinishes=True,
                ttlSecondsAfterFinished=600, submitterPodTemplate=job_submitter_pod_template())
    await e.apply(RJ, ac)
    await e.deployment_status_eventually("long-running", "Running", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob("long-running")
    ac["spec"]["suspend"] = True
    await e.apply(RJ, ac)
    await e.deployment_status_eventually("long-running", "Suspended", timeout=TEST_TIMEOUT_MEDIUM)
    # Go reads the RayCluster once (no Eventually) right after Suspended is seen.
    assert await e.is_not_found(RC, status(job)["rayClusterName"])
    await e.eventually(e.jobs, lambda js: js == [], what="submitter Job cascade deleted")
    ac["spec"]["suspend"] = False
    await e.apply(RJ, ac)
    await e.deployment_status_eventually("long-running", "Running", timeout=TEST_TIMEOUT_MEDIUM)
    await e.delete(RJ, "long-running")


async def test_rayjob_created_suspended_then_resumed(e2e: E2E) -> None:
    """rayjob_suspend_test.go TestRayJobSuspend / "Create a suspended RayJob, and then resume it."."""
    e = e2e
    await e.apply(CM, jobs_config_map(e.ns, "long_running.py", "counter.py"))
    ac = rayjob("counter", e.ns, suspend=True, entrypoint="python /home/ray/jobs/counter.py",
                runtimeEnvYAML=COUNTER_RUNTIME_ENV, shutdownAfterJobFinishes=True,
                submitterPodTemplate=job_submitter_pod_template(),
                rayClusterSpec=new_ray_cluster_spec(mount_jobs=True))
    await e.apply(RJ, ac)
    await e.deployment_status_eventually("counter", "Suspended", timeout=TEST_TIMEOUT_MEDIUM)
    ac["spec"]["suspend"] = False
    await e.apply(RJ, ac)
    await e.deployment_status_eventually("counter", "Complete", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob("counter")
    assert job_status(job) == "SUCCEEDED"
    await e.delete(RJ, "counter")
    cluster = status(job)["rayClusterName"]
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, what="RayCluster cascade deleted")
    await e.eventually(lambda: e.pods(f"ray.io/cluster={cluster}"), lambda ps: ps == [], what="Pods cascade deleted")
