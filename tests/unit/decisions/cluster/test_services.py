"""Head/serve/headless Services and the head Ingress, mirroring KubeRay service_test.go / ingress_test.go."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster.k8s_services import (
    build_head_ingress,
    build_head_service,
    build_headless_worker_service,
    build_serve_service,
    head_service_labels,
    head_service_name,
    is_serve_service_enabled,
    needs_headless_worker_service,
    service_endpoints,
    service_ports,
)
from raybus.decisions.cluster.kuberay_names import check_name, fqdn_ray_ip, serve_service_name
from raybus.decisions.cluster.settings import OperatorSettings
from tests.unit.decisions.cluster.test_pod_fixtures import first_group

PORTS = [
    {"name": "gcs-server", "containerPort": 6379},
    {"name": "dashboard", "containerPort": 8265},
    {"containerPort": 10001},
    {"name": "serve", "containerPort": 8000},
]
BASE: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "raycluster-sample", "namespace": "default", "uid": "uid-1"},
    "spec": {
        "headServiceAnnotations": {"HeadServiceAnnotationKey1": "v1", "HeadServiceAnnotationKey2": "v2"},
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray", "ports": PORTS}]}},
        },
        "workerGroupSpecs": [{"groupName": "g", "template": {"spec": {"containers": [{"name": "w"}]}}}],
    },
}
DEFAULT = OperatorSettings()


def make(update: dict[str, Any] | None = None, ports: list[dict[str, Any]] | None = None) -> RayCluster:
    data = copy.deepcopy(BASE)
    data["spec"]["headGroupSpec"].update(update or {})
    if ports is not None:
        data["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = ports
    return RayCluster.from_dict(data)


def test_build_service_for_head_pod() -> None:  # TestBuildServiceForHeadPod
    svc = build_head_service(make(), settings=DEFAULT)
    assert svc["apiVersion"] == "v1" and svc["kind"] == "Service"
    assert svc["metadata"]["name"] == "raycluster-sample-head-svc"
    assert svc["metadata"]["namespace"] == "default"
    selector = {
        "ray.io/cluster": "raycluster-sample",
        "ray.io/node-type": "head",
        "ray.io/identifier": "raycluster-sample-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    assert svc["spec"]["selector"] == selector == head_service_labels(make())
    assert svc["metadata"]["labels"] == selector
    assert svc["metadata"]["annotations"] == {
        "HeadServiceAnnotationKey1": "v1",
        "HeadServiceAnnotationKey2": "v2",
    }
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["ports"] == [
        {"name": "10001-port", "port": 10001, "appProtocol": "tcp"},
        {"name": "dashboard", "port": 8265, "appProtocol": "tcp"},
        {"name": "gcs-server", "port": 6379, "appProtocol": "tcp"},
        {"name": "metrics", "port": 8080, "appProtocol": "tcp"},
        {"name": "serve", "port": 8000, "appProtocol": "tcp"},
    ]
    assert svc["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert "type" not in svc["spec"]


@pytest.mark.parametrize(("options", "path", "path_type"), [
    (None, "/", "Prefix"),
    ({}, "/", "Prefix"),
    ({"host": "h"}, "/", "Prefix"),
    ({"path": "/dash"}, "/dash", "Prefix"),
    ({"pathType": "Exact"}, "/", "Exact"),
])
def test_ingress_path_defaults(options: dict[str, str] | None, path: str, path_type: str) -> None:
    head = {"enableIngress": True} if options is None else {"enableIngress": True, "ingressOptions": options}
    [rule_path] = build_head_ingress(make(head))["spec"]["rules"][0]["http"]["paths"]
    assert (rule_path["path"], rule_path["pathType"]) == (path, path_type)


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([], {"client": 10001, "gcs-server": 6379, "dashboard": 8265, "metrics": 8080, "serve": 8000}),
        ([{"name": "random", "containerPort": 1234}], {"random": 1234, "metrics": 8080}),
        ([{"name": "metrics", "containerPort": 8081}], {"metrics": 8081}),
        ([{"containerPort": 1}], {"1-port": 1, "metrics": 8080}),
    ],
)
def test_service_ports(ports: list[dict[str, Any]], expected: dict[str, int]) -> None:
    # TestBuildServiceForHeadPodDefaultPorts, TestGetServicePortsWithMetricsPort, TestGetPortsFromCluster
    assert service_ports(make(ports=ports)) == expected


@pytest.mark.parametrize(
    ("service_type", "cluster_ip_knob", "headless"),
    [
        ("", False, True),
        ("ClusterIP", False, True),
        ("", True, False),
        ("NodePort", False, False),
        ("LoadBalancer", False, False),
    ],
)
def test_headless_by_default(service_type: str, cluster_ip_knob: bool, headless: bool) -> None:
    # TestBuildClusterIPServiceForHeadPod
    rc = make({"serviceType": service_type} if service_type else {})
    svc = build_head_service(
        rc, settings=OperatorSettings(enable_ray_head_cluster_ip_service=cluster_ip_knob)
    )
    assert ("clusterIP" in svc["spec"]) is headless
    assert svc["spec"].get("publishNotReadyAddresses", False) is headless
    assert svc["spec"].get("type", "") == service_type


def test_app_name_label_carried_into_selector() -> None:  # TestBuildServiceForHeadPodWithAppNameLabel
    rc = make()
    rc.spec.head_group_spec.template["metadata"] = {
        "labels": {"app.kubernetes.io/name": "testname", "x": "y"}
    }
    svc = build_head_service(rc, settings=DEFAULT)
    assert svc["spec"]["selector"]["app.kubernetes.io/name"] == "testname"
    assert len(svc["spec"]["selector"]) == 5


def test_user_specified_head_service() -> None:  # TestUserSpecifiedHeadService
    user_ports = [{"name": "userPort", "port": 12345}, {"name": "client", "port": 98765}]
    user: dict[str, Any] = {
        "metadata": {
            "name": "user-custom-name",
            "namespace": "user-custom-namespace",
            "labels": {"userLabelKey": "userLabelValue", "ray.io/cluster": "userClusterName"},
            "annotations": {
                "userAnnotationKey": "userAnnotationValue",
                "HeadServiceAnnotationKey1": "user_override",
            },
        },
        "spec": {
            "ports": user_ports,
            "selector": {"userSelectorKey": "userSelectorValue"},
            "type": "LoadBalancer",
            "clusterIP": "",
        },
    }
    svc = build_head_service(make({"headService": user}), settings=DEFAULT)
    assert svc["metadata"]["name"] == "user-custom-name"
    assert svc["metadata"]["namespace"] == "default"
    assert svc["spec"]["selector"] == head_service_labels(make())
    assert svc["metadata"]["labels"] == {**head_service_labels(make()), "userLabelKey": "userLabelValue"}
    assert svc["metadata"]["annotations"] == {
        "userAnnotationKey": "userAnnotationValue",
        "HeadServiceAnnotationKey1": "v1",
        "HeadServiceAnnotationKey2": "v2",
    }
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["clusterIP"] == ""
    assert svc["spec"]["ports"][:2] == user_ports
    assert {p["name"] for p in svc["spec"]["ports"][2:]} == {
        "10001-port",
        "dashboard",
        "gcs-server",
        "metrics",
        "serve",
    }
    # The custom name is used everywhere the head Service is referenced.
    rc = make({"headService": user})
    assert head_service_name(rc) == "user-custom-name"
    assert fqdn_ray_ip(rc, settings=DEFAULT) == "user-custom-name.default.svc.cluster.local"


def test_nil_fields_in_user_specified_head_service() -> (
    None
):  # TestNilMapDoesntErrorInUserSpecifiedHeadService
    svc = build_head_service(make({"headService": {"metadata": {}}}), settings=DEFAULT)
    assert svc["metadata"]["name"] == "raycluster-sample-head-svc"
    svc = build_head_service(make({"headService": {}}), settings=DEFAULT)
    assert svc["spec"]["selector"]["ray.io/node-type"] == "head"


def test_head_service_name_truncation() -> None:
    rc = make()
    rc.metadata.name = "a" * 50
    assert head_service_name(rc) == ("a" * 50 + "-head-svc")[-50:]
    rc.metadata.name = "1" + "b" * 60
    assert head_service_name(rc) == check_name("1" + "b" * 60 + "-head-svc")
    assert head_service_name(rc)[0] == "b"


def test_serve_service_for_ray_cluster() -> None:  # TestBuildServeServiceForRayCluster
    rc = make()
    rc.metadata.annotations = {"ray.io/enable-serve-service": "true"}
    assert is_serve_service_enabled(rc)
    svc = build_serve_service(rc)
    assert svc["metadata"]["name"] == "raycluster-sample-serve-svc" == serve_service_name("raycluster-sample")
    assert svc["metadata"]["labels"] == {
        "ray.io/originated-from-cr-name": "raycluster-sample",
        "ray.io/originated-from-crd": "RayCluster",
        "ray.io/serve": "raycluster-sample-serve",
    }
    assert svc["spec"] == {
        "selector": {"ray.io/cluster": "raycluster-sample"},
        "ports": [{"name": "serve", "port": 8000}],
    }
    assert svc["metadata"]["ownerReferences"][0]["controller"] is True
    # Default ports include serve when the head declares no ports.
    assert build_serve_service(make(ports=[]))["spec"]["ports"] == [{"name": "serve", "port": 8000}]
    assert build_serve_service(make({"serviceType": "NodePort"}))["spec"]["type"] == "NodePort"


def test_serve_service_requires_serve_port() -> None:
    with pytest.raises(ValueError, match="port named 'serve'"):
        build_serve_service(make(ports=[{"name": "dashboard", "containerPort": 8265}]))
    assert not is_serve_service_enabled(make())


def test_headless_worker_service() -> None:  # TestBuildHeadlessServiceForRayCluster
    rc = make()
    assert not needs_headless_worker_service(rc)
    first_group(rc).num_of_hosts = 2
    assert needs_headless_worker_service(rc)
    svc = build_headless_worker_service(rc)
    assert svc["metadata"]["name"] == "raycluster-sample-headless"
    assert svc["metadata"]["labels"] == {"ray.io/headless-worker-svc": "raycluster-sample"}
    assert svc["spec"] == {
        "clusterIP": "None",
        "selector": {"ray.io/cluster": "raycluster-sample", "ray.io/node-type": "worker"},
        "type": "ClusterIP",
        "publishNotReadyAddresses": True,
    }


def test_ingress_default_path() -> None:  # TestBuildIngressForHeadService (v1.7: "/" Prefix)
    rc = make({"enableIngress": True})
    rc.metadata.annotations = {
        "kubernetes.io/ingress.class": "nginx",
        "nginx.ingress.kubernetes.io/rewrite-target": "/$1",
    }
    ing = build_head_ingress(rc)
    assert ing["apiVersion"] == "networking.k8s.io/v1" and ing["kind"] == "Ingress"
    assert ing["metadata"]["name"] == "raycluster-sample-head-ingress"
    assert ing["metadata"]["annotations"] == {"nginx.ingress.kubernetes.io/rewrite-target": "/$1"}
    assert ing["metadata"]["labels"] == {
        "ray.io/cluster": "raycluster-sample",
        "ray.io/identifier": "raycluster-sample-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    assert ing["spec"] == {
        "ingressClassName": "nginx",
        "rules": [
            {
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {
                                "service": {"name": "raycluster-sample-head-svc", "port": {"number": 8265}}
                            },
                        }
                    ]
                }
            }
        ],
    }


def test_ingress_without_class_and_custom_dashboard_port() -> None:
    ing = build_head_ingress(
        make({"enableIngress": True}, ports=[{"name": "dashboard", "containerPort": 9999}])
    )
    assert "ingressClassName" not in ing["spec"]
    assert ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"]["number"] == 9999


def test_ingress_options() -> None:
    options = {
        "host": "ray-dashboard.example.com",
        "tls": [{"hosts": ["ray-dashboard.example.com"], "secretName": "ray-dashboard-tls"}],
    }
    ing = build_head_ingress(make({"enableIngress": True, "ingressOptions": options}))
    rule = ing["spec"]["rules"][0]
    assert rule["host"] == "ray-dashboard.example.com"
    assert rule["http"]["paths"][0]["path"] == "/"
    assert rule["http"]["paths"][0]["pathType"] == "Prefix"
    assert ing["spec"]["tls"] == options["tls"]
    ing = build_head_ingress(
        make(
            {
                "enableIngress": True,
                "ingressOptions": {"path": "/x(/|$)(.*)", "pathType": "ImplementationSpecific"},
            }
        )
    )
    assert ing["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/x(/|$)(.*)"
    assert ing["spec"]["rules"][0]["http"]["paths"][0]["pathType"] == "ImplementationSpecific"
    assert "host" not in ing["spec"]["rules"][0] and "tls" not in ing["spec"]


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([{"name": "dashboard", "port": 8265, "targetPort": 8265}], {"dashboard": "8265"}),
        ([{"name": "client", "port": 10001, "targetPort": 10001, "nodePort": 30001}], {"client": "30001"}),
        ([{"name": "serve", "port": 8000, "targetPort": "serve"}], {"serve": "serve"}),
        ([{"port": 1, "targetPort": 1}], {}),
        ([{"name": "x", "port": 1}], {}),
    ],
)
def test_service_endpoints(ports: list[dict[str, Any]], expected: dict[str, str]) -> None:
    assert service_endpoints({"spec": {"ports": ports}}) == expected
    assert service_endpoints({}) == {}
