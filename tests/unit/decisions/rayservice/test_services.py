"""The RayService's Services, the head Pod's ray.io/serve label and numServeEndpoints."""

from __future__ import annotations

import re
from typing import Any

import pytest

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject, PatchObject
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.services import (
    NO_SERVE_PORT,
    ServiceBuildError,
    build_head_service,
    build_serve_service,
    cluster_name_from_service,
    head_pod_serve_label,
    num_serve_endpoints,
    reconcile_service,
    serve_service_name,
    update_head_pod_serve_label,
)
from tests.unit.decisions.rayservice.world import make_service, merge

SETTINGS = OperatorSettings()


def svc(**spec: Any) -> RayService:
    return RayService.model_validate(make_service(spec=spec or None))


def cluster(name: str = "test-cluster", ports: list[dict[str, Any]] | None = None, **head: Any) -> RayCluster:
    container: dict[str, Any] = {"name": "ray-head"}
    if ports is not None:
        container["ports"] = ports
    return RayCluster.model_validate({"metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
                                      "spec": {"headGroupSpec": {"template": {"spec": {"containers": [container]}},
                                                                 **head}}})


def test_head_service_selects_the_clusters_head_and_is_named_after_the_rayservice() -> None:
    out = build_head_service(svc(), cluster(), SETTINGS)
    assert out["metadata"]["name"] == "rayservice-sample-head-svc"
    assert out["spec"]["selector"] == {"ray.io/cluster": "test-cluster", "ray.io/node-type": "head",
                                       "ray.io/identifier": "test-cluster-head", "app.kubernetes.io/name": "kuberay",
                                       "app.kubernetes.io/created-by": "kuberay-operator"}
    assert out["metadata"]["labels"] == {"ray.io/originated-from-cr-name": "rayservice-sample",
                                         "ray.io/originated-from-crd": "RayService", "ray.io/node-type": "head",
                                         "ray.io/identifier": "rayservice-sample-head"}
    assert out["spec"]["clusterIP"] == "None" and out["spec"]["publishNotReadyAddresses"] is True
    assert [p["name"] for p in out["spec"]["ports"]] == ["client", "dashboard", "gcs-server", "metrics", "serve"]
    owner = out["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayService", "rayservice-sample", True)


def test_head_service_cluster_ip_knob_and_custom_head_service() -> None:
    plain = build_head_service(svc(), cluster(), OperatorSettings(enable_ray_head_cluster_ip_service=True))
    assert "clusterIP" not in plain["spec"]
    custom = build_head_service(svc(), cluster(headService={"metadata": {"annotations": {"a": "b"}},
                                                            "spec": {"type": "NodePort"}}), SETTINGS)
    assert custom["metadata"]["annotations"] == {"a": "b"} and custom["spec"]["type"] == "NodePort"
    assert custom["metadata"]["name"] == "rayservice-sample-head-svc"


def test_serve_service_default() -> None:
    out = build_serve_service(svc(), cluster())
    assert out["metadata"]["name"] == "rayservice-sample-serve-svc"
    assert out["spec"] == {"selector": {"ray.io/cluster": "test-cluster", "ray.io/serve": "true"},
                           "ports": [{"name": "serve", "port": 8000}]}
    assert out["metadata"]["labels"]["ray.io/serve"] == "rayservice-sample-serve"


def test_serve_service_override_keeps_its_name_labels_type() -> None:
    override = {"metadata": {"name": "custom-ray-serve-service-name", "namespace": "elsewhere",
                             "labels": {"custom-label": "x"}},
                "spec": {"type": "LoadBalancer", "selector": {"evil": "1"},
                         "ports": [{"name": "custom", "port": 12345}]}}
    service = svc(serveService=override)
    out = build_serve_service(service, cluster())
    assert out["metadata"]["name"] == serve_service_name(service) == "custom-ray-serve-service-name"
    assert out["metadata"]["namespace"] == "default"
    assert out["metadata"]["labels"]["custom-label"] == "x"
    assert out["spec"]["type"] == "LoadBalancer"
    assert out["spec"]["selector"] == {"ray.io/cluster": "test-cluster", "ray.io/serve": "true"}
    assert out["spec"]["ports"] == [{"name": "serve", "port": 8000}]  # the head's serve port wins


