"""ray-operator/test/e2e/raycluster_test.go: TestRayClusterManagedBy (one Python test per
subtest), TestRayClusterSuspend, TestRayClusterWithResourceQuota, TestRayClusterScalingDown,
TestRayClusterUpgradeStrategy."""

from __future__ import annotations

import pytest

from raybus.adapters.kube import KubeError
from tests.integration.e2e.kuberay_v17.support import (
    E2E,
    POD,
    RC,
    RESOURCE_QUOTA,
    TEST_TIMEOUT_MEDIUM,
    TEST_TIMEOUT_SHORT,
    Json,
    head_pod_template,
    new_ray_cluster_spec,
    status,
    worker_pod_template,
)


def raycluster(name: str, spec: Json) -> Json:
    return {"metadata": {"name": name}, "spec": spec}


def condition(rc: Json, type_: str) -> Json:
    return next((c for c in status(rc).get("conditions") or [] if c.get("type") == type_), {})


def matches(type_: str, want: str, reason: str, message: str | None = None):  # type: ignore[no-untyped-def]
    """StatusCondition(type) + MatchCondition / MatchConditionContainsMessage."""
    def check(rc: Json) -> bool:
        c = condition(rc, type_)
        return (c.get("status") == want and c.get("reason") == reason
                and (message is None or message in str(c.get("message"))))
    return check


def state_ready(rc: Json) -> bool:
    return status(rc).get("state") == "ready"


async def test_raycluster_managed_by_kuberay(e2e: E2E) -> None:
    """raycluster_test.go TestRayClusterManagedBy / "Successful creation of cluster, managed by Kuberay Operator"."""
    e = e2e
    spec = new_ray_cluster_spec()
    spec["managedBy"] = "ray.io/kuberay-operator"
    await e.apply(RC, raycluster("raycluster-ok", spec))
    await e.eventually(lambda: e.raycluster("raycluster-ok"), state_ready, timeout=TEST_TIMEOUT_MEDIUM)


