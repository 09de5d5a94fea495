"""The user's flow from the issue: kubectl apply a sample, get rayclusters,pods -o wide, and
kubectl delete cascades to everything raybus created (ownerReferences -> garbage collection)."""

from __future__ import annotations

import subprocess

from raybus.adapters.kube import resource_for
from raybus_sim.devstack.stack import LocalStack
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import Kube

SAMPLE = SAMPLES / "ray-cluster.sample.yaml"
SERVICE = resource_for("v1", "Service")


def kubectl(stack: LocalStack, *args: str) -> str:
    done = subprocess.run(["kubectl", "--kubeconfig", str(stack.kubeconfig), *args],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_kubectl_apply_get_and_delete_cascades(kube: Kube, stack: LocalStack) -> None:
    assert "raycluster.ray.io/raycluster-kuberay created" in kubectl(stack, "apply", "-f", str(SAMPLE))
    await kube.wait_ready("raycluster-kuberay", workers=1)
    table = kubectl(stack, "get", "raycluster", "raycluster-kuberay", "-o", "wide")
    assert "raycluster-kuberay" in table and "ready" in table  # printer column STATUS
    # Other tests' clusters share the namespace: only this cluster's pods.
    pods = kubectl(stack, "get", "pods", "-l", "ray.io/cluster=raycluster-kuberay", "-o", "wide")
    assert pods.count("Running") == 2
    kubectl(stack, "delete", "-f", str(SAMPLE))

    async def all_gone() -> bool:
        pods = await kube.pods("raycluster-kuberay")
        svcs, _ = await kube.c.list_all(SERVICE, namespace="default",
                                        label_selector="ray.io/cluster=raycluster-kuberay")
        return not pods and not svcs

    await kube.eventually(all_gone, what="pods and services garbage-collected")
    await kube.settled("raycluster-kuberay")  # the reconciler must not recreate anything for it
    assert await kube.pods("raycluster-kuberay") == []