def test_serve_port_required_unless_overridden() -> None:
    no_serve = cluster(ports=[{"name": "dashboard", "containerPort": 8265}])
    with pytest.raises(ServiceBuildError, match=re.escape(NO_SERVE_PORT)):
        build_serve_service(svc(), no_serve)
    # TestUserSpecifiedServeServiceFallbackPreservesAppProtocol: no serving port on the head -> the
    # user's ports are kept as they are (v1.7).
    user = [{"name": "serve-grpc", "port": 9000, "appProtocol": "kubernetes.io/h2c"},
            {"name": "not-a-serve-port", "port": 1234}]
    out = build_serve_service(svc(serveService={"spec": {"ports": user}}), no_serve)
    assert out["spec"]["ports"] == user


H2C = "kubernetes.io/h2c"
GRPC_HEAD = [{"name": "gcs-server", "containerPort": 6379}, {"name": "serve", "containerPort": 8000},
             {"name": "serve-grpc", "containerPort": 9000}]


@pytest.mark.parametrize(("name", "head_ports", "user_ports", "expected"), [
    # TestBuildServeServiceForRayServiceWithGrpcPort (kuberay#4558): every serve-* port is exposed
    ("grpc port", GRPC_HEAD, None, [{"name": "serve", "port": 8000}, {"name": "serve-grpc", "port": 9000}]),
    # TestUserSpecifiedServeServiceWithGrpcPort: only the head's serving ports, user ports by name
    ("user ports beyond the head's", [{"name": "serve", "containerPort": 8000}],
     [{"name": "serve", "port": 8000}, {"name": "serve-grpc", "port": 9000}], [{"name": "serve", "port": 8000}]),
    # TestUserSpecifiedServeServiceAppProtocolPreserved: a same-named user port is kept as written
    ("user appProtocol kept", GRPC_HEAD,
     [{"name": "serve", "port": 8000}, {"name": "serve-grpc", "port": 9000, "appProtocol": H2C}],
     [{"name": "serve", "port": 8000}, {"name": "serve-grpc", "port": 9000, "appProtocol": H2C}]),
    ("user port replaces the head's", GRPC_HEAD, [{"name": "serve", "port": 80, "targetPort": 8000}],
     [{"name": "serve", "port": 80, "targetPort": 8000}, {"name": "serve-grpc", "port": 9000}]),
    ("not a serving port", [{"name": "serve", "containerPort": 8000}, {"name": "server", "containerPort": 1}], None,
     [{"name": "serve", "port": 8000}]),
])
def test_serve_service_ports(name: str, head_ports: list[dict[str, Any]], user_ports: list[dict[str, Any]] | None,
                             expected: list[dict[str, Any]]) -> None:
    service = svc() if user_ports is None else svc(serveService={"spec": {"ports": user_ports}})
    out = build_serve_service(service, cluster(ports=head_ports))
    assert out["spec"]["ports"] == expected, name


def test_different_serve_port() -> None:
    out = build_serve_service(svc(), cluster(ports=[{"name": "serve", "containerPort": 9000}]))
    assert out["spec"]["ports"] == [{"name": "serve", "port": 9000}]


