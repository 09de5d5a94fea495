"""The user's flow from the issue: kubectl apply a sample, get rayclusters,pods -o wide, and
kubectl delete cascades to everything raybus created (ownerReferences -> garbage collection)."""

from __future__ import annotations

import asyncio
import subprocess

from raybus.adapters.kube import resource_for
from raybus.cli.stack import LocalStack
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import Kube

SAMPLE = SAMPLES / "ray-cluster.sample.yaml"
SERVICE = resource_for("v1", "Service")


def kubectl(stack: LocalStack, *args: str) -> str:
    done = subprocess.run(["kubectl", "--kubeconfig", str(stack.kubeconfig), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_kubectl_apply_get_and_delete_cascades(kube: Kube, stack: LocalStack) -> None:
    assert "raycluster.ray.io/raycluster-kuberay created" in kubectl(stack, "apply", "-f", str(SAMPLE))
    await kube.wait_ready("raycluster-kuberay", workers=1)
    table = kubectl(stack, "get", "rayclusters,pods", "-o", "wide")
    assert "raycluster-kuberay" in table and "ready" in table  # printer column STATUS
    assert table.count("Running") == 2
    kubectl(stack, "delete", "-f", str(SAMPLE))

    async def all_gone() -> bool:
        pods = await kube.pods("raycluster-kuberay")
        svcs, _ = await kube.c.list_all(SERVICE, namespace="default",
                                        label_selector="ray.io/cluster=raycluster-kuberay")
        return not pods and not svcs

    await kube.eventually(all_gone, what="pods and services garbage-collected")
    await asyncio.sleep(1.0)  # the reconciler must not recreate anything for a deleted cluster
    assert await kube.pods("raycluster-kuberay") == []
