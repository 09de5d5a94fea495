"""ray-operator/test/e2erayjob/rayjob_lightweight_test.go (TestRayJobLightWeightMode, HTTPMode)
and rayjob_sidecar_mode_test.go (TestRayJobSidecarMode): one Python test per subtest."""

from __future__ import annotations

from tests.integration.e2e.kuberay_v17.support import (
    CM,
    COUNTER_RUNTIME_ENV,
    E2E,
    POD,
    RC,
    RJ,
    TEST_TIMEOUT_MEDIUM,
    TEST_TIMEOUT_SHORT,
    Json,
    head_pod_template,
    is_job_terminal,
    job_status,
    jobs_config_map,
    new_ray_cluster_spec,
    rayjob,
    reason,
    status,
)
from tests.integration.e2e.kuberay_v17.test_kuberay_rayjob import verify_container_auth_token_env_vars

SUBMITTER = "ray-job-submitter"


def head_only_spec() -> Json:
    """The "Successful RayJob" subtests' cluster: a head with 4 CPUs, 4 GPUs, R1: 4, no workers."""
    template = head_pod_template()
    template["spec"]["containers"][0]["volumeMounts"] = [{"name": "jobs", "mountPath": "/home/ray/jobs"}]
    template["spec"]["volumes"] = [{"name": "jobs", "configMap": {"name": "jobs"}}]
    return {"rayVersion": "2.55.0", "headGroupSpec": {
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "4", "num-cpus": "4", "resources": "'{\"R1\": 4}'"},
        "template": template}}


async def successful(e: E2E, mode: str) -> None:
    await e.apply(CM, jobs_config_map(e.ns, "counter.py", "fail.py", "stop.py"))
    await e.apply(RJ, rayjob("counter", e.ns, submissionMode=mode, entrypoint="python /home/ray/jobs/counter.py",
                             entrypointNumCpus=2, entrypointNumGpus=2, entrypointResources='{"R1": 2}',
                             runtimeEnvYAML=COUNTER_RUNTIME_ENV, shutdownAfterJobFinishes=True,
                             rayClusterSpec=head_only_spec()))
    await e.rayjob_eventually("counter", lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("counter")) == "SUCCEEDED"
    await e.deployment_status_eventually("counter", "Complete")
    job = await e.rayjob("counter")
    assert await e.is_not_found(RC, status(job)["rayClusterName"])


async def failing(e: E2E, mode: str) -> Json:
    await e.apply(CM, jobs_config_map(e.ns, "counter.py", "fail.py", "stop.py"))
    await e.apply(RJ, rayjob("fail", e.ns, submissionMode=mode, entrypoint="python /home/ray/jobs/fail.py",
                             shutdownAfterJobFinishes=False, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True)))
    await e.rayjob_eventually("fail", lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("fail")) == "FAILED"
    await e.deployment_status_eventually("fail", "Failed")
    job = await e.rayjob("fail")
    assert reason(job) == "AppFailed"
    await e.eventually(e.jobs, lambda js: js == [], what="no submitter Job")
    return job


async def stopped(e: E2E, mode: str) -> None:
    await e.apply(CM, jobs_config_map(e.ns, "counter.py", "fail.py", "stop.py"))
    await e.apply(RJ, rayjob("stop", e.ns, submissionMode=mode, entrypoint="python /home/ray/jobs/stop.py",
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True)))
    await e.deployment_status_eventually("stop", "Running", timeout=TEST_TIMEOUT_MEDIUM)
    await e.deployment_status_eventually("stop", "Complete", timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("stop")) == "STOPPED"
    await e.delete(RJ, "stop")


async def with_auth_token(e: E2E, mode: str) -> None:
    await e.apply(CM, jobs_config_map(e.ns, "counter.py", "fail.py", "stop.py"))
    spec = new_ray_cluster_spec(mount_jobs=True)
    spec["authOptions"] = {"mode": "token"}
    await e.apply(RJ, rayjob("counter-auth", e.ns, submissionMode=mode, entrypoint="python /home/ray/jobs/counter.py",
                             runtimeEnvYAML=COUNTER_RUNTIME_ENV, shutdownAfterJobFinishes=True, rayClusterSpec=spec))
    job = await e.rayjob_eventually("counter-auth", lambda j: bool(status(j).get("rayClusterName")),
                                    timeout=TEST_TIMEOUT_MEDIUM)
    name = status(job)["rayClusterName"]
    await e.eventually(lambda: e.raycluster(name), lambda c: status(c).get("state") == "ready",
                       timeout=TEST_TIMEOUT_MEDIUM, what="RayCluster ready")
    cluster = await e.raycluster(name)
    head = await e.head_pod(cluster)
    verify_container_auth_token_env_vars(cluster, head["spec"]["containers"][0])
    if mode == "SidecarMode":
        submitter = next((c for c in head["spec"]["containers"] if c["name"] == SUBMITTER), None)
        assert submitter is not None, "submitter container should be present in head pod"
        verify_container_auth_token_env_vars(cluster, submitter)
    workers = await e.worker_pods(cluster)
    assert workers
    for w in workers:
        verify_container_auth_token_env_vars(cluster, w["spec"]["containers"][0])
    await e.rayjob_eventually("counter-auth", lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("counter-auth")) == "SUCCEEDED"
    await e.deployment_status_eventually("counter-auth", "Complete")


