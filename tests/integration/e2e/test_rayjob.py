"""RayJob end to end (issue 11's "done when") on the local stack: every process real, two
job-reconciler replicas, submitter containers run by the simulated kubelet against the simulated
heads (a job of `python sample_code.py` runs ~0.7 s, `sleep N` N s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime

import httpx
import pytest

from raybus_sim.devstack.stack import LocalStack
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import NS, Kube
from tests.integration.e2e.rayjob_kit import (
    BATCH_JOB,
    ORIGIN,
    RC,
    RJ,
    SAMPLE,
    Jobs,
    Ledger,
    hold_readiness,
    rayjob_doc,
    release_readiness,
    status,
)


@pytest.fixture
async def jobs(kube: Kube) -> AsyncIterator[Jobs]:
    j = Jobs(kube)
    await j.prerequisites(SAMPLE)
    yield j
    await j.delete_all()  # their clusters and submitter Jobs go by garbage collection


@pytest.fixture
async def ledger(kube: Kube) -> AsyncIterator[tuple[Ledger, Ledger]]:
    """Every RayCluster and submitter Job created during the test."""
    clusters, submitters = Ledger(kube.c, RC), Ledger(kube.c, BATCH_JOB)
    await clusters.start()
    await submitters.start()
    yield clusters, submitters
    await clusters.stop()
    await submitters.stop()


async def test_sample_completes_through_its_submitter_job(jobs: Jobs, ledger: tuple[Ledger, Ledger]) -> None:
    """ray-job.sample.yaml as is: New -> Initializing -> Running -> Complete/SUCCEEDED through the
    submitter Job `rayjob-sample` (KubeRay's labels) and a RayCluster the RayJob owns."""
    name = await jobs.apply(rayjob_doc(name="rayjob-sample"))
    job = await jobs.wait_status(name, "Complete", "SUCCEEDED", timeout=60)
    st = status(job)
    uid = job["metadata"]["uid"]
    cluster_name = st["rayClusterName"]
    assert cluster_name.startswith("rayjob-sample-") and st["jobId"].startswith("rayjob-sample-")
    assert st["dashboardURL"] == f"{cluster_name}-head-svc.{NS}.svc.cluster.local:8265"
    assert st["succeeded"] == 1 and st.get("failed", 0) == 0 and st["startTime"] <= st["endTime"]
    assert st["rayJobInfo"]["startTime"] and st["rayJobInfo"]["endTime"]
    assert st["observedGeneration"] == job["metadata"]["generation"]
    assert "ray.io/rayjob-finalizer" in job["metadata"]["finalizers"]
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": name, "uid": uid, "controller": True,
             "blockOwnerDeletion": True}
    cluster = await jobs.cluster(cluster_name)
    assert cluster is not None and cluster["metadata"]["ownerReferences"] == [owner]
    assert cluster["metadata"]["labels"][ORIGIN] == name
    assert cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    submitter = await jobs.submitter(name)
    assert submitter is not None and submitter["metadata"]["ownerReferences"] == [owner]
    assert submitter["metadata"]["labels"] == {ORIGIN: name, "ray.io/originated-from-crd": "RayJob",
                                               "app.kubernetes.io/created-by": "kuberay-operator"}
    assert submitter["spec"]["backoffLimit"] == 2
    env = {e["name"]: e.get("value") for e in submitter["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RAY_JOB_SUBMISSION_ID"] == st["jobId"] and env["RAY_DASHBOARD_ADDRESS"] == st["dashboardURL"]
    assert any(c["type"] == "Complete" for c in submitter["status"]["conditions"])
    # One cluster, one submitter Job, one submission; the cluster stays (no shutdownAfterJobFinishes).
    clusters, submitters = ledger
    assert clusters.with_prefix(name) == {cluster_name: [cluster["metadata"]["uid"]]}
    assert list(submitters.with_prefix(name)) == [name] and len(submitters.added[name]) == 1
    assert await jobs.submissions(cluster_name) == 1
    # KubeRay records its Events on the RayJob (the executor: the batch's primary object).
    for reason in ("CreatedRayCluster", "CreatedRayJobSubmitter", "CreatedService"):
        # (Events outlive their object: an earlier test's rayjob-sample may have left some, under
        # its own uid; only this RayJob's count here.)
        involved = {(o["kind"], o["name"], o.get("uid")) for o in
                    [e["involvedObject"] for e in await jobs.kube.events(name, reason)]
                    if o["kind"] == "RayJob" and o.get("uid") == uid}
        assert involved == {("RayJob", name, uid)}, reason  # (the RayCluster's own CreatedService is its own)


FAIL = "python -c 'import sys; sys.exit(1)'"


@pytest.mark.parametrize("mode", ["K8sJobMode", "HTTPMode", "SidecarMode"])
async def test_submission_mode_succeeds_and_a_failing_entrypoint_is_app_failed(jobs: Jobs, mode: str) -> None:
    short = {"K8sJobMode": "k8s", "HTTPMode": "http", "SidecarMode": "sidecar"}[mode]
    ok = await jobs.apply(rayjob_doc(name=f"e2e-{short}-ok", submissionMode=mode))
    bad = await jobs.apply(rayjob_doc(name=f"e2e-{short}-bad", submissionMode=mode, entrypoint=FAIL))
    good, failed = await asyncio.gather(jobs.wait_status(ok, "Complete", "SUCCEEDED"),
                                        jobs.wait_status(bad, "Failed", "FAILED"))
    assert status(failed)["reason"] == "AppFailed" and status(failed)["failed"] == 1
    assert status(good)["succeeded"] == 1
    for name, job in ((ok, good), (bad, failed)):
        cluster = status(job)["rayClusterName"]
        assert await jobs.submissions(cluster) == 1, name
        submitter = await jobs.submitter(name)
        assert (submitter is not None) == (mode == "K8sJobMode"), name
        if mode == "SidecarMode":
            head = (await jobs.kube.pods(cluster, node_type="head"))[0]
            assert head["spec"]["restartPolicy"] == "Never"
            side = next(c for c in head["status"]["containerStatuses"] if c["name"] == "ray-job-submitter")
            assert side["state"]["terminated"]["exitCode"] == (0 if name == ok else 1)


async def test_a_stopped_ray_job_ends_complete_stopped_in_k8s_job_mode(jobs: Jobs) -> None:
    """`ray job stop` on the head (the user's, not KubeRay's): Ray 2.60's `ray job logs --follow`
    exits 0 for a STOPPED job, so the submitter Job completes and KubeRay v1.7 ends the RayJob
    Complete/STOPPED (IsJobTerminal and the submitter finished), not Failed/SubmissionFailed."""
    name = await jobs.apply(rayjob_doc(name="e2e-k8s-stopped", submissionMode="K8sJobMode", entrypoint="sleep 120"))
    st = status(await jobs.wait_status(name, "Running", "RUNNING"))
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{jobs.kube.stack.dashboard_url}/{NS}/{st['rayClusterName']}/api/jobs/{st['jobId']}/stop")
        assert r.status_code == 200 and r.json() == {"stopped": True}, r.text
    done = status(await jobs.wait_status(name, "Complete", "STOPPED"))
    assert not done.get("reason") and done.get("failed", 0) == 0 and done.get("succeeded", 0) == 0, done
    submitter = await jobs.submitter(name)
    assert submitter is not None
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in submitter["status"]["conditions"])
    assert submitter["status"].get("failed", 0) == 0  # one pod, exit 0: no retry


