"""KubeRay's sample RayCluster through watcher -> cluster-reconciler -> command-executor on the real
kube-apiserver, the watcher and the executor with their deploy RBAC: the real server accepts every
object raybus builds (its own Pod/Service validation, the status subresource, Events), and its
garbage collector removes them through raybus's ownerReferences when the RayCluster goes. There is
no kubelet, so the Pods stay Pending; what follows from their readiness is the e2e suite's part.
A second cluster with the in-tree autoscaler adds the head's autoscaler sidecar and the autoscaler
RBAC, which the real server's escalation check lets the executor grant only if it holds it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from raybus_sim.testing.envtest import ApiError
from tests.integration.realapi.kit import REPO, RealApiServices

pytestmark = pytest.mark.integration


def _items(services: RealApiServices, path: str) -> list[dict[str, Any]]:
    services.check_alive()
    return list(services.cp.request("GET", path)["items"])


def test_sample_raycluster_objects_are_accepted_and_collected(services: RealApiServices) -> None:
    cp, ns = services.cp, services.namespace
    for service in ("watcher", "command_executor", "cluster_reconciler"):
        services.start(service)
    body = yaml.safe_load((REPO / "deploy" / "samples" / "ray-cluster.sample.yaml").read_text())
    body["metadata"] = {"name": "rc", "namespace": ns}
    rc = cp.request("POST", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters", body)
    auto = yaml.safe_load((REPO / "deploy" / "samples" / "ray-cluster.sample.yaml").read_text())
    auto["metadata"] = {"name": "auto", "namespace": ns}
    auto["spec"]["enableInTreeAutoscaling"] = True
    cp.request("POST", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters", auto)
    pods_path = f"/api/v1/namespaces/{ns}/pods?labelSelector=ray.io/cluster%3Drc"

    def head_and_worker() -> list[dict[str, Any]] | None:
        pods = _items(services, pods_path)
        types = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods)
        return pods if types == ["head", "worker"] else None
    pods = cp.wait_for(head_and_worker, "the head and worker Pods", timeout=90)
    for pod in pods:
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == \
            ("RayCluster", "rc", rc["metadata"]["uid"], True)
        assert pod["status"]["phase"] == "Pending"  # no kubelet
    head_svc = cp.wait_for(lambda: cp.request("GET", f"/api/v1/namespaces/{ns}/services/rc-head-svc"),
                           "the head Service", timeout=60)
    assert head_svc["spec"]["clusterIP"] == "None"  # KubeRay's headless head Service
    assert head_svc["metadata"]["ownerReferences"][0]["uid"] == rc["metadata"]["uid"]

    def status_written() -> dict[str, Any] | None:
        services.check_alive()
        status = cp.request("GET", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters/rc").get("status") or {}
        return status if status.get("desiredWorkerReplicas") == 1 else None
    status = cp.wait_for(status_written, "the RayCluster status (status subresource)", timeout=60)
    assert status.get("readyWorkerReplicas", 0) == 0 and status.get("state") != "ready"

    def autoscaler_head() -> dict[str, Any] | None:
        pods = _items(services, f"/api/v1/namespaces/{ns}/pods?labelSelector=ray.io/cluster%3Dauto,"
                                "ray.io/node-type%3Dhead")
        return pods[0] if pods else None
    head = cp.wait_for(autoscaler_head, "the autoscaling cluster's head Pod", timeout=60)
    assert [c["name"] for c in head["spec"]["containers"]] == ["ray-head", "autoscaler"]
    assert head["spec"]["serviceAccountName"] == "auto"
    for path in (f"/api/v1/namespaces/{ns}/serviceaccounts/auto",
                 f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/auto",
                 f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/auto"):
        assert cp.request("GET", path)["metadata"]["ownerReferences"][0]["name"] == "auto"
    events = _items(services, f"/api/v1/namespaces/{ns}/events")
    assert {"CreatedHeadPod", "CreatedWorkerPod"} <= {e["reason"] for e in events}

    cp.request("DELETE", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters/rc")

    def collected() -> bool:
        try:
            cp.request("GET", f"/api/v1/namespaces/{ns}/services/rc-head-svc")
        except ApiError as exc:
            return exc.code == 404 and not _items(services, pods_path)
        return False
    cp.wait_for(collected, "the garbage collector to remove the RayCluster's Pods and Service", timeout=60)
    assert services.complaints() == {}


def test_sample_rayjob_creates_its_cluster_and_writes_status(services: RealApiServices) -> None:
    """job-reconciler -> command-executor on the real server: the RayJob's RayCluster (owned by it,
    accepted by the real CRD's schema and CEL rules) and the RayJob status through its subresource."""
    cp, ns = services.cp, services.namespace
    for service in ("watcher", "command_executor", "job_reconciler", "cluster_reconciler"):
        services.start(service)
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "samples" / "ray-job.sample.yaml").read_text()) if d]
    body = next(d for d in docs if d["kind"] == "RayJob")
    body["metadata"] = {"name": "job", "namespace": ns}
    for config_map in (d for d in docs if d["kind"] == "ConfigMap"):  # the sample's code
        cp.request("POST", f"/api/v1/namespaces/{ns}/configmaps", config_map)
    job = cp.request("POST", f"/apis/ray.io/v1/namespaces/{ns}/rayjobs", body)

    def status() -> dict[str, Any] | None:
        services.check_alive()
        current = cp.request("GET", f"/apis/ray.io/v1/namespaces/{ns}/rayjobs/job").get("status") or {}
        return current if current.get("rayClusterName") and current.get("jobDeploymentStatus") else None
    st = cp.wait_for(status, "the RayJob status with its cluster", timeout=90)
    assert st["jobDeploymentStatus"] == "Initializing"  # the cluster cannot get ready without a kubelet
    cluster = cp.wait_for(lambda: cp.request(
        "GET", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters/{st['rayClusterName']}"), "the RayJob's RayCluster")
    owner = cluster["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("RayJob", job["metadata"]["uid"])
    cp.wait_for(lambda: _items(services, f"/api/v1/namespaces/{ns}/pods?labelSelector=ray.io/cluster%3D"
                                         f"{st['rayClusterName']}"), "the job cluster's Pods", timeout=60)
    assert services.complaints() == {}
