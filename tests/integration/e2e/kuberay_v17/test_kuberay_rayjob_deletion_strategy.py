"""ray-operator/test/e2erayjob/rayjob_deletion_strategy_test.go, TestDeletionStrategy: one Python
test per table entry. The explicit Consistently windows of the Go test (8, 10, 12, 15 s) measure
against the rules' TTLs and are kept as they are."""

from __future__ import annotations

from typing import Any

from tests.integration.e2e.kuberay_v17.support import (
    CM,
    COUNTER_RUNTIME_ENV,
    E2E,
    RC,
    RJ,
    TEST_TIMEOUT_MEDIUM,
    TEST_TIMEOUT_SHORT,
    Json,
    deployment_status,
    job_status,
    job_submitter_pod_template,
    jobs_config_map,
    new_ray_cluster_spec,
    rayjob,
    reason,
    status,
)

ACTIVE_DEADLINE_AFTER_RUNNING_SECONDS = 1


def rule(policy: str, ttl: int, *, job_status_: str | None = "SUCCEEDED", deployment: str | None = None) -> Json:
    cond: Json = {"ttlSeconds": ttl}
    if deployment is not None:
        cond["jobDeploymentStatus"] = deployment
    else:
        cond["jobStatus"] = job_status_
    return {"policy": policy, "condition": cond}


def counter_job(e: E2E, name: str, strategy: Json, **extra: Any) -> Json:
    spec: Json = {"rayClusterSpec": new_ray_cluster_spec(mount_jobs=True), "entrypoint": "python /home/ray/jobs/counter.py",
                  "runtimeEnvYAML": COUNTER_RUNTIME_ENV, "shutdownAfterJobFinishes": False,
                  "deletionStrategy": strategy, "submitterPodTemplate": job_submitter_pod_template()}
    spec.update(extra)
    return rayjob(name, e.ns, **spec)


def long_running_job(e: E2E, name: str, policy: str) -> Json:
    return rayjob(name, e.ns, rayClusterSpec=new_ray_cluster_spec(mount_jobs=True),
                  entrypoint="python /home/ray/jobs/long_running.py", shutdownAfterJobFinishes=False,
                  deletionStrategy={"deletionRules": [rule(policy, 10, deployment="Failed")]},
                  submitterPodTemplate=job_submitter_pod_template())


async def apply_and_wait_for_completion(e: E2E, ac: Json) -> Json:
    """applyJobScriptConfigMap + applyRayJobAndWaitForCompletion."""
    await e.apply(CM, jobs_config_map(e.ns, "counter.py", "fail.py", "long_running.py"))
    await e.apply(RJ, ac)
    job = await e.rayjob_eventually(ac["metadata"]["name"], lambda j: job_status(j) == "SUCCEEDED"
                                    and deployment_status(j) == "Complete", timeout=TEST_TIMEOUT_MEDIUM)
    assert status(job).get("rayClusterName")
    return job


async def apply_and_wait_for_deployment_failed(e: E2E, ac: Json) -> Json:
    """applyRayJobAndWaitForJobDeploymentStatusFailed: Running/RUNNING, then activeDeadlineSeconds=1
    -> Failed/DeadlineExceeded with jobStatus still RUNNING."""
    await e.apply(CM, jobs_config_map(e.ns, "counter.py", "fail.py", "long_running.py"))
    name = ac["metadata"]["name"]
    await e.apply(RJ, ac)
    await e.rayjob_eventually(name, lambda j: deployment_status(j) == "Running" and job_status(j) == "RUNNING",
                              timeout=TEST_TIMEOUT_MEDIUM)
    ac["spec"]["activeDeadlineSeconds"] = ACTIVE_DEADLINE_AFTER_RUNNING_SECONDS
    await e.apply(RJ, ac)
    job = await e.rayjob_eventually(name, lambda j: deployment_status(j) == "Failed" and reason(j) == "DeadlineExceeded"
                                    and job_status(j) == "RUNNING", timeout=TEST_TIMEOUT_MEDIUM)
    assert status(job).get("rayClusterName")
    return job


async def ready(e: E2E, cluster: str) -> None:
    await e.eventually(lambda: e.raycluster(cluster), lambda c: status(c).get("state") == "ready",
                       timeout=TEST_TIMEOUT_SHORT, what=f"{cluster} ready")


async def all_present(e: E2E, job: str, cluster: str, *, workers: bool = True, head: bool = True) -> bool:
    rc = await e.raycluster(cluster)
    if workers and not await e.worker_pods(rc):
        return False
    if head:
        await e.head_pod(rc)
    await e.rayjob(job)
    return True


async def workers_gone(e: E2E, cluster: str) -> bool:
    return await e.worker_pods(await e.raycluster(cluster)) == []


async def delete_workers_case(e: E2E, job: Json, name: str) -> None:
    cluster = status(job)["rayClusterName"]
    await ready(e, cluster)
    assert await e.worker_pods(await e.raycluster(cluster))
    await e.consistently(lambda: all_present(e, name, cluster), bool, duration=8, what="resources during TTL")
    await e.eventually(lambda: workers_gone(e, cluster), bool, timeout=TEST_TIMEOUT_MEDIUM, what="workers deleted")
    await e.consistently(lambda: e.raycluster(cluster), lambda c: status(c).get("state") == "ready", duration=10,
                         what="cluster stays ready")
    await e.head_pod(await e.raycluster(cluster))
    await e.rayjob(name)


