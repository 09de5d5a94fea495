"""Who refuses what, on the real kube-apiserver with the watcher, the cluster-reconciler and the
command-executor running (their deploy RBAC), as with KubeRay:

1. the CRD schema, at apply time: a wrong type in a pod template never becomes an object, so no
   reconciler sees it and nothing is created or reported later;
2. the operator, when it reconciles: what only it judges (minReplicas > maxReplicas) is stored,
   and gets KubeRay's InvalidRayClusterSpec Warning Event, and no Pod;
3. the Pod API, when the executor creates the Pod: what neither the CRD nor the operator judges
   (imagePullPolicy Sometimes: controller-gen keeps no Go enum) is the executor's
   FailedToCreateHeadPod Warning with the API server's own message.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from raybus_sim.testing.envtest import ApiError
from tests.integration.realapi.kit import REPO, RealApiServices

pytestmark = pytest.mark.integration
SAMPLE = yaml.safe_load((REPO / "deploy" / "samples" / "ray-cluster.sample.yaml").read_text())


def cluster(name: str, edit: Any) -> dict[str, Any]:
    body = copy.deepcopy(SAMPLE)
    body["metadata"] = {"name": name}
    edit(body["spec"])
    return dict(body)


def head(spec: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    return container


def warnings(services: RealApiServices, name: str) -> list[tuple[str, str]]:
    services.check_alive()
    events = services.cp.request("GET", f"/api/v1/namespaces/{services.namespace}/events")["items"]
    return [(e["reason"], e["message"]) for e in events
            if e["type"] == "Warning" and e["involvedObject"]["name"] == name]


def pods(services: RealApiServices, name: str) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{services.namespace}/pods?labelSelector=ray.io/cluster%3D{name}"
    return list(services.cp.request("GET", path)["items"])


def test_the_crd_the_operator_and_the_pod_api_each_refuse_their_part(services: RealApiServices) -> None:
    cp, ns = services.cp, services.namespace
    for service in ("watcher", "command_executor", "cluster_reconciler"):
        services.start(service)
    items = f"/apis/ray.io/v1/namespaces/{ns}/rayclusters"

    def bad_port(spec: dict[str, Any]) -> None:
        head(spec)["ports"] = [{"containerPort": "abc"}]
    with pytest.raises(ApiError) as refused:
        cp.request("POST", items, cluster("typed", bad_port))
    assert refused.value.code == 422 and "containerPort in body must be of type integer" in str(refused.value.body)

    def min_above_max(spec: dict[str, Any]) -> None:
        spec["workerGroupSpecs"][0].update(minReplicas=5, maxReplicas=1)
    cp.request("POST", items, cluster("judged", min_above_max))

    def pull_sometimes(spec: dict[str, Any]) -> None:
        head(spec)["imagePullPolicy"] = "Sometimes"
    cp.request("POST", items, cluster("podless", pull_sometimes))

    judged = cp.wait_for(lambda: [w for w in warnings(services, "judged") if w[0] == "InvalidRayClusterSpec"],
                         "the operator's InvalidRayClusterSpec Warning", timeout=90)
    assert judged[0][1] == (f"The RayCluster spec is invalid {ns}/judged: worker group "
                            f"{SAMPLE['spec']['workerGroupSpecs'][0]['groupName']} has minReplicas 5 greater "
                            "than maxReplicas 1")
    failed = cp.wait_for(lambda: [w for w in warnings(services, "podless") if w[0] == "FailedToCreateHeadPod"],
                         "the executor's FailedToCreateHeadPod Warning", timeout=90)
    assert 'Unsupported value: "Sometimes"' in failed[0][1] and "imagePullPolicy" in failed[0][1]
    assert pods(services, "judged") == [] and pods(services, "podless") == []
    with pytest.raises(ApiError) as absent:
        cp.request("GET", f"{items}/typed")
    assert absent.value.code == 404 and warnings(services, "typed") == []
    # the one complaint each service may log is the executor's failed Pod create, as KubeRay logs it
    assert set(services.complaints()) <= {"command-executor"}
