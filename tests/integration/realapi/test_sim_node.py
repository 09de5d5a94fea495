"""The simulated node (raybus_sim.kubelet) as an API client of the real kube-apiserver: what the real
server accepts from it (pods/binding, pods/status, the final delete) and what the real
kube-controller-manager does with the Pods it runs (Job completion, EndpointSlices). The same node
runs in-process against the local API server in tests/integration/sim/test_kubelet*.py.

Pods here name their node up front: the e2e stack's node (`raybus-sim-node`) may share this
control plane, and it only takes unbound Pods or its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from aiohttp import web

from raybus.adapters.kube import KubeClient, KubeError, new_api_client, resource_for
from raybus_sim.kubelet import Delays, KubeletConfig
from raybus_sim.kubelet.client import ClusterView
from raybus_sim.kubelet.node import SimNode
from raybus_sim.testing.envtest import ControlPlane
from raybus_sim.testing.servers import free_port

pytestmark = pytest.mark.integration
NODE = "realapi-test-node"
FAST = Delays(schedule=0.01, pull=0.01, start=0.01, ready=0.02, restart=0.01, terminate=0.0)
POD = resource_for("v1", "Pod")
JOB = resource_for("batch/v1", "Job")
SLICE = resource_for("discovery.k8s.io/v1", "EndpointSlice")
SERVICE = resource_for("v1", "Service")


async def _eventually(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = await check()
            if result:
                return result
        except KubeError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def node(control_plane: ControlPlane) -> AsyncIterator[tuple[SimNode, str]]:
    """The node with its fault API on a port of its own."""
    sim = await SimNode.start(await ClusterView.from_kubeconfig(str(control_plane.admin_kubeconfig)),
                              KubeletConfig(node_name=NODE, delays=FAST))
    app = web.Application()
    sim.add_fault_routes(app)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield sim, f"http://127.0.0.1:{port}"
    await runner.cleanup()
    await sim.stop()


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    client = KubeClient(await new_api_client(str(control_plane.admin_kubeconfig)))
    yield client
    await client.close()


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox:1.36",
                                                        "ports": [{"containerPort": 8080}]}], **spec}}


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions") or [])


async def test_pod_runs_restarts_and_is_deleted_gracefully(node: tuple[SimNode, str], kube: KubeClient,
                                                          namespace: str) -> None:
    _, sim_url = node
    await kube.create(POD, _pod("p1", terminationGracePeriodSeconds=30), namespace=namespace)

    async def running() -> dict[str, Any] | None:
        pod = await kube.get(POD, namespace=namespace, name="p1")
        return pod if pod["status"].get("phase") == "Running" and _ready(pod) else None

    pod = await _eventually(running, "p1 Running and Ready")
    status = pod["status"]
    assert status["podIP"].startswith("10.244.") and status["hostIP"] == "172.18.0.2"
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert status["containerStatuses"][0]["state"]["running"]["startedAt"]

    # A container exit: the real server takes the kubelet's terminated/lastState/restartCount.
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{sim_url}/sim/pods/{namespace}/p1/containers/c/terminate",
                            json={"exitCode": 137, "reason": "OOMKilled"})
        r.raise_for_status()

    async def restarted() -> bool:
        cs = (await kube.get(POD, namespace=namespace, name="p1"))["status"]["containerStatuses"][0]
        return bool(cs["restartCount"] == 1 and cs["lastState"]["terminated"]["reason"] == "OOMKilled"
                    and "running" in cs["state"])

    await _eventually(restarted, "p1 restarted once")

    # Graceful deletion: the real server keeps the Pod (deletionTimestamp) until the kubelet
    # confirms with gracePeriodSeconds=0.
    await kube.delete(POD, namespace=namespace, name="p1")

    async def gone() -> bool:
        try:
            await kube.get(POD, namespace=namespace, name="p1")
        except KubeError as err:
            return err.not_found
        return False

    await _eventually(gone, "p1 deleted by the kubelet")


async def test_real_job_and_endpointslice_controllers_follow_the_node(
        node: tuple[SimNode, str], kube: KubeClient, namespace: str) -> None:
    await kube.create(SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
                      namespace=namespace)
    await kube.create(POD, _pod("web"), namespace=namespace)

    async def endpoint() -> bool:
        slices, _ = await kube.list_all(SLICE, namespace=namespace, label_selector="kubernetes.io/service-name=web")
        eps = [e for s in slices for e in s.get("endpoints") or []]
        return len(eps) == 1 and eps[0]["conditions"]["ready"] and eps[0]["addresses"][0].startswith("10.244.")

    await _eventually(endpoint, "the EndpointSlice with the Pod's IP, ready")

    # A submitter-like Job whose container exits 0 (the fault API stands in for the program): the
    # real Job controller sees the Pod Succeeded and completes the Job.
    template = _pod("job")["spec"] | {"restartPolicy": "Never"}
    await kube.create(JOB, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
                            "spec": {"backoffLimit": 0, "template": {"spec": template}}}, namespace=namespace)

    async def job_pod() -> str | None:
        pods, _ = await kube.list_all(POD, namespace=namespace, label_selector="job-name=once")
        running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
        return str(running[0]["metadata"]["name"]) if running else None

    pod = await _eventually(job_pod, "the Job's Pod running")
    async with httpx.AsyncClient() as http:
        (await http.post(f"{node[1]}/sim/pods/{namespace}/{pod}/succeed", json={})).raise_for_status()

    async def complete() -> bool:
        job = await kube.get(JOB, namespace=namespace, name="once")
        return any(c["type"] == "Complete" and c["status"] == "True"
                   for c in job.get("status", {}).get("conditions") or [])

    await _eventually(complete, "the Job Complete")
