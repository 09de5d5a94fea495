"""--batch-scheduler end to end (issue 13 item 3) on a stack of its own: the local API server, watcher,
command-executor and one cluster-reconciler, restarted with another RAYBUS_BATCH_SCHEDULER per test
(an operator-wide flag, as in KubeRay). The CRDs a scheduler needs are installed through the API
server by the test that uses them; a missing one is a Warning Event, not a crash."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import yaml

from raybus.adapters.kube import KubeClient, KubeError, Resource, new_api_client, resource_for
from raybus_sim.devstack.stack import LocalStack
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import NS, RC, SAMPLE, Kube

CRD = Resource(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions",
               kind="CustomResourceDefinition", namespaced=False)
VOLCANO_PG = resource_for("scheduling.volcano.sh/v1beta1", "PodGroup")
PLUGINS_PG = resource_for("scheduling.x-k8s.io/v1alpha1", "PodGroup")


def _pod_group_crd(group: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"podgroups.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup",
                           "listKind": "PodGroupList"},
                 "versions": [{"name": version, "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


@pytest.fixture(scope="module")
def sched_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = LocalStack(home=tmp_path_factory.mktemp("sched"), replicas=1,
                   services=["watcher", "command_executor", "cluster_reconciler"],
                   extra_env={"RAYBUS_BATCH_SCHEDULER": "volcano"})
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture
async def skube(sched_stack: LocalStack) -> AsyncIterator[Kube]:
    client = KubeClient(await new_api_client(str(sched_stack.kubeconfig)))
    try:
        yield Kube(client, sched_stack)
    finally:
        await client.close()


async def _reconfigure(kube: Kube, **env: str) -> None:
    """Restart the operator with other flags, as a KubeRay redeploy would: every process that reads
    them, the executor too (its admission rebuilds Pods with the same settings; the install feeds
    them all from one ConfigMap, whose change rolls each Deployment)."""
    kube.stack.env.update(env)
    for name in ("watcher", "command-executor", "cluster-reconciler"):
        await asyncio.to_thread(kube.stack.restart, name)


async def _install(kube: Kube, group: str, version: str) -> None:
    try:
        await kube.c.create(CRD, _pod_group_crd(group, version), namespace=None)
    except KubeError as exc:
        if not exc.already_exists:
            raise


def _cluster(name: str, *, labels: dict[str, str] | None = None, replicas: int = 1) -> dict[str, Any]:
    body = copy.deepcopy(SAMPLE)
    body["metadata"] = {"name": name, "namespace": NS, "labels": labels or {}}
    body["spec"]["workerGroupSpecs"][0].update(replicas=replicas, minReplicas=0, maxReplicas=5)
    return body


async def test_volcano_pod_group_queue_and_pod_metadata(skube: Kube) -> None:
    await _install(skube, "scheduling.volcano.sh", "v1beta1")
    await _reconfigure(skube, RAYBUS_BATCH_SCHEDULER="volcano")  # the watcher now lists PodGroups
    name = "vc-demo"
    labels = {"volcano.sh/queue-name": "kuberay-test-queue", "ray.io/priority-class-name": "high"}
    await skube.c.create(RC, _cluster(name, labels=labels), namespace=NS)
    await skube.wait_ready(name, workers=1, timeout=60)
    pg = await skube.c.get(VOLCANO_PG, namespace=NS, name=f"ray-{name}-pg")
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["queue"] == "kuberay-test-queue"
    assert pg["spec"]["priorityClassName"] == "high"
    assert pg["spec"]["minResources"] == {"cpu": "2", "memory": "6Gi"}
    assert pg["metadata"]["ownerReferences"][0]["name"] == name
    for pod in await skube.pods(name):
        meta = pod["metadata"]
        assert pod["spec"]["schedulerName"] == "volcano"
        assert meta["annotations"]["scheduling.k8s.io/group-name"] == f"ray-{name}-pg"
        assert meta["annotations"]["volcano.sh/task-spec"] == meta["labels"]["ray.io/group"]
        assert meta["labels"]["volcano.sh/queue-name"] == "kuberay-test-queue"
    # A scale-up resizes the gang before the new Pods exist.
    rc = await skube.cluster(name)
    groups = rc["spec"]["workerGroupSpecs"]
    groups[0]["replicas"] = 3
    await skube.patch_cluster(name, {"spec": {"workerGroupSpecs": groups}})
    await skube.wait_ready(name, workers=3, timeout=60)

    async def resized() -> bool:
        return bool((await skube.c.get(VOLCANO_PG, namespace=NS, name=f"ray-{name}-pg"))["spec"]["minMember"] == 4)

    await skube.eventually(resized, what="PodGroup minMember 4")


async def test_missing_crd_is_a_warning_then_recovers_when_installed(skube: Kube) -> None:
    await _reconfigure(skube, RAYBUS_BATCH_SCHEDULER="scheduler-plugins")
    name = "sp-demo"
    await skube.c.create(RC, _cluster(name, labels={"ray.io/gang-scheduling-enabled": "true"}), namespace=NS)

    async def warned() -> bool:
        return bool(await skube.events(name, "FailedToCreatePodGroup"))

    await skube.eventually(warned, what="FailedToCreatePodGroup Warning")
    (event,) = await skube.events(name, "FailedToCreatePodGroup")
    assert event["type"] == "Warning" and "podgroups.scheduling.x-k8s.io" in event["message"]
    assert await skube.pods(name) == []  # no Pod before the PodGroup, as KubeRay's early return
    assert skube.stack.proc("cluster-reconciler").popen.poll() is None  # no crash
    await _install(skube, "scheduling.x-k8s.io", "v1alpha1")
    await skube.wait_ready(name, workers=1, timeout=60)
    pg = await skube.c.get(PLUGINS_PG, namespace=NS, name=name)
    assert pg["spec"] == {"minMember": 2, "minResources": {"cpu": "2", "memory": "6Gi"}}
    for pod in await skube.pods(name):
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == name


async def test_yunikorn_sample_labels_and_task_groups_with_login_shell(skube: Kube) -> None:
    await _reconfigure(skube, RAYBUS_BATCH_SCHEDULER="yunikorn", ENABLE_LOGIN_SHELL="true")
    body = next(d for d in yaml.safe_load_all((SAMPLES / "ray-cluster.yunikorn-scheduler.yaml").read_text())
                if isinstance(d, dict) and d.get("kind") == "RayCluster")
    body["metadata"]["namespace"] = NS
    name = body["metadata"]["name"]
    await skube.c.create(RC, body, namespace=NS)
    await skube.wait_ready(name, workers=2, timeout=60)
    for pod in await skube.pods(name):
        meta = pod["metadata"]
        assert pod["spec"]["schedulerName"] == "yunikorn"
        assert meta["labels"]["applicationId"] == "test-yunikorn-0" and meta["labels"]["queue"] == "root.test"
        assert meta["annotations"]["yunikorn.apache.org/task-group-name"] == meta["labels"]["ray.io/group"]
        assert '"name":"headgroup"' in meta["annotations"]["yunikorn.apache.org/task-groups"]
        # ENABLE_LOGIN_SHELL=true: KubeRay's GetContainerCommand gives -cl.
        assert pod["spec"]["containers"][0]["command"] == ["/bin/bash", "-cl", "--"]
