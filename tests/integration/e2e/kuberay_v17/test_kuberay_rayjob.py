"""ray-operator/test/e2erayjob/rayjob_test.go, TestRayJob: one Python test per subtest."""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.e2e.kuberay_v17.support import (
    BATCH_JOB,
    CM,
    COUNTER_RUNTIME_ENV,
    E2E,
    POD,
    RC,
    RJ,
    SVC,
    TEST_TIMEOUT_MEDIUM,
    TEST_TIMEOUT_SHORT,
    Json,
    deployment_status,
    env_of,
    is_job_terminal,
    job_status,
    job_submitter_pod_template,
    jobs_config_map,
    new_ray_cluster_spec,
    rayjob,
    reason,
    status,
)

SCRIPTS = ("counter.py", "fail.py", "stop.py", "long_running.py")


async def setup_jobs(e: E2E) -> None:
    await e.apply(CM, jobs_config_map(e.ns, *SCRIPTS))


async def test_rayjob_successful(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "Successful RayJob"."""
    e = e2e
    await setup_jobs(e)
    ac = rayjob("counter", e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                entrypoint="python /home/ray/jobs/counter.py", runtimeEnvYAML=COUNTER_RUNTIME_ENV,
                shutdownAfterJobFinishes=True, submitterPodTemplate=job_submitter_pod_template())
    job = await e.apply(RJ, ac)
    # utils.GenerateHeadServiceName(RayJobCRD, spec, name): "<rayjob>-head-svc".
    await e.eventually(lambda: e.get(SVC, "counter-head-svc"), lambda _: True, what="head Service")
    await e.rayjob_eventually("counter", lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("counter")) == "SUCCEEDED"
    await e.deployment_status_eventually("counter", "Complete")
    job = await e.rayjob("counter")
    info = status(job).get("rayJobInfo") or {}
    assert info.get("startTime") is not None and info.get("endTime") is not None
    cluster = status(job)["rayClusterName"]
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, timeout=TEST_TIMEOUT_SHORT,
                       what="RayCluster torn down")
    await e.eventually(e.jobs, lambda js: len(js) > 0, what="submitter Job not deleted")
    # suspend=true on a Complete RayJob: the status stays Complete.
    ac["spec"]["suspend"] = True
    await e.apply(RJ, ac)
    await e.consistently(lambda: e.rayjob("counter"), lambda j: deployment_status(j) == "Complete",
                         what="Complete after suspend")
    await e.delete(RJ, "counter")


async def test_rayjob_failing_without_cluster_shutdown(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "Failing RayJob without cluster shutdown after finished"."""
    e = e2e
    await setup_jobs(e)
    await e.apply(RJ, rayjob("fail", e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="python /home/ray/jobs/fail.py", shutdownAfterJobFinishes=False,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.rayjob_eventually("fail", lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("fail")) == "FAILED"
    await e.deployment_status_eventually("fail", "Failed")
    job = await e.rayjob("fail")
    assert reason(job) == "AppFailed"
    await e.delete(RJ, "fail")
    cluster = status(job)["rayClusterName"]
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, what="RayCluster cascade deleted")
    await e.eventually(e.jobs, lambda js: js == [], what="submitter Job cascade deleted")


async def test_rayjob_failing_submitter_k8s_job(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "Failing submitter K8s Job": a submitter that cannot reach
    the head fails up to its backoff limit; the RayJob is Failed/SubmissionFailed, jobStatus New."""
    e = e2e
    await setup_jobs(e)
    template = job_submitter_pod_template()
    template["spec"]["containers"][0]["command"] = ["ray", "job", "submit", "--address", "http://do-not-exist:8265",
                                                    "--", "echo 123"]
    await e.apply(RJ, rayjob("fail-k8s-job", e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="The command will be overridden by the submitter Job",
                             shutdownAfterJobFinishes=True, submitterPodTemplate=template))
    await e.deployment_status_eventually("fail-k8s-job", "Failed", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob("fail-k8s-job")
    assert job_status(job) == "" and reason(job) == "SubmissionFailed"  # JobStatusNew is ""
    cluster = status(job)["rayClusterName"]
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, what="RayCluster deleted")
    await e.eventually(e.jobs, lambda js: len(js) > 0, what="submitter Job not deleted yet")
    await e.delete(RJ, "fail-k8s-job")


async def test_rayjob_stopped_is_complete(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "Should transition to 'Complete' if the Ray job has stopped."."""
    e = e2e
    await setup_jobs(e)
    await e.apply(RJ, rayjob("stop", e.ns, entrypoint="python /home/ray/jobs/stop.py",
                             submitterPodTemplate=job_submitter_pod_template(),
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True)))
    await e.deployment_status_eventually("stop", "Running", timeout=TEST_TIMEOUT_MEDIUM)
    await e.deployment_status_eventually("stop", "Complete", timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob("stop")) == "STOPPED"
    await e.delete(RJ, "stop")


async def test_rayjob_runtime_env_yaml_invalid(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RuntimeEnvYAML is not a valid YAML string"."""
    e = e2e
    await setup_jobs(e)
    await e.apply(RJ, rayjob("invalid-yamlstr", e.ns, entrypoint="python /home/ray/jobs/counter.py",
                             runtimeEnvYAML="invalid_yaml_string",
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True)))
    await e.deployment_status_eventually("invalid-yamlstr", "ValidationFailed", timeout=TEST_TIMEOUT_SHORT)


async def test_rayjob_name_too_long(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayJob name too long with 48 characters"."""
    e = e2e
    await setup_jobs(e)
    name = "a" * 48
    await e.apply(RJ, rayjob(name, e.ns, entrypoint="python /home/ray/jobs/counter.py",
                             rayClusterSpec=new_ray_cluster_spec(mount_jobs=True)))
    await e.deployment_status_eventually(name, "ValidationFailed", timeout=TEST_TIMEOUT_SHORT)


async def test_rayjob_active_deadline_seconds(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayJob has passed ActiveDeadlineSeconds"."""
    e = e2e
    await setup_jobs(e)
    await e.apply(RJ, rayjob("long-running", e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="python /home/ray/jobs/long_running.py", shutdownAfterJobFinishes=True,
                             ttlSecondsAfterFinished=600, activeDeadlineSeconds=5,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.deployment_status_eventually("long-running", "Failed", timeout=TEST_TIMEOUT_SHORT)
    assert reason(await e.rayjob("long-running")) == "DeadlineExceeded"


async def test_rayjob_head_pod_recreated_while_running(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayJob controller recreates the head Pod if it is deleted
    while the job is running"."""
    e = e2e
    await setup_jobs(e)
    await e.apply(RJ, rayjob("delete-head-after-submit", e.ns, rayClusterSpec=new_ray_cluster_spec(),
                             entrypoint='python -c "import time; time.sleep(60)"',
                             submitterConfig={"backoffLimit": 0}, shutdownAfterJobFinishes=True))
    name = "delete-head-after-submit"
    await e.job_status_eventually(name, "RUNNING", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob(name)
    cluster = await e.raycluster(status(job)["rayClusterName"])
    assert cluster["metadata"]["labels"]["ray.io/job-submission-mode"] == "K8sJobMode"
    assert (cluster["metadata"].get("annotations") or {}).get("ray.io/disable-provisioned-head-restart", "") == ""
    head = await e.head_pod(cluster)
    await e.c.delete(POD, namespace=e.ns, name=head["metadata"]["name"])
    await e.eventually(lambda: e.head_pod(cluster), lambda p: p is not None, timeout=TEST_TIMEOUT_MEDIUM,
                       what="head Pod recreated")
    await e.deployment_status_eventually(name, "Failed", timeout=TEST_TIMEOUT_MEDIUM)
    await e.rayjob_eventually(name, lambda j: reason(j) in ("AppFailed", "JobDeploymentStatusTransitionGracePeriodExceeded",
                                                              "SubmissionFailed"), timeout=TEST_TIMEOUT_MEDIUM)
    await e.delete(RJ, name)


async def test_rayjob_managed_externally(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayJob should be created, but not updated when managed
    externally": managedBy is immutable, nothing is reconciled."""
    e = e2e
    await setup_jobs(e)
    ac = rayjob("managed-externally", e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                entrypoint="python /home/ray/jobs/counter.py", runtimeEnvYAML=COUNTER_RUNTIME_ENV,
                shutdownAfterJobFinishes=True, submitterPodTemplate=job_submitter_pod_template(),
                managedBy="kueue.x-k8s.io/multikueue")
    await e.apply(RJ, ac)
    ac["spec"]["managedBy"] = "ray.io/kuberay-operator"
    with pytest.raises(Exception):  # noqa: B017 - Go: g.Expect(err).To(HaveOccurred())
        await e.apply(RJ, ac)
    await e.rayjob_eventually("managed-externally",
                              lambda j: j["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue")
    # JobDeploymentStatusNew is "": no status written.
    await e.rayjob_eventually("managed-externally", lambda j: deployment_status(j) == "")
    for rc in await e.list(RC):
        assert not rc["metadata"]["name"].endswith("managed-externally")
    await e.eventually(e.jobs, lambda js: js == [])
    await e.delete(RJ, "managed-externally")


async def test_rayjob_submitter_finished_timeout(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayJob has exceed SubmitterFinishedTimeout": the submitter
    Job is marked Complete while the Ray job runs; 30 s (DefaultSubmitterFinishedTimeout, +-5 s)
    later the RayJob is Failed/TransitionGracePeriodExceeded."""
    e = e2e
    await setup_jobs(e)
    name = "submitter-timeout"
    await e.apply(RJ, rayjob(name, e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="python /home/ray/jobs/long_running.py", shutdownAfterJobFinishes=True,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.deployment_status_eventually(name, "Running", timeout=TEST_TIMEOUT_MEDIUM)
    await e.job_status_eventually(name, "RUNNING", timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(e.jobs, lambda js: len(js) > 0)
    job = await e.get(BATCH_JOB, name)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    st = job.setdefault("status", {})
    st["active"] = 0
    st.pop("ready", None)
    st["conditions"] = [*(st.get("conditions") or []),
                        {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": now,
                         "lastTransitionTime": now, "reason": "SuccessCriteriaMet",
                         "message": "Job success criteria met for timeout test"},
                        {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
                         "reason": "Completed", "message": "Job completed successfully for timeout test"}]
    st["completionTime"] = now
    st["succeeded"] = 1
    await e.c.replace_status(BATCH_JOB, job)
    started = time.monotonic()
    await e.deployment_status_eventually(name, "Failed", timeout=TEST_TIMEOUT_SHORT)
    assert abs((time.monotonic() - started) - 30.0) <= 5.0
    job = await e.rayjob(name)
    assert reason(job) == "JobDeploymentStatusTransitionGracePeriodExceeded"
    assert re.search(r"The RayJob submitter finished at .* but the ray job did not reach terminal state within .*",
                     status(job).get("message") or "")


async def test_rayjob_cluster_status_propagates(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayCluster status update propagates to RayJob"."""
    e = e2e
    await setup_jobs(e)
    name = "cluster-status-update"
    await e.apply(RJ, rayjob(name, e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                             entrypoint="python /home/ray/jobs/long_running.py", shutdownAfterJobFinishes=False,
                             submitterPodTemplate=job_submitter_pod_template()))
    await e.job_status_eventually(name, "RUNNING", timeout=TEST_TIMEOUT_MEDIUM)
    job = await e.rayjob(name)
    cluster = await e.raycluster(status(job)["rayClusterName"])
    original = int(status(cluster).get("maxWorkerReplicas") or 0)
    assert int((status(job).get("rayClusterStatus") or {}).get("maxWorkerReplicas") or 0) == original
    cluster["status"]["maxWorkerReplicas"] = original + 2
    await e.c.replace_status(RC, cluster)

    def propagated(j: Json) -> bool:
        return int((status(j).get("rayClusterStatus") or {}).get("maxWorkerReplicas") or 0) == original + 2
    await e.rayjob_eventually(name, propagated, timeout=TEST_TIMEOUT_SHORT)
    await e.delete(RJ, name)


def verify_container_auth_token_env_vars(cluster: Json, container: Json) -> None:
    """support/ray.go VerifyContainerAuthTokenEnvVars."""
    env = env_of(container)
    assert env.get("RAY_AUTH_MODE", {}).get("value") == "token", container["name"]
    ref = ((env.get("RAY_AUTH_TOKEN") or {}).get("valueFrom") or {}).get("secretKeyRef")
    assert ref is not None, container["name"]
    assert cluster["metadata"]["name"] in ref["name"] and ref["key"] == "auth_token"


async def test_rayjob_k8s_job_mode_with_auth_token(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "Successful RayJob in K8s Job mode with auth token"."""
    e = e2e
    await setup_jobs(e)
    name = "counter-auth"
    spec = new_ray_cluster_spec(mount_jobs=True)
    spec["authOptions"] = {"mode": "token"}
    await e.apply(RJ, rayjob(name, e.ns, submissionMode="K8sJobMode", entrypoint="python /home/ray/jobs/counter.py",
                             runtimeEnvYAML=COUNTER_RUNTIME_ENV, shutdownAfterJobFinishes=True,
                             submitterPodTemplate=job_submitter_pod_template(), rayClusterSpec=spec))
    job = await e.rayjob_eventually(name, lambda j: bool(status(j).get("rayClusterName")), timeout=TEST_TIMEOUT_MEDIUM)
    cluster_name = status(job)["rayClusterName"]
    await e.eventually(lambda: e.raycluster(cluster_name), lambda c: status(c).get("state") == "ready",
                       timeout=TEST_TIMEOUT_MEDIUM, what="RayCluster ready")
    cluster = await e.raycluster(cluster_name)
    head = await e.head_pod(cluster)
    verify_container_auth_token_env_vars(cluster, head["spec"]["containers"][0])
    workers = await e.worker_pods(cluster)
    assert workers
    for w in workers:
        verify_container_auth_token_env_vars(cluster, w["spec"]["containers"][0])
    await e.eventually(lambda: e.get(BATCH_JOB, name), lambda _: True, timeout=TEST_TIMEOUT_SHORT)
    submitters = await e.eventually(lambda: e.pods(f"job-name={name}"), lambda ps: len(ps) > 0,
                                    timeout=TEST_TIMEOUT_SHORT, what="submitter Pod")
    verify_container_auth_token_env_vars(cluster, submitters[0]["spec"]["containers"][0])
    await e.rayjob_eventually(name, lambda j: is_job_terminal(job_status(j)), timeout=TEST_TIMEOUT_MEDIUM)
    assert job_status(await e.rayjob(name)) == "SUCCEEDED"
    await e.deployment_status_eventually(name, "Complete")


async def test_rayjob_pre_running_deadline_during_initializing(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayJob PreRunningDeadlineSeconds expires during
    Initializing state": an image that cannot be pulled keeps the head from becoming Ready."""
    e = e2e
    await setup_jobs(e)
    spec = new_ray_cluster_spec()
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "invalid-image-does-not-exist:v1.0.0"
    # The registry has no such image: the simulated node is told so (ErrImagePull, ImagePullBackOff).
    await e.sim("POST", "image-pull-failures", {"image": "invalid-image-does-not-exist:v1.0.0"})
    await e.apply(RJ, rayjob("ttl-initializing", e.ns, rayClusterSpec=spec, shutdownAfterJobFinishes=True,
                             preRunningDeadlineSeconds=5))
    await e.deployment_status_eventually("ttl-initializing", "Initializing", timeout=TEST_TIMEOUT_SHORT)
    await e.deployment_status_eventually("ttl-initializing", "Failed", timeout=TEST_TIMEOUT_SHORT)
    assert reason(await e.rayjob("ttl-initializing")) == "PreRunningDeadlineExceeded"


async def test_rayjob_pre_running_deadline_during_waiting(e2e: E2E) -> None:
    """rayjob_test.go TestRayJob / "RayJob PreRunningDeadlineSeconds expires during Waiting state"."""
    e = e2e
    await setup_jobs(e)
    await e.apply(RJ, rayjob("ttl-waiting", e.ns, submissionMode="InteractiveMode",
                             rayClusterSpec=new_ray_cluster_spec(), shutdownAfterJobFinishes=True,
                             preRunningDeadlineSeconds=60))
    await e.deployment_status_eventually("ttl-waiting", "Waiting", timeout=TEST_TIMEOUT_SHORT)
    await e.deployment_status_eventually("ttl-waiting", "Failed", timeout=TEST_TIMEOUT_SHORT)
    assert reason(await e.rayjob("ttl-waiting")) == "PreRunningDeadlineExceeded"