async def test_interactive_mode_waits_for_the_users_job_id(jobs: Jobs) -> None:
    name = await jobs.apply(rayjob_doc(name="e2e-interactive", submissionMode="InteractiveMode"))
    waiting = await jobs.wait_status(name, "Waiting")
    cluster = status(waiting)["rayClusterName"]
    assert "jobId" not in status(waiting) and status(waiting)["dashboardURL"]
    await jobs.submit_by_hand(cluster, "my-own-job", "sleep 1")
    await jobs.patch(name, {"spec": {"jobId": "my-own-job"}})
    done = await jobs.wait_status(name, "Complete", "SUCCEEDED")
    assert status(done)["jobId"] == "my-own-job" and await jobs.submissions(cluster) == 1
    assert await jobs.submitter(name) is None


async def test_backoff_limit_retries_on_a_new_cluster(jobs: Jobs, ledger: tuple[Ledger, Ledger]) -> None:
    name = await jobs.apply(rayjob_doc(name="e2e-retry", entrypoint=FAIL, backoffLimit=1,
                                       submitterConfig={"backoffLimit": 0}))
    job = await jobs.wait_status(name, "Failed", "FAILED", timeout=90)
    assert status(job)["failed"] == 2 and status(job)["reason"] == "AppFailed"
    clusters, submitters = ledger
    created = clusters.with_prefix(name)
    assert len(created) == 2 and all(len(uids) == 1 for uids in created.values())  # a new name per attempt
    first = next(n for n in created if n != status(job)["rayClusterName"])
    assert await jobs.cluster(first) is None  # the failed attempt's cluster went before the retry
    assert len(submitters.added[name]) == 2  # one submitter Job per attempt, the first deleted
    for cluster in created:
        assert await jobs.submissions(cluster) == 1


