"""Simulated kubelet, service IPs, EndpointSlices, Job controller and the /sim fault API."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio import client

from raybus_sim.apiserver import RunningApiServer

from .helpers import eventually

pytestmark = pytest.mark.integration


def _pod(name: str, labels: dict | None = None, **spec: object) -> dict:
    return {"metadata": {"name": name, "labels": labels or {"app": "demo"}}, "spec": {
        "initContainers": [{"name": "init", "image": "busybox:1.36"}],
        "containers": [{"name": "main", "image": "rayproject/ray:2.52.0", "ports": [{"name": "http", "containerPort": 8000}],
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8000}}},
                       {"name": "side", "image": "busybox:1.36"}], **spec}}


def _ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


async def _sim(server: RunningApiServer, method: str, path: str, body: dict | None = None) -> dict:
    async with aiohttp.ClientSession() as http, http.request(method, f"{server.url}/sim/{path}", json=body) as r:
        data = await r.json()
        assert r.status < 300, data
        return data


async def test_pod_becomes_running_and_ready(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created = await core.create_namespaced_pod("default", _pod("p1"))
    assert created.status.phase == "Pending" and created.spec.node_name is None

    async def ready() -> client.V1Pod | None:
        pod = await core.read_namespaced_pod("p1", "default")
        return pod if _ready(pod) else None

    pod = await eventually(ready)
    st = pod.status
    assert pod.spec.node_name == "raybus-sim-node" and st.phase == "Running"
    assert st.pod_ip.startswith("10.244.") and st.host_ip and st.start_time
    assert {c.type: c.status for c in st.conditions} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True",
        "PodScheduled": "True"}
    init = st.init_container_statuses[0]
    assert init.state.terminated.reason == "Completed" and init.state.terminated.exit_code == 0
    main = next(c for c in st.container_statuses if c.name == "main")
    assert main.ready and main.restart_count == 0 and main.state.running.started_at
    assert main.image == "rayproject/ray:2.52.0" and "@sha256:" in main.image_id
    assert main.container_id.startswith("containerd://")
    # the lifecycle went through the normal write path: resourceVersion advanced with each step
    assert int(pod.metadata.resource_version) > int(created.metadata.resource_version) + 3


async def test_service_ip_and_endpointslices_follow_ready_pods(server: RunningApiServer, api: client.ApiClient) -> None:
    core, disc = client.CoreV1Api(api), client.DiscoveryV1Api(api)
    svc = await core.create_namespaced_service("default", {"metadata": {"name": "demo"}, "spec": {
        "selector": {"app": "demo"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
    assert svc.spec.cluster_ip.startswith("10.96.") and svc.spec.ports[0].protocol == "TCP"
    headless = await core.create_namespaced_service("default", {"metadata": {"name": "hl"}, "spec": {
        "clusterIP": "None", "selector": {"app": "demo"}, "ports": [{"port": 1}]}})
    assert headless.spec.cluster_ip == "None"
    hold = await _sim(server, "POST", "readiness-holds", {"namespace": "default", "labelSelector": "app=demo"})
    for name in ("e1", "e2"):
        await core.create_namespaced_pod("default", _pod(name))

    async def slice_endpoints() -> list | None:
        slices = await disc.list_namespaced_endpoint_slice("default", label_selector="kubernetes.io/service-name=demo")
        eps = slices.items[0].endpoints if slices.items else None
        return eps if eps and len(eps) == 2 else None

    eps = await eventually(slice_endpoints)
    assert all(e.conditions.ready is False for e in eps)  # running but held not-ready
    await _sim(server, "DELETE", f"readiness-holds/{hold['id']}")

    async def all_ready() -> list | None:
        eps = await slice_endpoints()
        return eps if eps and all(e.conditions.ready for e in eps) else None

    eps = await eventually(all_ready)
    slices = await disc.list_namespaced_endpoint_slice("default", label_selector="kubernetes.io/service-name=demo")
    assert slices.items[0].ports[0].port == 8000  # named targetPort resolved from the pod
    assert {e.target_ref.name for e in eps} == {"e1", "e2"}
    await core.delete_namespaced_pod("e1", "default")

    async def one_left() -> bool:
        s = await disc.list_namespaced_endpoint_slice("default", label_selector="kubernetes.io/service-name=demo")
        return [e.target_ref.name for e in s.items[0].endpoints or []] == ["e2"]

    await eventually(one_left)


async def test_container_faults_follow_restart_policy(server: RunningApiServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", _pod("always"))
    await core.create_namespaced_pod("default", _pod("never", restartPolicy="Never"))

    async def ready(name: str) -> bool:
        return _ready(await core.read_namespaced_pod(name, "default"))

    await eventually(lambda: ready("always"))
    await eventually(lambda: ready("never"))
    await _sim(server, "POST", "pods/default/always/containers/main/terminate", {"exitCode": 137, "reason": "OOMKilled"})

    async def restarted() -> client.V1ContainerStatus | None:
        pod = await core.read_namespaced_pod("always", "default")
        main = next(c for c in pod.status.container_statuses if c.name == "main")
        return main if main.restart_count == 1 and main.ready else None

    main = await eventually(restarted)
    assert main.last_state.terminated.reason == "OOMKilled" and main.last_state.terminated.exit_code == 137

    await _sim(server, "POST", "pods/default/never/containers/*/terminate", {"exitCode": 2})
    pod = await core.read_namespaced_pod("never", "default")
    assert pod.status.phase == "Failed" and not _ready(pod)
    assert all(c.state.terminated.exit_code == 2 for c in pod.status.container_statuses)

    await core.create_namespaced_pod("default", _pod("doomed"))
    await eventually(lambda: ready("doomed"))
    await _sim(server, "POST", "pods/default/doomed/fail", {"reason": "Evicted", "message": "node pressure"})
    pod = await core.read_namespaced_pod("doomed", "default")
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")

    await _sim(server, "POST", "pods/default/always/evict")

    async def evicted() -> bool:
        return "always" not in {p.metadata.name for p in (await core.list_namespaced_pod("default")).items}

    await eventually(evicted)


async def test_namespace_delays(server: RunningApiServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": "slow"}})
    got = await _sim(server, "PUT", "delays", {"namespace": "slow", "schedule": 30})
    assert got["schedule"] == 30
    await core.create_namespaced_pod("slow", _pod("s"))
    await core.create_namespaced_pod("default", _pod("fast"))
    await eventually(lambda: _is_ready(core, "default", "fast"))
    pod = await core.read_namespaced_pod("s", "slow")
    assert pod.spec.node_name is None and pod.status.phase == "Pending"


async def _is_ready(core: client.CoreV1Api, ns: str, name: str) -> bool:
    return _ready(await core.read_namespaced_pod(name, ns))


async def test_job_runs_pod_to_completion(server: RunningApiServer, api: client.ApiClient) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    job = await batch.create_namespaced_job("default", {"metadata": {"name": "submit"}, "spec": {
        "backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
                                                 "containers": [{"name": "c", "image": "busybox"}]}}}})
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": job.metadata.uid}

    async def job_pod() -> client.V1Pod | None:
        pods = (await core.list_namespaced_pod("default", label_selector="job-name=submit")).items
        return pods[0] if pods and pods[0].status.phase == "Running" else None

    pod = await eventually(job_pod)
    assert pod.metadata.owner_references[0].kind == "Job"
    assert (await batch.read_namespaced_job("submit", "default")).status.active == 1
    await _sim(server, "POST", f"pods/default/{pod.metadata.name}/succeed")

    async def complete() -> client.V1Job | None:
        j = await batch.read_namespaced_job("submit", "default")
        return j if any(c.type == "Complete" and c.status == "True" for c in j.status.conditions or []) else None

    j = await eventually(complete)
    assert j.status.succeeded == 1 and j.status.completion_time and not j.status.active
    # Deleting with Background propagation takes the pod too.
    await batch.delete_namespaced_job("submit", "default", propagation_policy="Background")

    async def pods_gone() -> bool:
        return not (await core.list_namespaced_pod("default", label_selector="job-name=submit")).items

    await eventually(pods_gone)


async def test_image_pull_failures_until_cleared(server: RunningApiServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    rule = await _sim(server, "POST", "image-pull-failures", {"image": "rayproject/*"})
    await core.create_namespaced_pod("default", _pod("pull"))

    async def backing_off() -> client.V1ContainerStatus | None:
        pod = await core.read_namespaced_pod("pull", "default")
        main = next((c for c in pod.status.container_statuses or [] if c.name == "main"), None)
        return main if main and main.state.waiting and main.state.waiting.reason == "ImagePullBackOff" else None

    main = await eventually(backing_off)
    assert main.state.waiting.message == 'Back-off pulling image "rayproject/ray:2.52.0"'
    assert (await core.read_namespaced_pod("pull", "default")).status.phase == "Pending"
    await _sim(server, "DELETE", f"image-pull-failures/{rule['id']}")
    await eventually(lambda: _is_ready(core, "default", "pull"))


async def test_repeated_crash_goes_through_crashloopbackoff(server: RunningApiServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", _pod("crashy"))
    await eventually(lambda: _is_ready(core, "default", "crashy"))
    seen: list[str] = []
    # watch the pod while the container dies twice: the second death shows CrashLoopBackOff
    from kubernetes_asyncio import watch

    rv = (await core.read_namespaced_pod("crashy", "default")).metadata.resource_version
    for _ in range(2):
        await _sim(server, "POST", "pods/default/crashy/containers/side/terminate", {"exitCode": 1})
        await eventually(lambda: _is_ready(core, "default", "crashy"))
    async with watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=rv,
                                    field_selector="metadata.name=crashy", timeout_seconds=1) as stream:
        async for ev in stream:
            side = next(c for c in ev["object"].status.container_statuses if c.name == "side")
            if side.state.waiting:
                seen.append(side.state.waiting.reason)
    assert seen == ["CrashLoopBackOff"]
    pod = await core.read_namespaced_pod("crashy", "default")
    assert next(c for c in pod.status.container_statuses if c.name == "side").restart_count == 2


async def test_core_endpoints_follow_the_service(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", {"metadata": {"name": "ep", "labels": {"t": "1"}}, "spec": {
        "selector": {"app": "ep"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}})
    await core.create_namespaced_pod("default", _pod("ep-pod", {"app": "ep"}))

    async def ready_address() -> client.V1Endpoints | None:
        try:
            ep = await core.read_namespaced_endpoints("ep", "default")
        except client.exceptions.ApiException:
            return None
        return ep if ep.subsets and ep.subsets[0].addresses else None

    ep = await eventually(ready_address)
    assert ep.subsets[0].addresses[0].target_ref.name == "ep-pod" and ep.subsets[0].ports[0].port == 8000
    assert ep.metadata.labels == {"t": "1"}
    await core.delete_namespaced_service("ep", "default")

    async def gone() -> bool:
        return await ready_address() is None

    await eventually(gone)


async def test_job_retries_then_fails_at_backoff_limit(server: RunningApiServer, api: client.ApiClient) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    await batch.create_namespaced_job("default", {"metadata": {"name": "flaky"}, "spec": {
        "backoffLimit": 1, "template": {"spec": {"restartPolicy": "Never",
                                                 "containers": [{"name": "c", "image": "busybox"}]}}}})
    failed: set[str] = set()
    for _ in range(2):
        async def running_pod() -> str | None:
            pods = (await core.list_namespaced_pod("default", label_selector="job-name=flaky")).items
            live = [p for p in pods if p.status.phase == "Running" and p.metadata.name not in failed]
            return live[0].metadata.name if live else None

        name = await eventually(running_pod)
        await _sim(server, "POST", f"pods/default/{name}/containers/*/terminate", {"exitCode": 3})
        failed.add(name)

    async def job_failed() -> client.V1Job | None:
        j = await batch.read_namespaced_job("flaky", "default")
        return j if any(c.type == "Failed" and c.status == "True" for c in j.status.conditions or []) else None

    j = await eventually(job_failed)
    assert j.status.failed == 2 and not j.status.active
    assert next(c for c in j.status.conditions if c.type == "Failed").reason == "BackoffLimitExceeded"
    pods = (await core.list_namespaced_pod("default", label_selector="job-name=flaky")).items
    assert {p.metadata.name for p in pods} == failed  # no third attempt
