"""Services and the Ingress a RayCluster owns (common/service.go, common/ingress.go, KubeRay v1.7).

All builders return full manifests carrying the RayCluster as controller owner. Naming helpers and
their truncation rules live in :mod:`raybus.decisions.cluster.kuberay_names` and are re-exported.
"""

from __future__ import annotations

import copy
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.dicts import ensure_dict
from raybus.decisions.cluster.kuberay_names import (
    check_label,
    generate_identifier,
    head_service_name,
    headless_worker_service_name,
    ingress_name,
    serve_service_label,
    serve_service_name,
)
from raybus.decisions.cluster.pod_parts import set_controller_reference
from raybus.decisions.cluster.settings import OperatorSettings

__all__ = [
    "build_head_ingress",
    "build_head_service",
    "build_headless_worker_service",
    "build_serve_service",
    "head_service_labels",
    "head_service_name",
    "headless_worker_service_name",
    "ingress_name",
    "is_serve_service_enabled",
    "is_serving_port_name",
    "needs_headless_worker_service",
    "serve_service_name",
    "service_endpoints",
    "service_ports",
]


def head_service_labels(cluster: RayCluster) -> dict[str, str]:
    """HeadServiceLabels: the head Service's default labels, which are also its selector."""
    return {
        k.RAY_CLUSTER_LABEL_KEY: cluster.name,
        k.RAY_NODE_TYPE_LABEL_KEY: k.HEAD_NODE,
        k.RAY_ID_LABEL_KEY: check_label(generate_identifier(cluster.name, k.HEAD_NODE)),
        k.KUBERNETES_APPLICATION_NAME_LABEL_KEY: k.APPLICATION_NAME,
        k.KUBERNETES_CREATED_BY_LABEL_KEY: k.COMPONENT_NAME,
    }


def _head_container(cluster: RayCluster) -> dict[str, Any]:
    containers = (cluster.spec.head_group_spec.template.get("spec") or {}).get("containers") or [{}]
    head: dict[str, Any] = containers[k.RAY_CONTAINER_INDEX]
    return head


def service_ports(cluster: RayCluster) -> dict[str, int]:
    """getServicePorts: the head container's ports (unnamed -> ``<port>-port``), or KubeRay's defaults
    (client 10001, gcs-server 6379, dashboard 8265, metrics 8080, serve 8000) when it has none;
    ``metrics: 8080`` is always present."""
    ports: dict[str, int] = {}
    for port in _head_container(cluster).get("ports") or []:
        number = int(port.get("containerPort", 0))
        ports[port.get("name") or f"{number}-port"] = number
    if not ports:
        ports = {
            k.CLIENT_PORT_NAME: k.DEFAULT_CLIENT_PORT,
            k.GCS_SERVER_PORT_NAME: k.DEFAULT_GCS_SERVER_PORT,
            k.DASHBOARD_PORT_NAME: k.DEFAULT_DASHBOARD_PORT,
            k.METRICS_PORT_NAME: k.DEFAULT_METRICS_PORT,
            k.SERVING_PORT_NAME: k.DEFAULT_SERVING_PORT,
        }
    ports.setdefault(k.METRICS_PORT_NAME, k.DEFAULT_METRICS_PORT)
    return ports