async def test_active_and_pre_running_deadlines(jobs: Jobs) -> None:
    active = await jobs.apply(rayjob_doc(name="e2e-deadline", entrypoint="sleep 900", activeDeadlineSeconds=5,
                                         backoffLimit=2))
    pre = await jobs.apply(rayjob_doc(name="e2e-prerunning", submissionMode="InteractiveMode",
                                      preRunningDeadlineSeconds=3))
    a, p = await asyncio.gather(jobs.wait_status(active, "Failed", timeout=30), jobs.wait_status(pre, "Failed", timeout=30))
    assert status(a)["reason"] == "DeadlineExceeded" and status(a)["failed"] == 1  # never retried
    assert status(a)["message"].startswith("The RayJob has passed the activeDeadlineSeconds.")
    assert status(p)["reason"] == "PreRunningDeadlineExceeded"
    assert len(await jobs.clusters(active)) == 1


async def test_pre_running_deadline_is_retried_under_backoff_limit(jobs: Jobs) -> None:
    """v1.7: PreRunningDeadlineExceeded is retried (each attempt on a new cluster gets its own
    deadline). The head never starts (its env names a ConfigMap that does not exist)."""
    doc = rayjob_doc(name="e2e-prerun-retry", preRunningDeadlineSeconds=3, backoffLimit=1)
    head = doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head.setdefault("env", []).append(
        {"name": "NEVER", "valueFrom": {"configMapKeyRef": {"name": "e2e-missing", "key": "k"}}})
    name = await jobs.apply(doc)
    job = await jobs.wait_status(name, "Failed", timeout=60)
    assert status(job)["reason"] == "PreRunningDeadlineExceeded" and status(job)["failed"] == 2


async def test_suspend_and_resume(jobs: Jobs, ledger: tuple[Ledger, Ledger]) -> None:
    created_suspended = await jobs.apply(rayjob_doc(name="e2e-suspended", suspend=True, shutdownAfterJobFinishes=True,
                                                    entrypoint="sleep 1"))
    running = await jobs.apply(rayjob_doc(name="e2e-suspend-run", shutdownAfterJobFinishes=True,
                                          entrypoint="sleep 900"))
    await jobs.wait_status(created_suspended, "Suspended")
    before = await jobs.wait_status(running, "Running", "RUNNING")
    old_cluster = status(before)["rayClusterName"]
    await jobs.patch(running, {"spec": {"suspend": True}})
    suspended = await jobs.wait_status(running, "Suspended")
    assert "rayClusterName" not in status(suspended) and "jobId" not in status(suspended)
    assert await jobs.cluster(old_cluster) is None and await jobs.submitter(running) is None
    clusters, _ = ledger
    assert clusters.with_prefix(created_suspended) == {}  # a RayJob created suspended never creates a cluster
    await asyncio.gather(jobs.patch(created_suspended, {"spec": {"suspend": False}}),
                         jobs.patch(running, {"spec": {"suspend": False}}))
    done, resumed = await asyncio.gather(jobs.wait_status(created_suspended, "Complete", "SUCCEEDED"),
                                         jobs.wait_status(running, "Running", "RUNNING"))
    assert status(resumed)["rayClusterName"] not in ("", old_cluster)  # a resume gets a new cluster
    assert len(clusters.with_prefix(running)) == 2
    assert status(done)["succeeded"] == 1 and len(clusters.with_prefix(created_suspended)) == 1


