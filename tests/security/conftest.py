"""The insider's world: the whole stack as `raybus up` runs it (TLS bus, one user per service, the
executor's and the poller's RBAC-checked tokens), with a live RayCluster, an HTTPMode RayJob and a
RayService, and an application's Pods and Service beside them in the same namespace."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from raybus.adapters.kube import KubeClient, KubeError, new_api_client, resource_for
from raybus_sim.devstack.stack import LocalStack
from tests.security.kit import until

REPO = Path(__file__).resolve().parents[2]
NS = "default"
RC = resource_for("ray.io/v1", "RayCluster")
RJ = resource_for("ray.io/v1", "RayJob")
RS = resource_for("ray.io/v1", "RayService")
POD = resource_for("v1", "Pod")
SVC = resource_for("v1", "Service")
# A refusal for an object the informers have not seen waits this long (it might be late).
ADMISSION_WAIT_S = 3.0


def sample(name: str) -> list[dict[str, Any]]:
    """The documents of deploy/samples/<name>.sample.yaml, the Ray object first (the RayJob's
    carries the ConfigMap its Pods mount)."""
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "samples" / f"{name}.sample.yaml").read_text())
            if isinstance(d, dict)]
    return sorted(docs, key=lambda d: d.get("apiVersion") != "ray.io/v1")


@dataclass
class World:
    stack: LocalStack
    cluster: dict[str, Any]  # the live RayCluster "rc"
    job: dict[str, Any]  # the HTTPMode RayJob, with its RayCluster and job id in its status
    service: dict[str, Any]  # the RayService, with an active RayCluster


class Api:
    """The admin's view of the API server (what a user's kubectl sees)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def get(self, res: Any, name: str, namespace: str = NS) -> dict[str, Any] | None:
        try:
            return await self.kube.get(res, namespace=namespace, name=name)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def pods(self, selector: str, namespace: str = NS) -> list[dict[str, Any]]:
        items, _ = await self.kube.list_all(POD, namespace=namespace, label_selector=selector)
        return items


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = LocalStack(home=tmp_path_factory.mktemp("insider"),
                   extra_env={"RAYBUS_ADMISSION_WAIT_S": str(ADMISSION_WAIT_S)})
    try:
        s.start()
        yield s
    finally:
        s.stop()


async def _ready(kube: KubeClient, res: Any, name: str, test: Any) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await kube.get(res, namespace=NS, name=name)
        return obj if test(obj.get("status") or {}) else None
    result: dict[str, Any] = await until(check, timeout=180, what=f"{name} ready")
    return result


async def _build_world(stack: LocalStack) -> World:
    kube = KubeClient(await new_api_client(str(stack.kubeconfig)))
    try:
        cluster = copy.deepcopy(sample("ray-cluster")[0])
        cluster["metadata"] = {"name": "rc"}
        await kube.create(RC, cluster, namespace=NS)
        job, *extra = sample("ray-job")
        job["spec"]["submissionMode"] = "HTTPMode"
        for doc in extra:
            await kube.create(resource_for(doc["apiVersion"], doc["kind"]), doc, namespace=NS)
        await kube.create(RJ, job, namespace=NS)
        await kube.create(RS, sample("ray-service")[0], namespace=NS)
        # An application's Pods and Service, nobody's in raybus: one a watch of Ray Pods sees
        # (labelled like a Ray worker, of a cluster raybus does not run), one it does not.
        for name, labels in (("web", {"app": "web"}),
                             ("user-worker", {"ray.io/cluster": "users-own", "ray.io/node-type": "worker"})):
            await kube.create(POD, {"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": name, "labels": labels},
                                    "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, namespace=NS)
        await kube.create(SVC, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}, namespace=NS)
        return World(stack=stack,
                     cluster=await _ready(kube, RC, "rc", lambda st: st.get("state") == "ready"),
                     # submitted (its cluster stays: shutdownAfterJobFinishes is off in the sample)
                     job=await _ready(kube, RJ, job["metadata"]["name"],
                                      lambda st: st.get("jobId") and st.get("jobDeploymentStatus") in
                                      ("Running", "Complete")),
                     service=await _ready(kube, RS, "rayservice-sample",
                                          lambda st: (st.get("activeServiceStatus") or {}).get("rayClusterName")))
    finally:
        await kube.close()


@pytest.fixture(scope="package")
def world(stack: LocalStack) -> World:
    return asyncio.run(_build_world(stack))


@pytest.fixture
async def api(stack: LocalStack) -> AsyncIterator[Api]:
    kube = KubeClient(await new_api_client(str(stack.kubeconfig)))
    try:
        yield Api(kube)
    finally:
        await kube.close()