async def test_raycluster_managed_by_kueue_skipped(e2e: E2E) -> None:
    """raycluster_test.go TestRayClusterManagedBy / "Creation of cluster skipped, managed by
    Kueue": no conditions for 3 s; managedBy is immutable."""
    e = e2e
    spec = new_ray_cluster_spec()
    spec["managedBy"] = "kueue.x-k8s.io/multikueue"
    await e.apply(RC, raycluster("raycluster-skip", spec))
    await e.consistently(lambda: e.raycluster("raycluster-skip"), lambda rc: not status(rc).get("conditions"),
                         duration=3)
    spec["managedBy"] = "ray.io/kuberay-operator"
    with pytest.raises(KubeError):
        await e.apply(RC, raycluster("raycluster-skip", spec))
    await e.eventually(lambda: e.raycluster("raycluster-skip"),
                       lambda rc: rc["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue")


async def test_raycluster_managed_by_unsupported(e2e: E2E) -> None:
    """raycluster_test.go TestRayClusterManagedBy / "Failed creation of cluster, managed by
    external non supported controller": 422 Invalid."""
    e = e2e
    spec = new_ray_cluster_spec()
    spec["managedBy"] = "controller.com/not-supported"
    with pytest.raises(KubeError) as err:
        await e.apply(RC, raycluster("raycluster-fail", spec))
    assert err.value.code == 422 and err.value.reason == "Invalid", err.value


async def test_raycluster_suspend(e2e: E2E) -> None:
    """raycluster_test.go TestRayClusterSuspend: the conditions through suspend and resume."""
    e, name = e2e, "raycluster-suspend"
    ac = raycluster(name, new_ray_cluster_spec())
    await e.apply(RC, ac)
    get = lambda: e.raycluster(name)
    await e.eventually(get, matches("HeadPodReady", "True", "HeadPodRunningAndReady"), timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(get, matches("RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime"),
                       timeout=TEST_TIMEOUT_MEDIUM)
    ac["spec"]["suspend"] = True
    await e.apply(RC, ac)
    await e.eventually(get, matches("RayClusterSuspended", "True", "RayClusterSuspended"), timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(get, matches("HeadPodReady", "False", "HeadPodNotFound"), timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(get, matches("RayClusterProvisioned", "False", "RayClusterPodsProvisioning"),
                       timeout=TEST_TIMEOUT_MEDIUM)
    ac["spec"]["suspend"] = False
    await e.apply(RC, ac)
    await e.eventually(get, matches("RayClusterSuspended", "False", "RayClusterSuspended"), timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(get, matches("HeadPodReady", "True", "HeadPodRunningAndReady"), timeout=TEST_TIMEOUT_MEDIUM)
    await e.eventually(get, matches("RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime"),
                       timeout=TEST_TIMEOUT_MEDIUM)


async def test_raycluster_with_resource_quota(e2e: E2E) -> None:
    """raycluster_test.go TestRayClusterWithResourceQuota: a quota of 0.1 CPU / 0.1Gi makes the
    head Pod's create forbidden; ReplicaFailure True, FailedCreateHeadPod, "forbidden: exceeded quota"."""
    e, name = e2e, "raycluster-resource-quota"
    await e.c.create(RESOURCE_QUOTA, {"apiVersion": "v1", "kind": "ResourceQuota",
                                      "metadata": {"name": "test-quota", "namespace": e.ns},
                                      "spec": {"hard": {"limits.cpu": "0.1", "limits.memory": "0.1Gi"}}},
                     namespace=e.ns)
    await e.apply(RC, raycluster(name, new_ray_cluster_spec()))
    await e.eventually(lambda: e.raycluster(name),
                       matches("ReplicaFailure", "True", "FailedCreateHeadPod", "forbidden: exceeded quota"),
                       timeout=TEST_TIMEOUT_SHORT)


async def test_raycluster_scaling_down(e2e: E2E) -> None:
    """raycluster_test.go TestRayClusterScalingDown: with finalizers on the Pods, scaling 2 -> 1
    leaves exactly one worker with a deletionTimestamp and the head without one."""
    e, name = e2e, "raycluster-scaling-down"
    head = head_pod_template()
    head["metadata"] = {"finalizers": ["test.kuberay.io/finalizers"]}
    worker = worker_pod_template()
    worker["metadata"] = {"finalizers": ["test.kuberay.io/finalizers"]}
    ac = raycluster(name, {"rayVersion": "2.55.0",
                           "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": head},
                           "workerGroupSpecs": [{"replicas": 2, "minReplicas": 1, "maxReplicas": 5,
                                                 "groupName": "small-group", "rayStartParams": {"num-cpus": "1"},
                                                 "template": worker}]})
    await e.apply(RC, ac)
    await e.eventually(lambda: e.raycluster(name), state_ready, timeout=TEST_TIMEOUT_MEDIUM)
    all_pods = [await e.head_pod(name), *await e.worker_pods(name)]
    try:
        ac["spec"]["workerGroupSpecs"][0]["replicas"] = 1
        await e.apply(RC, ac)

        def one_deleting(pods: list[Json]) -> bool:
            marks = sorted(bool(p["metadata"].get("deletionTimestamp")) for p in pods)
            return marks == [False, True]
        await e.eventually(lambda: e.worker_pods(name), one_deleting, timeout=TEST_TIMEOUT_SHORT,
                           what="only one worker pod having deletionTimestamp")
        assert not (await e.head_pod(name))["metadata"].get("deletionTimestamp")
    finally:
        for pod in all_pods:
            await e.c.merge_patch(POD, namespace=e.ns, name=pod["metadata"]["name"],
                                  patch={"metadata": {"finalizers": []}})


async def test_raycluster_upgrade_strategy_recreate(e2e: E2E) -> None:
    """raycluster_test.go TestRayClusterUpgradeStrategy: Recreate replaces the head (new name,
    new ray.io/upgrade-strategy-recreate-hash) when the images change; one worker after."""
    e, name = e2e, "raycluster-upgrade-recreate"
    spec = new_ray_cluster_spec()
    spec["upgradeStrategy"] = {"type": "Recreate"}
    ac = raycluster(name, spec)
    await e.apply(RC, ac)
    await e.eventually(lambda: e.raycluster(name), state_ready, timeout=TEST_TIMEOUT_MEDIUM)
    head = await e.head_pod(name)
    initial_name = head["metadata"]["name"]
    initial_hash = head["metadata"]["annotations"].get("ray.io/upgrade-strategy-recreate-hash")
    assert len(await e.worker_pods(name)) == 1
    ac["spec"]["rayVersion"] = "2.51.0"
    ac["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.51.0"
    ac["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.51.0"
    await e.apply(RC, ac)
    new = await e.eventually(lambda: e.head_pod(name),
                             lambda p: p["metadata"]["name"] != initial_name
                             and (p.get("status") or {}).get("phase") == "Running",
                             timeout=TEST_TIMEOUT_MEDIUM, what="a new Running head")
    assert new["metadata"]["annotations"].get("ray.io/upgrade-strategy-recreate-hash") != initial_hash
    assert len(await e.worker_pods(name)) == 1