async def test_deletion_rules_delete_workers(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithDeleteWorkersPolicy."""
    name = "delete-workers-test"
    job = await apply_and_wait_for_completion(e2e, counter_job(e2e, name, {"deletionRules": [rule("DeleteWorkers", 10)]}))
    await delete_workers_case(e2e, job, name)


async def test_deletion_rules_delete_cluster(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithDeleteClusterPolicy."""
    e, name = e2e, "delete-cluster-test"
    job = await apply_and_wait_for_completion(e, counter_job(e, name, {"deletionRules": [rule("DeleteCluster", 10)]}))
    cluster = status(job)["rayClusterName"]
    await ready(e, cluster)
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, timeout=TEST_TIMEOUT_MEDIUM)
    await e.rayjob(name)


async def test_deletion_rules_delete_self(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithDeleteSelfPolicy."""
    e, name = e2e, "delete-self-test"
    job = await apply_and_wait_for_completion(e, counter_job(e, name, {"deletionRules": [rule("DeleteSelf", 10)]}))
    await e.eventually(lambda: e.is_not_found(RJ, name), bool, timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(lambda: e.is_not_found(RC, status(job)["rayClusterName"]), bool, timeout=TEST_TIMEOUT_MEDIUM)


async def test_deletion_rules_delete_none(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithDeleteNonePolicy."""
    e, name = e2e, "delete-none-test"
    job = await apply_and_wait_for_completion(e, counter_job(e, name, {"deletionRules": [rule("DeleteNone", 5)]}))
    cluster = status(job)["rayClusterName"]
    await e.consistently(lambda: all_present(e, name, cluster, head=False), bool, duration=10, what="all preserved")


async def test_deletion_rules_multi_stage(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testMultiStageDeletion: Workers (15 s) -> Cluster (35 s) -> Self (55 s)."""
    e, name = e2e, "multi-stage-test"
    rules = [rule("DeleteWorkers", 15), rule("DeleteCluster", 35), rule("DeleteSelf", 55)]
    job = await apply_and_wait_for_completion(e, counter_job(e, name, {"deletionRules": rules}))
    cluster = status(job)["rayClusterName"]
    await ready(e, cluster)
    await e.consistently(lambda: all_present(e, name, cluster), bool, duration=12, what="all present before 15 s")
    await e.eventually(lambda: workers_gone(e, cluster), bool, timeout=TEST_TIMEOUT_MEDIUM, what="workers deleted")
    await e.rayjob(name)
    await e.head_pod(await e.raycluster(cluster))
    await e.consistently(lambda: all_present(e, name, cluster, workers=False), bool, duration=15,
                         what="head and RayJob between stages")
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, timeout=TEST_TIMEOUT_MEDIUM)
    await e.rayjob(name)
    await e.consistently(lambda: e.rayjob(name), lambda j: j is not None, duration=15, what="RayJob until its TTL")
    await e.eventually(lambda: e.is_not_found(RJ, name), bool, timeout=TEST_TIMEOUT_MEDIUM)


async def test_deletion_legacy_on_success_delete_cluster(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testLegacyOnSuccessDeleteCluster."""
    e, name = e2e, "legacy-success-test"
    strategy = {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteCluster"}}
    job = await apply_and_wait_for_completion(e, counter_job(e, name, strategy, shutdownAfterJobFinishes=True,
                                                             ttlSecondsAfterFinished=10))
    await e.eventually(lambda: e.is_not_found(RC, status(job)["rayClusterName"]), bool, timeout=TEST_TIMEOUT_MEDIUM)
    await e.rayjob(name)


async def test_deletion_rules_failed_delete_workers(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithJobDeploymentStatusFailedAndDeleteWorkersPolicy."""
    name = "delete-workers-after-jobdeploymentstatus-failed"
    job = await apply_and_wait_for_deployment_failed(e2e, long_running_job(e2e, name, "DeleteWorkers"))
    await delete_workers_case(e2e, job, name)


async def test_deletion_rules_failed_delete_cluster(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithJobDeploymentStatusFailedAndDeleteClusterPolicy."""
    e, name = e2e, "delete-cluster-after-jobdeploymentstatus-failed"
    job = await apply_and_wait_for_deployment_failed(e, long_running_job(e, name, "DeleteCluster"))
    cluster = status(job)["rayClusterName"]
    await ready(e, cluster)
    await e.eventually(lambda: e.is_not_found(RC, cluster), bool, timeout=TEST_TIMEOUT_MEDIUM)
    await e.rayjob(name)


async def test_deletion_rules_failed_delete_self(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithJobDeploymentStatusFailedAndDeleteSelfPolicy."""
    e, name = e2e, "delete-self-after-jobdeploymentstatus-failed"
    job = await apply_and_wait_for_deployment_failed(e, long_running_job(e, name, "DeleteSelf"))
    await e.eventually(lambda: e.is_not_found(RJ, name), bool, timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(lambda: e.is_not_found(RC, status(job)["rayClusterName"]), bool, timeout=TEST_TIMEOUT_MEDIUM)


async def test_deletion_rules_failed_delete_none(e2e: E2E) -> None:
    """rayjob_deletion_strategy_test.go testDeletionRulesWithJobDeploymentStatusFailedAndDeleteNonePolicy."""
    e, name = e2e, "delete-none-after-jobdeploymentstatus-failed"
    job = await apply_and_wait_for_deployment_failed(e, long_running_job(e, name, "DeleteNone"))
    cluster = status(job)["rayClusterName"]
    await e.consistently(lambda: all_present(e, name, cluster, head=False), bool, duration=10, what="all preserved")
