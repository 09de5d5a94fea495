"""The namespaced install (deploy/kustomize/overlays/namespaced, KubeRay's singleNamespaceInstall with
watchNamespace) on the real kube-apiserver: its RBAC as rendered, with no ClusterRole or
ClusterRoleBinding, the watched namespace's Roles copied to a second one as its kustomization says,
and the watcher, the command-executor, the cluster-reconciler and the dashboard-poller running with
their ServiceAccounts' tokens and RAYBUS_WATCH_NAMESPACE=<a>,<b>. RayClusters in both watched
namespaces get their Pods and status; one in a third namespace is never touched. The real server's
RBAC refuses these tokens everything outside <a> and <b>, and no service logs a refusal, so none
of them read or wrote anything there."""

from __future__ import annotations

import copy
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raybus_sim.testing.envtest import ApiError, ControlPlane
from raybus_sim.testing.servers import NatsServer, RedisServer
from tests.integration.deploy.install_kit import InstalledRbac, install_rbac, render
from tests.integration.realapi.kit import RealApiServices

pytestmark = pytest.mark.integration
WATCHED = "ray-workloads"  # the overlay's example namespace
SAMPLE_SPEC: dict[str, Any] = {
    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
        {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}},
    "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 2, "rayStartParams": {},
                          "template": {"spec": {"containers": [{"name": "ray-worker",
                                                                "image": "rayproject/ray:2.52.0"}]}}}]}


def make_namespace(cp: ControlPlane, stem: str) -> str:
    name = f"{stem}-{secrets.token_hex(3)}"
    cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    cp.wait_for(lambda: cp.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default"), f"{name} ready")
    return name


@pytest.fixture
def spaces(ray_crds: ControlPlane, namespace: str) -> Iterator[dict[str, str]]:
    """raybus's own namespace (the test's), two watched ones and one outside."""
    made = {"raybus": namespace, "a": make_namespace(ray_crds, "watched-a"),
            "b": make_namespace(ray_crds, "watched-b"), "outside": make_namespace(ray_crds, "outside")}
    yield made
    for key in ("a", "b", "outside"):
        ray_crds.request("DELETE", f"/api/v1/namespaces/{made[key]}")


@pytest.fixture
def installed(ray_crds: ControlPlane, spaces: dict[str, str]) -> Iterator[InstalledRbac]:
    docs = render("overlays/namespaced")
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    # A second watched namespace, as the overlay says: its Roles copied under another namespace.
    second = [{**copy.deepcopy(d), "metadata": {**d["metadata"], "namespace": f"{WATCHED}-2"}}
              for d in docs if d["metadata"].get("namespace") == WATCHED]
    assert {d["kind"] for d in second} == {"Role", "RoleBinding"}
    rbac = install_rbac(ray_crds, docs + second, {"raybus-system": spaces["raybus"], WATCHED: spaces["a"],
                                                 f"{WATCHED}-2": spaces["b"]}, secrets.token_hex(3))
    yield rbac
    rbac.cleanup()


@pytest.fixture
def services(ray_crds: ControlPlane, spaces: dict[str, str], nats_server: NatsServer, redis_server: RedisServer,
             tmp_path: Path) -> Iterator[RealApiServices]:
    env = {**os.environ, "RAYBUS_NATS_URL": nats_server.url, "RAYBUS_REDIS_URL": redis_server.url,
           "RAYBUS_METRICS_PORT": "0", "RAYBUS_DASHBOARD_URL_TEMPLATE": "http://127.0.0.1:9/{namespace}/{cluster}"}
    env.pop("RAYBUS_KUBECONFIG", None)
    svc = RealApiServices(cp=ray_crds, namespace=spaces["raybus"], home=tmp_path, env=env)
    yield svc
    svc.stop()


def refused(cp: ControlPlane, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> bool:
    try:
        cp.request(method, path, body, token=token)
    except ApiError as exc:
        return exc.code == 403
    return False


def test_the_namespaced_install_touches_only_its_namespaces(
        installed: InstalledRbac, services: RealApiServices, spaces: dict[str, str]) -> None:
    cp = services.cp
    watch = f"{spaces['a']},{spaces['b']}"
    for service, account in (("watcher", "raybus-watcher"), ("command_executor", "raybus-command-executor"),
                             ("dashboard_poller", "raybus-dashboard-poller")):
        token = installed.token("raybus-system", account)
        # No cluster-wide grant, none outside the watched namespaces.
        for path in ("/api/v1/pods", f"/api/v1/namespaces/{spaces['outside']}/pods",
                     "/apis/ray.io/v1/rayclusters", f"/apis/ray.io/v1/namespaces/{spaces['outside']}/rayclusters"):
            assert refused(cp, "GET", path, token), f"{account} may GET {path}"
        assert cp.request("GET", f"/apis/ray.io/v1/namespaces/{spaces['b']}/rayclusters", token=token)["items"] == []
        kubeconfig = cp.write_kubeconfig(services.home / f"{account}.kubeconfig", token)
        services.start(service, kubeconfig=kubeconfig, RAYBUS_WATCH_NAMESPACE=watch)
    services.start("cluster_reconciler")
    executor = installed.token("raybus-system", "raybus-command-executor")
    assert refused(cp, "POST", f"/api/v1/namespaces/{spaces['outside']}/pods", executor,
                   {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    for key in ("a", "b", "outside"):
        cp.request("POST", f"/apis/ray.io/v1/namespaces/{spaces[key]}/rayclusters",
                   {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": SAMPLE_SPEC})

    def converged(ns: str) -> bool:
        services.check_alive()
        pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=ray.io/cluster%3Drc")["items"]
        status = cp.request("GET", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters/rc").get("status") or {}
        return len(pods) == 2 and status.get("desiredWorkerReplicas") == 1
    for key in ("a", "b"):
        cp.wait_for(lambda ns=spaces[key]: converged(ns), f"rc in {spaces[key]}", timeout=90)
    outside = spaces["outside"]
    assert cp.request("GET", f"/api/v1/namespaces/{outside}/pods")["items"] == []
    assert cp.request("GET", f"/api/v1/namespaces/{outside}/services")["items"] == []
    assert "status" not in cp.request("GET", f"/apis/ray.io/v1/namespaces/{outside}/rayclusters/rc")
    assert [e for e in cp.request("GET", f"/api/v1/namespaces/{outside}/events")["items"]
            if e.get("involvedObject", {}).get("kind") == "RayCluster"] == []
    # Nothing was even tried outside: every list, watch and write the real server would refuse
    # there shows in a service's log as a WARNING or an ERROR, and there is none.
    assert services.complaints() == {}