async def test_shutdown_after_job_finishes_and_deletion_rules(jobs: Jobs, ledger: tuple[Ledger, Ledger]) -> None:
    """ray-job.shutdown.yaml: the cluster goes ttlSecondsAfterFinished (10 s) after the end; and
    deletionRules: DeleteWorkers at once, DeleteCluster after 2 s, DeleteSelf after 4 s."""
    shutdown_path = SAMPLES / "ray-job.shutdown.yaml"
    await jobs.prerequisites(shutdown_path)
    shutdown = await jobs.apply(rayjob_doc(shutdown_path, name="e2e-shutdown"))
    rules = [{"condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": ttl}, "policy": policy}
             for ttl, policy in ((0, "DeleteWorkers"), (2, "DeleteCluster"), (4, "DeleteSelf"))]
    staged = await jobs.apply(rayjob_doc(name="e2e-rules", deletionStrategy={"deletionRules": rules}))
    done = await jobs.wait_status(staged, "Complete", "SUCCEEDED")
    staged_cluster = status(done)["rayClusterName"]

    async def workers_suspended() -> bool:
        rc = await jobs.cluster(staged_cluster)
        return rc is None or all(g.get("suspend") for g in rc["spec"]["workerGroupSpecs"])

    await jobs.kube.eventually(workers_suspended, what="DeleteWorkers")
    await jobs.gone(staged, timeout=30)
    clusters, _ = ledger
    assert staged_cluster in clusters.deleted_at  # DeleteCluster came before DeleteSelf
    finished = await jobs.wait_status(shutdown, "Complete", "SUCCEEDED", timeout=60)
    end = datetime.fromisoformat(status(finished)["endTime"]).timestamp()
    cluster = status(finished)["rayClusterName"]
    await jobs.kube.eventually(lambda: _true(cluster in clusters.deleted_at), timeout=30, what="cluster deleted")
    # endTime has second precision: the deletion is due 10-11 s after the real end.
    assert 9.0 <= clusters.deleted_at[cluster] - end <= 15.0, clusters.deleted_at[cluster] - end
    assert (await jobs.get(shutdown))["metadata"].get("deletionTimestamp") is None  # only its cluster goes


async def _true(value: bool) -> bool:
    return value


async def test_legacy_deletion_policies_on_success_and_on_failure(jobs: Jobs, ledger: tuple[Ledger, Ledger]) -> None:
    """deletionStrategy.onSuccess/onFailure (the legacy fields, RayJobDeletionPolicy gate): the policy
    of the job's outcome runs once it is terminal (ttlSecondsAfterFinished 0), the other never."""
    def legacy(on_success: str, on_failure: str) -> dict[str, dict[str, str]]:
        return {"onSuccess": {"policy": on_success}, "onFailure": {"policy": on_failure}}

    ok = await jobs.apply(rayjob_doc(name="e2e-legacy-ok", deletionStrategy=legacy("DeleteWorkers", "DeleteSelf")))
    bad = await jobs.apply(rayjob_doc(name="e2e-legacy-bad", entrypoint=FAIL,
                                      deletionStrategy=legacy("DeleteSelf", "DeleteCluster")))
    good, failed = await asyncio.gather(jobs.wait_status(ok, "Complete", "SUCCEEDED"),
                                        jobs.wait_status(bad, "Failed", "FAILED"))
    ok_cluster, bad_cluster = status(good)["rayClusterName"], status(failed)["rayClusterName"]
    clusters, _ = ledger
    await jobs.kube.eventually(lambda: _true(bad_cluster in clusters.deleted_at), timeout=30,
                               what="onFailure: DeleteCluster")

    async def workers_suspended() -> bool:
        rc = await jobs.cluster(ok_cluster)
        return rc is not None and all(g.get("suspend") for g in rc["spec"]["workerGroupSpecs"])

    await jobs.kube.eventually(workers_suspended, timeout=30, what="onSuccess: DeleteWorkers")
    await jobs.kube.eventually(lambda: _no_workers(jobs, ok_cluster), timeout=30, what="the workers gone")
    # The policies of the other outcome never ran: both RayJobs stay, the succeeded job's cluster too.
    for name in (ok, bad):
        assert (await jobs.get(name))["metadata"].get("deletionTimestamp") is None, name
    assert ok_cluster not in clusters.deleted_at and await jobs.cluster(ok_cluster) is not None


async def _no_workers(jobs: Jobs, cluster: str) -> bool:
    return not await jobs.kube.pods(cluster, node_type="worker")