def test_per_cluster_serve_service_is_owned_by_its_cluster() -> None:
    out = build_serve_service(svc(), cluster("c2"), per_cluster=True)
    assert out["metadata"]["name"] == "c2-serve-svc"
    assert out["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"


# --- TestReconcileServices_UpdateService -------------------------------------------------------------------
def test_reconcile_service_creates_then_only_updates_on_cluster_switch() -> None:
    desired = build_head_service(svc(), cluster(), SETTINGS)
    created = reconcile_service(desired, None)
    assert isinstance(created.command, CreateObject)
    live = merge(created.service, {"metadata": {"uid": "s1", "resourceVersion": "7"}, "spec": {"clusterIP": "None"}})
    # Same cluster, different ports: not updated.
    same = reconcile_service(build_head_service(svc(), cluster(ports=[{"name": "test-port", "containerPort": 9999}]),
                                                SETTINGS), live)
    assert same.command is None and same.service == live
    switched = reconcile_service(build_head_service(svc(), cluster("new-cluster"), SETTINGS), live)
    assert isinstance(switched.command, PatchObject) and switched.command.target.uid == "s1"
    assert "clusterIP" not in switched.command.merge_patch["spec"]
    assert switched.command.merge_patch["metadata"] == {"resourceVersion": "7"}  # r.Update: optimistic
    assert cluster_name_from_service(merge(live, switched.command.merge_patch)) == "new-cluster"
    assert cluster_name_from_service(switched.service) == "new-cluster"


# --- TestLabelHeadPodForServeStatus ----------------------------------------------------------------------
def head_pod(label: str | None = None) -> dict[str, Any]:
    labels = {"ray.io/cluster": "c1", "ray.io/node-type": "head"}
    if label is not None:
        labels[c.SERVE_LABEL] = label
    return {"metadata": {"name": "head-pod", "namespace": "default", "uid": "p1", "labels": labels}}


def observation(healthy: bool | None) -> ClusterObservation:
    return ClusterObservation(namespace="default", cluster="c1",
                              proxy_healthy={} if healthy is None else {"head-pod": healthy})


@pytest.mark.parametrize(("exclude", "healthy", "current", "expected"), [
    (True, True, None, "false"),
    (False, True, None, "true"),
    (True, False, None, "false"),
    (False, False, "true", "false"),
    (False, None, None, "false"),   # never probed, no label: KubeRay's failing first check
    (False, None, "true", "true"),  # never probed by this poller: unknown is not unhealthy
])
def test_head_pod_serve_label(exclude: bool, healthy: bool | None, current: str | None, expected: str) -> None:
    assert head_pod_serve_label(head_pod(current), observation(healthy), exclude=exclude) == expected


def test_label_patch_only_on_change() -> None:
    service = svc()
    assert update_head_pod_serve_label(service, head_pod("true"), observation(True)) is None
    patch = update_head_pod_serve_label(service, head_pod("true"), observation(False))
    assert isinstance(patch, PatchObject) and patch.merge_patch == {"metadata": {"labels": {"ray.io/serve": "false"}}}
    assert patch.event_reason == c.UPDATED_HEAD_POD_SERVE_LABEL
    assert patch.reason == 'Updated the serve label to "false" for the Head Pod default/head-pod'


# --- calculateNumServeEndpointsFromSlices ----------------------------------------------------------------
def eps(service: str, *endpoints: tuple[str | None, bool | None], ns: str = "default") -> dict[str, Any]:
    items = []
    for uid, ready in endpoints:
        item: dict[str, Any] = {"conditions": {} if ready is None else {"ready": ready}}
        if uid is not None:
            item["targetRef"] = {"kind": "Pod", "uid": uid}
        items.append(item)
    return {"metadata": {"namespace": ns, "labels": {c.ENDPOINT_SLICE_SERVICE_NAME_LABEL: service}}, "endpoints": items}


@pytest.mark.parametrize(("slices", "count"), [
    ([], 0),
    ([eps("s", ("a", True), ("b", True))], 2),
    ([eps("s", ("a", True)), eps("s", ("a", True))], 1),          # dual stack: same Pod twice
    ([eps("s", ("a", True), ("b", False), ("c", None))], 1),      # not ready / unknown
    ([eps("s", (None, True))], 0),                                # no targetRef: not counted
    ([eps("other", ("a", True))], 0),                             # another Service
    ([eps("s", ("a", True), ns="elsewhere")], 0),
    ([eps("s", ("a", True)), eps("s", ("b", True), ("a", True))], 2),
])
def test_num_serve_endpoints(slices: list[dict[str, Any]], count: int) -> None:
    assert num_serve_endpoints(slices, namespace="default", service_name="s") == count
