"""Simulated kubelet: containers wait for the Secrets/ConfigMaps they reference (CreateContainerConfigError
/ ContainerCreating, as a real kubelet), and the GCS FT Redis cleanup Job's Pod exits (issue 13)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from .helpers import eventually

pytestmark = pytest.mark.integration
NS = "default"


def _pod(name: str, *, env: list[dict[str, Any]] | None = None, env_from: list[dict[str, Any]] | None = None,
         volumes: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None, restart: str = "Always") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "ray", "image": "rayproject/ray:2.52.0"}
    if env:
        container["env"] = env
    if env_from:
        container["envFrom"] = env_from
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": restart}
    if volumes:
        spec["volumes"] = volumes
        container["volumeMounts"] = [{"name": v["name"], "mountPath": f"/m/{v['name']}"} for v in volumes]
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}, "spec": spec}


def _waiting(pod: client.V1Pod) -> tuple[str | None, str | None]:
    statuses = pod.status.container_statuses or []
    if not statuses or statuses[0].state.waiting is None:
        return None, None
    return statuses[0].state.waiting.reason, statuses[0].state.waiting.message


async def _read(core: client.CoreV1Api, name: str) -> client.V1Pod:
    return await core.read_namespaced_pod(name, NS)


async def _running(core: client.CoreV1Api, name: str) -> client.V1Pod | None:
    pod = await _read(core, name)
    return pod if pod.status.phase == "Running" else None


SECRET_ENV = [{"name": "RAY_AUTH_TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "auth_token"}}}]


async def test_missing_secret_env_is_create_container_config_error_until_it_exists(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(NS, _pod("p-env", env=SECRET_ENV))

    async def blocked() -> tuple[str | None, str | None] | None:
        got = _waiting(await _read(core, "p-env"))
        return got if got[0] == "CreateContainerConfigError" else None

    assert await eventually(blocked) == ("CreateContainerConfigError", 'secret "tok" not found')
    pod = await _read(core, "p-env")
    assert pod.status.phase == "Pending" and pod.status.pod_ip  # the sandbox is up; the container is not
    # The Secret without the key: the kubelet's "couldn't find key".
    await core.create_namespaced_secret(NS, {"metadata": {"name": "tok"}, "data": {"other": "eA=="}})

    async def missing_key() -> str | None:
        _, message = _waiting(await _read(core, "p-env"))
        return message if message and "couldn't find key" in message else None

    assert await eventually(missing_key) == "couldn't find key auth_token in Secret default/tok"
    await core.patch_namespaced_secret("tok", NS, {"data": {"auth_token": "dG9rZW4="}})
    assert await eventually(lambda: _running(core, "p-env"))


async def test_env_from_config_map_and_optional_refs(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    optional = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": True}}}]
    await core.create_namespaced_pod(NS, _pod("p-opt", env=optional))
    assert await eventually(lambda: _running(core, "p-opt"))  # optional never blocks
    await core.create_namespaced_pod(NS, _pod("p-from", env_from=[{"configMapRef": {"name": "cm"}}]))

    async def blocked() -> str | None:
        return _waiting(await _read(core, "p-from"))[1]

    assert await eventually(blocked) == 'configmap "cm" not found'
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "cm"}, "data": {"a": "b"}})
    assert await eventually(lambda: _running(core, "p-from"))


async def test_missing_volume_keeps_the_pod_in_container_creating(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    volumes = [{"name": "cfg", "configMap": {"name": "late"}}]
    await core.create_namespaced_pod(NS, _pod("p-vol", volumes=volumes))

    async def admitted() -> client.V1Pod | None:
        pod = await _read(core, "p-vol")
        return pod if pod.status.container_statuses else None

    pod = await eventually(admitted)
    assert _waiting(pod)[0] == "ContainerCreating" and not pod.status.pod_ip
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "late"}, "data": {"a": "b"}})
    pod = await eventually(lambda: _running(core, "p-vol"))
    assert pod.status.pod_ip


@pytest.mark.parametrize(("annotations", "phase", "condition"),
                         [({}, "Succeeded", "Complete"), ({"sim.raybus.io/exit-code": "1"}, "Failed", "Failed")])
async def test_redis_cleanup_job_pod_exits(api: client.ApiClient, annotations: dict[str, str], phase: str,
                                           condition: str) -> None:
    batch = client.BatchV1Api(api)
    template = _pod("ignored", labels={"ray.io/node-type": "redis-cleanup", "ray.io/cluster": "c"},
                    annotations=annotations, restart="Never")
    await batch.create_namespaced_job(NS, {"metadata": {"name": "c-redis-cleanup"}, "spec": {
        "backoffLimit": 0, "template": {"metadata": template["metadata"] | {"name": None}, "spec": template["spec"]}}})

    async def done() -> str | None:
        job = await batch.read_namespaced_job("c-redis-cleanup", NS)
        conds = [c.type for c in job.status.conditions or [] if c.status == "True"]
        return condition if condition in conds else None

    assert await eventually(done) == condition
    core = client.CoreV1Api(api)
    pods = (await core.list_namespaced_pod(NS, label_selector="ray.io/node-type=redis-cleanup")).items
    assert [p.status.phase for p in pods] == [phase]