async def test_lightweight_successful(e2e: E2E) -> None:
    """rayjob_lightweight_test.go TestRayJobLightWeightMode / "Successful RayJob"."""
    await successful(e2e, "HTTPMode")


async def test_lightweight_failing_without_cluster_shutdown(e2e: E2E) -> None:
    """rayjob_lightweight_test.go TestRayJobLightWeightMode / "Failing RayJob without cluster
    shutdown after finished"."""
    e = e2e
    job = await failing(e, "HTTPMode")
    await e.delete(RJ, "fail")
    await e.eventually(lambda: e.is_not_found(RC, status(job)["rayClusterName"]), bool)


async def test_lightweight_stopped_is_complete(e2e: E2E) -> None:
    """rayjob_lightweight_test.go TestRayJobLightWeightMode / "Should transition to 'Complete' if
    the Ray job has stopped."."""
    await stopped(e2e, "HTTPMode")


async def test_lightweight_with_auth_token(e2e: E2E) -> None:
    """rayjob_lightweight_test.go TestRayJobLightWeightMode / "Successful RayJob in HTTP mode with auth token"."""
    await with_auth_token(e2e, "HTTPMode")


async def test_sidecar_successful(e2e: E2E) -> None:
    """rayjob_sidecar_mode_test.go TestRayJobSidecarMode / "Successful RayJob"."""
    await successful(e2e, "SidecarMode")


async def test_sidecar_failing_without_cluster_shutdown(e2e: E2E) -> None:
    """rayjob_sidecar_mode_test.go TestRayJobSidecarMode / "Failing RayJob without cluster shutdown
    after finished": the head Pod carries the submitter container."""
    e = e2e
    job = await failing(e, "SidecarMode")
    cluster = await e.raycluster(status(job)["rayClusterName"])
    head = await e.head_pod(cluster)
    assert SUBMITTER in {c["name"] for c in head["spec"]["containers"]}, "submitter container should be present"
    await e.delete(RJ, "fail")
    await e.eventually(lambda: e.is_not_found(RC, cluster["metadata"]["name"]), bool)


async def test_sidecar_stopped_is_complete(e2e: E2E) -> None:
    """rayjob_sidecar_mode_test.go TestRayJobSidecarMode / "Should transition to 'Complete' if the
    Ray job has stopped."."""
    await stopped(e2e, "SidecarMode")


async def test_sidecar_head_pod_deleted_fails_the_job(e2e: E2E) -> None:
    """rayjob_sidecar_mode_test.go TestRayJobSidecarMode / "RayJob fails when head Pod is deleted
    when job is running": SidecarMode's cluster is annotated not to restart its head."""
    e, name = e2e, "delete-head-after-submit"
    await e.apply(RJ, rayjob(name, e.ns, submissionMode="SidecarMode", rayClusterSpec=new_ray_cluster_spec(),
                             entrypoint='python -c "import time; time.sleep(60)"', shutdownAfterJobFinishes=True))
    await e.job_status_eventually(name, "RUNNING", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob(name)
    cluster = await e.raycluster(status(job)["rayClusterName"])
    assert cluster["metadata"]["labels"]["ray.io/job-submission-mode"] == "SidecarMode"
    assert cluster["metadata"]["annotations"]["ray.io/disable-provisioned-head-restart"] == "true"
    head = await e.head_pod(cluster)
    await e.c.delete(POD, namespace=e.ns, name=head["metadata"]["name"])

    async def no_head() -> bool:
        try:
            await e.head_pod(cluster)
        except AssertionError:
            return True
        return False
    await e.eventually(no_head, bool, timeout=TEST_TIMEOUT_MEDIUM, what="head Pod gone")
    await e.consistently(no_head, bool, duration=TEST_TIMEOUT_SHORT, what="head Pod not recreated")
    await e.deployment_status_eventually(name, "Failed", timeout=TEST_TIMEOUT_MEDIUM)
    await e.rayjob_eventually(name, lambda j: reason(j) in ("AppFailed", "SubmissionFailed"),
                              timeout=TEST_TIMEOUT_MEDIUM)
    await e.delete(RJ, name)


async def test_sidecar_with_auth_token(e2e: E2E) -> None:
    """rayjob_sidecar_mode_test.go TestRayJobSidecarMode / "Successful RayJob in Sidecar mode with auth token"."""
    await with_auth_token(e2e, "SidecarMode")