async def test_ttl_fires_on_time_after_every_job_reconciler_is_sigkilled(
        jobs: Jobs, ledger: tuple[Ledger, Ledger], stack: LocalStack) -> None:
    """Issue 11: "TTLs must fire on time after a restart of any process". The deadline is endTime +
    ttlSecondsAfterFinished from the RayJob's status, not a timer in the process that saw the end:
    both replicas SIGKILLed during the TTL, the cluster still goes at its deadline."""
    ttl = 30
    name = await jobs.apply(rayjob_doc(name="e2e-ttl-kill", shutdownAfterJobFinishes=True,
                                       ttlSecondsAfterFinished=ttl))
    finished = await jobs.wait_status(name, "Complete", "SUCCEEDED", timeout=60)
    end = datetime.fromisoformat(status(finished)["endTime"]).timestamp()  # second precision
    cluster = status(finished)["rayClusterName"]
    # Kill early enough that the takeover (lease TTL 10 s) completes well before the deadline
    # (end + 30 s), and late enough that a timer restarted by the new process could not fire before
    # killed + 30 s = end + 38 s (or, restarted at the takeover, end + 48 s).
    await asyncio.sleep(max(0.0, end + 8.0 - time.time()))
    killed = time.time()
    for replica in ("job-reconciler-0", "job-reconciler-1"):
        stack.restart(replica, kill=True)
    clusters, _ = ledger
    assert cluster not in clusters.deleted_at, "deleted before its TTL"
    await jobs.kube.eventually(lambda: _true(cluster in clusters.deleted_at), timeout=ttl + 30,
                               what="the cluster deleted after the TTL")
    deleted = clusters.deleted_at[cluster]
    print(f"TTL {ttl} s: cluster deleted {deleted - end:.1f} s after endTime (SIGKILL at +{killed - end:.1f} s)")
    assert deleted - end >= ttl - 0.5, f"deleted {deleted - end:.1f}s after the end (TTL {ttl}s)"
    # The deadline survived the SIGKILL: a deadline restarted by either process could not have
    # fired before killed + ttl (the whole TTL again); this bound leaves ~8 s for a loaded machine.
    assert deleted < killed + ttl, f"deleted {deleted - end:.1f}s after the end: the TTL restarted"
    assert (await jobs.get(name))["metadata"].get("deletionTimestamp") is None  # only its cluster goes


async def test_cluster_selector_uses_an_existing_cluster_and_never_deletes_it(
        jobs: Jobs, ledger: tuple[Ledger, Ledger]) -> None:
    await jobs.kube.apply_cluster("e2e-existing")
    await jobs.kube.wait_ready("e2e-existing", workers=1, timeout=60)
    doc = rayjob_doc(SAMPLES / "ray-job.use-existing-raycluster.yaml", name="e2e-selector",
                     clusterSelector={"ray.io/cluster": "e2e-existing"})
    name = await jobs.apply(doc)
    job = await jobs.wait_status(name, "Complete", "SUCCEEDED")
    assert status(job)["rayClusterName"] == "e2e-existing" and await jobs.submitter(name) is not None
    assert await jobs.submissions("e2e-existing") == 1
    await jobs.c.delete(RJ, namespace=NS, name=name)
    await jobs.gone(name)
    clusters, _ = ledger
    assert clusters.with_prefix(name) == {} and "e2e-existing" not in clusters.deleted_at
    assert await jobs.cluster("e2e-existing") is not None
    await jobs.c.delete(RC, namespace=NS, name="e2e-existing")


async def test_sigkill_of_the_job_reconciler_while_initializing_and_running(
        jobs: Jobs, ledger: tuple[Ledger, Ledger], stack: LocalStack) -> None:
    """Both job-reconciler replicas SIGKILLed while one RayJob waits for its cluster (head readiness
    held) and another's Ray job runs: still one cluster, one submitter Job, one submission each."""
    held = rayjob_doc(name="e2e-kill-init", entrypoint="sleep 1")
    held["spec"]["rayClusterSpec"]["headGroupSpec"]["template"].setdefault("metadata", {})["labels"] = {
        "e2e-hold": "kill-init"}
    hold = await hold_readiness(jobs.kube, "e2e-hold=kill-init")
    init = await jobs.apply(held)
    run = await jobs.apply(rayjob_doc(name="e2e-kill-run", entrypoint="sleep 6"))
    clusters, submitters = ledger
    await asyncio.gather(
        jobs.wait(init, lambda j: status(j).get("jobDeploymentStatus") == "Initializing"
                  and bool(clusters.with_prefix(init)), what="Initializing with its cluster created"),
        jobs.wait_status(run, "Running", "RUNNING"))
    for replica in ("job-reconciler-0", "job-reconciler-1"):
        stack.restart(replica, kill=True)
    await release_readiness(jobs.kube, hold)
    await asyncio.gather(jobs.wait_status(init, "Complete", "SUCCEEDED", timeout=60),
                         jobs.wait_status(run, "Complete", "SUCCEEDED", timeout=60))
    for name in (init, run):
        created = clusters.with_prefix(name)
        assert len(created) == 1 and all(len(uids) == 1 for uids in created.values()), created
        assert len(submitters.added[name]) == 1
        assert await jobs.submissions(next(iter(created))) == 1
