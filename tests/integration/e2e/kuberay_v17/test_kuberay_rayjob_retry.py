"""ray-operator/test/e2erayjob/rayjob_retry_test.go, TestRayJobRetry: one Python test per subtest."""

from __future__ import annotations

from tests.integration.e2e.kuberay_v17.support import (
    BATCH_JOB,
    CM,
    E2E,
    RC,
    RJ,
    TEST_TIMEOUT_LONG,
    TEST_TIMEOUT_MEDIUM,
    TEST_TIMEOUT_SHORT,
    Json,
    job_status,
    job_submitter_pod_template,
    jobs_config_map,
    new_ray_cluster_spec,
    rayjob,
    reason,
    status,
)


def counts(job: Json) -> tuple[int, int]:
    """(RayJobFailed, RayJobSucceeded): status.failed / status.succeeded, nil as 0."""
    return int(status(job).get("failed") or 0), int(status(job).get("succeeded") or 0)


async def test_rayjob_retry_failing_without_cluster_shutdown(e2e: E2E) -> None:
    """rayjob_retry_test.go TestRayJobRetry / "Failing RayJob without cluster shutdown after
    finished": backoffLimit 2 -> three attempts, each AppFailed; the submitter Job (backoffLimit 1)
    itself succeeded."""
    e = e2e
    await e.apply(CM, jobs_config_map(e.ns, "fail.py"))
    await e.apply(RJ, rayjob("fail", e.ns, backoffLimit=2, submitterConfig={"backoffLimit": 1},
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="python /home/ray/jobs/fail.py", shutdownAfterJobFinishes=False,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.deployment_status_eventually("fail", "Failed", timeout=TEST_TIMEOUT_LONG)
    job = await e.rayjob("fail")
    assert job_status(job) == "FAILED" and reason(job) == "AppFailed"
    assert counts(job) == (3, 0)
    submitter = await e.get(BATCH_JOB, "fail")
    assert submitter["spec"]["backoffLimit"] == 1
    assert int(status(submitter).get("failed") or 0) == 0
    assert int(status(submitter).get("succeeded") or 0) == 1
    await e.delete(RJ, "fail")
    cluster = status(job)["rayClusterName"]
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, what="RayCluster cascade deleted")
    await e.eventually(e.jobs, lambda js: js == [], what="submitter Job cascade deleted")


async def test_rayjob_retry_failing_submitter_k8s_job(e2e: E2E) -> None:
    """rayjob_retry_test.go TestRayJobRetry / "Failing submitter K8s Job": RayJob backoffLimit 2,
    submitter backoffLimit 0, a submitter that cannot reach the head."""
    e = e2e
    await e.apply(CM, jobs_config_map(e.ns, "fail.py"))
    template = job_submitter_pod_template()
    template["spec"]["containers"][0]["command"] = ["ray", "job", "submit", "--address", "http://do-not-exist:8265",
                                                    "--", "echo 123"]
    name = "fail-submitter-k8s-job"
    await e.apply(RJ, rayjob(name, e.ns, backoffLimit=2, submitterConfig={"backoffLimit": 0},
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="The command will be overridden by the submitter Job",
                             shutdownAfterJobFinishes=True, submitterPodTemplate=template))
    await e.deployment_status_eventually(name, "Failed", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob(name)
    assert job_status(job) == "" and reason(job) == "SubmissionFailed"
    assert counts(job) == (3, 0)
    cluster = status(job)["rayClusterName"]
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, timeout=TEST_TIMEOUT_MEDIUM, what="RayCluster deleted")
    await e.eventually(e.jobs, lambda js: len(js) > 0, what="submitter Job not deleted yet")
    await e.delete(RJ, name)


async def test_rayjob_retry_active_deadline_seconds(e2e: E2E) -> None:
    """rayjob_retry_test.go TestRayJobRetry / "RayJob has passed ActiveDeadlineSeconds": Failed
    regardless of backoffLimit, after one attempt."""
    e = e2e
    await e.apply(CM, jobs_config_map(e.ns, "fail.py"))
    await e.apply(RJ, rayjob("long-running", e.ns, backoffLimit=2, submitterConfig={"backoffLimit": 0},
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="python /home/ray/jobs/long_running.py", shutdownAfterJobFinishes=True,
                             ttlSecondsAfterFinished=600, activeDeadlineSeconds=5,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.deployment_status_eventually("long-running", "Failed", timeout=TEST_TIMEOUT_SHORT)
    job = await e.rayjob("long-running")
    assert reason(job) == "DeadlineExceeded"
    assert counts(job) == (1, 0)


async def _failing_in_mode(e: E2E, name: str, mode: str) -> None:
    await e.apply(CM, jobs_config_map(e.ns, "fail.py"))
    await e.apply(RJ, rayjob(name, e.ns, submissionMode=mode, backoffLimit=2,
                             entrypoint="python /home/ray/jobs/fail.py", shutdownAfterJobFinishes=False,
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True)))
    await e.deployment_status_eventually(name, "Failed", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob(name)
    assert job_status(job) == "FAILED" and reason(job) == "AppFailed"
    assert counts(job) == (3, 0)  # 2 retries + 1 initial attempt
    await e.delete(RJ, name)


async def test_rayjob_retry_failing_in_http_mode(e2e: E2E) -> None:
    """rayjob_retry_test.go TestRayJobRetry / "Failing RayJob with HttpMode submission mode"."""
    await _failing_in_mode(e2e, "failing-rayjob-in-httpmode", "HTTPMode")


async def test_rayjob_retry_failing_in_sidecar_mode(e2e: E2E) -> None:
    """rayjob_retry_test.go TestRayJobRetry / "Failing RayJob with SidecarMode submission mode"."""
    await _failing_in_mode(e2e, "failing-rayjob-in-sidecar-mode", "SidecarMode")