def build_head_service(cluster: RayCluster, *, settings: OperatorSettings) -> dict[str, Any]:
    """BuildServiceForHeadPod as reconcileHeadService calls it.

    The selector is HeadServiceLabels, except that an ``app.kubernetes.io/name`` label on the head
    template (which labelPod lets users override) is carried over so the selector still matches.
    ``headServiceAnnotations`` become the Service's annotations. A custom ``headService`` keeps its
    own fields; KubeRay forces selector, labels, namespace, default name/type and appends the ports.
    Otherwise the Service is headless (clusterIP None, publishNotReadyAddresses) unless
    ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE or a non-ClusterIP serviceType; ports are sorted by name.
    """
    head = cluster.spec.head_group_spec
    template_labels = (head.template.get("metadata") or {}).get("labels") or {}
    labels: dict[str, str] = {}
    if k.KUBERNETES_APPLICATION_NAME_LABEL_KEY in template_labels:
        labels[k.KUBERNETES_APPLICATION_NAME_LABEL_KEY] = template_labels[
            k.KUBERNETES_APPLICATION_NAME_LABEL_KEY
        ]
    selector = {key: labels.get(key, value) for key, value in head_service_labels(cluster).items()}
    annotations = dict(cluster.spec.head_service_annotations or {})
    name = head_service_name(cluster)
    service_type = head.service_type or ""
    ports = [
        {"name": port_name, "port": number, "appProtocol": k.DEFAULT_SERVICE_APP_PROTOCOL}
        for port_name, number in service_ports(cluster).items()
    ]

    if head.head_service is not None:
        service = copy.deepcopy(head.head_service)
        meta: dict[str, Any] = ensure_dict(service, "metadata")
        svc_spec: dict[str, Any] = ensure_dict(service, "spec")
        svc_spec["selector"] = dict(selector)
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        svc_spec["ports"] = [*(svc_spec.get("ports") or []), *ports]
        meta["labels"] = {**(meta.get("labels") or {}), **selector}
        meta["name"] = meta.get("name") or name
        meta["namespace"] = cluster.namespace
        if not svc_spec.get("type") and service_type:
            svc_spec["type"] = service_type
    else:
        spec: dict[str, Any] = {"selector": dict(selector), "ports": ports}
        if service_type:
            spec["type"] = service_type
        if not settings.enable_ray_head_cluster_ip_service and service_type in ("", "ClusterIP"):
            # At most one head Pod: headless, and its address is published even while not ready.
            spec["clusterIP"] = "None"
            spec["publishNotReadyAddresses"] = True
        spec["ports"] = sorted(ports, key=lambda p: str(p["name"]))
        meta = {
            "name": name,
            "namespace": cluster.namespace,
            "labels": dict(selector),
            "annotations": annotations,
        }
        service = {"metadata": meta, "spec": spec}
    service["apiVersion"] = "v1"
    service["kind"] = "Service"
    set_controller_reference(service["metadata"], cluster)
    return service


def is_serving_port_name(name: str) -> bool:
    """A serving port of the serve Service: ``serve`` or ``serve-<anything>`` (e.g. ``serve-grpc``)."""
    return name == k.SERVING_PORT_NAME or name.startswith(k.SERVING_PORT_NAME + "-")


def is_serve_service_enabled(cluster: RayCluster) -> bool:
    """reconcileServeService runs only with the annotation ray.io/enable-serve-service=true."""
    return (cluster.metadata.annotations or {}).get(k.ENABLE_SERVE_SERVICE_KEY) == k.ENABLE_SERVE_SERVICE_TRUE


def build_serve_service(cluster: RayCluster) -> dict[str, Any]:
    """BuildServeServiceForRayCluster: ``<cluster>-serve-svc`` exposing the serving ports (``serve``
    and every ``serve-*`` port such as ``serve-grpc``, by name) and selecting every Pod of the
    cluster. Raises ValueError (as KubeRay errors) without a serving port."""
    ports = service_ports(cluster)
    serving = sorted(name for name in ports if is_serving_port_name(name))
    if not serving:
        raise ValueError(
            "Please specify a port named 'serve' (or with the prefix 'serve-', e.g. 'serve-grpc') "
            "in the Ray head container; otherwise, the Kubernetes service for Ray Serve will not be created."
        )
    spec: dict[str, Any] = {
        "selector": {k.RAY_CLUSTER_LABEL_KEY: cluster.name},
        "ports": [{"name": name, "port": ports[name]} for name in serving],
    }
    if cluster.spec.head_group_spec.service_type:
        spec["type"] = cluster.spec.head_group_spec.service_type
    meta: dict[str, Any] = {
        "name": serve_service_name(cluster.name),
        "namespace": cluster.namespace,
        "labels": {
            k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: cluster.name,
            k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: k.RAY_CLUSTER_CRD,
            k.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY: serve_service_label(cluster.name),
        },
    }
    set_controller_reference(meta, cluster)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def needs_headless_worker_service(cluster: RayCluster) -> bool:
    """reconcileHeadlessService: only when some worker group is multi-host (numOfHosts > 1)."""
    return any((group.num_of_hosts or 1) > 1 for group in cluster.spec.worker_group_specs or [])


def build_headless_worker_service(cluster: RayCluster) -> dict[str, Any]:
    """BuildHeadlessServiceForRayCluster: peer DNS for multi-host workers, ready or not."""
    meta: dict[str, Any] = {
        "name": headless_worker_service_name(cluster),
        "namespace": cluster.namespace,
        "labels": {k.RAY_CLUSTER_HEADLESS_SERVICE_LABEL_KEY: cluster.name},
    }
    set_controller_reference(meta, cluster)
    spec = {
        "clusterIP": "None",
        "selector": {k.RAY_CLUSTER_LABEL_KEY: cluster.name, k.RAY_NODE_TYPE_LABEL_KEY: k.WORKER_NODE},
        "type": "ClusterIP",
        "publishNotReadyAddresses": True,
    }
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def build_head_ingress(cluster: RayCluster) -> dict[str, Any]:
    """BuildIngressForHeadService (headGroupSpec.enableIngress): the dashboard behind one rule.

    All RayCluster annotations are copied except ``kubernetes.io/ingress.class``, which becomes
    ``spec.ingressClassName``. The rule's path is ``/`` with pathType Prefix (v1.7; older KubeRay used
    ``/<cluster>/(.*)`` Exact); ``ingressOptions`` may set the host, path, pathType and TLS.
    """
    annotations = {
        key: value
        for key, value in (cluster.metadata.annotations or {}).items()
        if key != k.INGRESS_CLASS_ANNOTATION_KEY
    }
    dashboard_port = service_ports(cluster).get(k.DASHBOARD_PORT_NAME, k.DEFAULT_DASHBOARD_PORT)
    options = cluster.spec.head_group_spec.ingress_options
    backend = {"service": {"name": head_service_name(cluster), "port": {"number": dashboard_port}}}
    # v1.7: path "/" and pathType Prefix unless ingressOptions sets them (an explicit "" is kept, as
    # Go's nil check does), with or without ingressOptions.
    path: dict[str, Any] = {
        "path": options.path if options is not None and options.path is not None else "/",
        "pathType": options.path_type if options is not None and options.path_type is not None else "Prefix",
        "backend": backend,
    }
    rule: dict[str, Any] = {"http": {"paths": [path]}}
    if options is not None and options.host:
        rule["host"] = options.host
    spec: dict[str, Any] = {"rules": [rule]}
    if options is not None and options.tls:
        spec["tls"] = [
            {
                key: value
                for key, value in (("hosts", t.get("hosts")), ("secretName", t.get("secretName")))
                if value
            }
            for t in options.tls
        ]
    class_name = (cluster.metadata.annotations or {}).get(k.INGRESS_CLASS_ANNOTATION_KEY)
    if class_name is not None:
        spec["ingressClassName"] = class_name
    meta: dict[str, Any] = {
        "name": ingress_name(cluster),
        "namespace": cluster.namespace,
        "labels": {
            k.RAY_CLUSTER_LABEL_KEY: cluster.name,
            k.RAY_ID_LABEL_KEY: check_label(generate_identifier(cluster.name, k.HEAD_NODE)),
            k.KUBERNETES_APPLICATION_NAME_LABEL_KEY: k.APPLICATION_NAME,
            k.KUBERNETES_CREATED_BY_LABEL_KEY: k.COMPONENT_NAME,
        },
        "annotations": annotations,
    }
    set_controller_reference(meta, cluster)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


def service_endpoints(service: dict[str, Any]) -> dict[str, str]:
    """status.endpoints from the live head Service (updateEndpoints): per named port its nodePort,
    else targetPort (int or string); unnamed ports and ports without either are skipped."""
    endpoints: dict[str, str] = {}
    for port in (service.get("spec") or {}).get("ports") or []:
        name = port.get("name")
        if not name:
            continue
        target = port.get("targetPort")
        if port.get("nodePort"):
            endpoints[name] = str(port["nodePort"])
        elif isinstance(target, int) and not isinstance(target, bool) and target != 0:
            endpoints[name] = str(target)
        elif isinstance(target, str) and target:
            endpoints[name] = target
    return endpoints
