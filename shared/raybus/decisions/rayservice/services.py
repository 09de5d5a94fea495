"""The RayService's Kubernetes Services, the head Pod's ray.io/serve label and numServeEndpoints
(common/service.go: BuildHeadServiceForRayService, BuildServeService; rayservice_controller.go:
reconcileServices, updateHeadPodServeLabel, calculateNumServeEndpointsFromSlices)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.k8s_services import head_service_labels, is_serving_port_name, service_ports
from raybus.decisions.cluster.kuberay_names import check_label, generate_identifier, owner_head_service_name
from raybus.decisions.cluster.kuberay_names import serve_service_label as kuberay_serve_service_label
from raybus.decisions.cluster.kuberay_names import serve_service_name as kuberay_serve_service_name
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, ObjectRef, PatchObject
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.clusters import ORIGINATED_FROM_CR_NAME, ORIGINATED_FROM_CRD, owner_reference

Json = dict[str, Any]
# BuildServeService's error (v1.7 wording, which names the serve-* ports too).
NO_SERVE_PORT = ("Please specify a port named 'serve' (or with the prefix 'serve-', e.g. 'serve-grpc') "
                 "in the Ray head container; otherwise, the Kubernetes service for Ray Serve will not be created.")


class ServiceBuildError(ValueError):
    """BuildServeService's error (no 'serve' port and no serveService override)."""


def head_service_name(service: RayService) -> str:
    """GenerateHeadServiceName(RayServiceCRD, ...): ``<name>-head-svc``."""
    return owner_head_service_name(service.name)


def serve_service_name(service: RayService) -> str:
    """RayServiceServeServiceNamespacedName: the serveService override's name, else ``<name>-serve-svc``."""
    override = service.spec.serve_service or {}
    name = (override.get("metadata") or {}).get("name")
    return str(name) if name else kuberay_serve_service_name(service.name)


def cluster_name_from_service(svc: Json | None) -> str:
    """utils.GetRayClusterNameFromService: the selector's ray.io/cluster."""
    if not svc:
        return ""
    return str(((svc.get("spec") or {}).get("selector") or {}).get(k.RAY_CLUSTER_LABEL_KEY) or "")


def build_head_service(service: RayService, cluster: RayCluster, settings: OperatorSettings) -> Json:
    """BuildHeadServiceForRayService: BuildServiceForHeadPod(cluster, nil labels, nil annotations)
    renamed ``<rayservice>-head-svc`` with the RayService's labels; selects that cluster's head."""
    head = cluster.spec.head_group_spec
    selector = head_service_labels(cluster)
    service_type = head.service_type or ""
    ports = [{"name": name, "port": number, "appProtocol": k.DEFAULT_SERVICE_APP_PROTOCOL}
             for name, number in service_ports(cluster).items()]
    if head.head_service is not None:
        svc = copy.deepcopy(head.head_service)
        meta: Json = dict(svc.get("metadata") or {})
        spec: Json = dict(svc.get("spec") or {})
        spec["selector"] = dict(selector)
        spec["ports"] = [*(spec.get("ports") or []), *ports]
        if not spec.get("type") and service_type:
            spec["type"] = service_type
        meta["annotations"] = dict(meta.get("annotations") or {})
    else:
        spec = {"selector": dict(selector), "ports": sorted(ports, key=lambda p: str(p["name"]))}
        if service_type:
            spec["type"] = service_type
        if not settings.enable_ray_head_cluster_ip_service and service_type in ("", "ClusterIP"):
            spec["clusterIP"] = "None"
            spec["publishNotReadyAddresses"] = True
        meta = {"annotations": {}}
    meta["name"] = head_service_name(service)
    meta["namespace"] = service.namespace
    meta["labels"] = {
        ORIGINATED_FROM_CR_NAME: service.name,
        ORIGINATED_FROM_CRD: "RayService",
        k.RAY_NODE_TYPE_LABEL_KEY: k.HEAD_NODE,
        k.RAY_ID_LABEL_KEY: check_label(generate_identifier(service.name, k.HEAD_NODE)),
    }
    meta["ownerReferences"] = [owner_reference(service)]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def build_serve_service(service: RayService, cluster: RayCluster, *, per_cluster: bool = False) -> Json:
    """BuildServeService for a RayService: the ``serve`` and every ``serve-*`` port (v1.7,
    kuberay#4558; sorted by name where Go iterates a map); selector = that cluster's Pods whose
    ray.io/serve is "true". ``serveService`` overrides everything but selector, labels and
    namespace; its ports give way to the head's serving ports, except that a user port with the
    same name is kept as written (appProtocol such as ``kubernetes.io/h2c`` for gRPC); with no
    serving port on the head the user's ports stay as they are. ``per_cluster``: the incremental
    upgrade's ``<cluster>-serve-svc`` (HTTPRoute backend), owned by its RayCluster."""
    ports = service_ports(cluster)
    serve_ports: list[Json] = [{"name": name, "port": ports[name]}
                               for name in sorted(ports) if is_serving_port_name(name)]
    override = None if per_cluster else service.spec.serve_service
    if not serve_ports and override is None:
        raise ServiceBuildError(NO_SERVE_PORT)
    labels = {ORIGINATED_FROM_CR_NAME: service.name, ORIGINATED_FROM_CRD: "RayService",
              k.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY: kuberay_serve_service_label(service.name)}
    selector = {k.RAY_CLUSTER_LABEL_KEY: cluster.name,
                k.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY: k.ENABLE_RAY_CLUSTER_SERVING_SERVICE_TRUE}
    service_type = service.spec.ray_cluster_config.head_group_spec.service_type or ""
    name = kuberay_serve_service_name(cluster.name) if per_cluster else kuberay_serve_service_name(service.name)
    if override is not None:
        svc = copy.deepcopy(override)
        meta: Json = dict(svc.get("metadata") or {})
        spec: Json = dict(svc.get("spec") or {})
        spec["selector"] = selector
        meta["annotations"] = dict(meta.get("annotations") or {})
        if serve_ports:
            user = {p.get("name"): p for p in spec.get("ports") or [] if isinstance(p, dict)}
            spec["ports"] = [user.get(p["name"], p) for p in serve_ports]
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
        meta["name"] = meta.get("name") or name
        if not spec.get("type") and service_type:
            spec["type"] = service_type
    else:
        meta = {"name": name, "labels": labels}
        spec = {"selector": selector, "ports": serve_ports}
        if service_type:
            spec["type"] = service_type
    meta["namespace"] = service.namespace
    if per_cluster:
        meta["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster.name,
                                    "uid": cluster.metadata.uid or "", "controller": True,
                                    "blockOwnerDeletion": True}]
    else:
        meta["ownerReferences"] = [owner_reference(service)]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def service_target(svc: Json) -> ObjectRef:
    return ObjectRef.of(svc, api_version="v1", kind="Service")


@dataclass
class ServiceReconcile:
    service: Json  # the Service as it is after this round (existing, updated or created)
    command: Command | None = None


def reconcile_service(desired: Json, existing: Json | None) -> ServiceReconcile:
    """reconcileServices: create if missing; otherwise update only when the selector's RayCluster
    changed (traffic switch), keeping the immutable clusterIP; else leave it alone."""
    ns = desired["metadata"]["namespace"]
    name = desired["metadata"]["name"]
    if existing is None:
        return ServiceReconcile(desired, CreateObject(reason=f"Created the service {ns}/{name}", object=desired,
                                                      event_reason=c.CREATED_SERVICE))
    if cluster_name_from_service(desired) == cluster_name_from_service(existing):
        return ServiceReconcile(existing)
    new_spec = dict(desired.get("spec") or {})
    old_spec = existing.get("spec") or {}
    new_spec.pop("clusterIP", None)
    if old_spec.get("clusterIP"):
        new_spec["clusterIP"] = old_spec["clusterIP"]
    selector_patch: Json = {key: None for key in (old_spec.get("selector") or {}) if key not in new_spec["selector"]}
    selector_patch.update(new_spec["selector"])
    patch_spec = {**new_spec, "selector": selector_patch}
    patch_spec.pop("clusterIP", None)  # immutable: never part of the patch
    updated = copy.deepcopy(existing)
    updated["spec"] = {**old_spec, **new_spec}
    patch: Json = {"spec": patch_spec}
    rv = (existing.get("metadata") or {}).get("resourceVersion")
    if rv:
        patch["metadata"] = {"resourceVersion": rv}  # r.Update: only over the version it read
    return ServiceReconcile(updated, PatchObject(reason=f"Updated the service {ns}/{name}", target=service_target(existing),
                                                 merge_patch=patch, event_reason=c.UPDATED_SERVICE))


def find_head_pods(pods: list[Json], cluster_name: str) -> list[Json]:
    """GetRayClusterHeadPod's list (labels ray.io/cluster, ray.io/node-type=head)."""
    out = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(k.RAY_CLUSTER_LABEL_KEY) == cluster_name and labels.get(k.RAY_NODE_TYPE_LABEL_KEY) == k.HEAD_NODE:
            out.append(pod)
    return out


def serving_port(pod: Json) -> int:
    """utils.FindContainerPort(ray container, "serve", 8000)."""
    containers = ((pod.get("spec") or {}).get("containers") or [{}])
    for port in (containers[0] if containers else {}).get("ports") or []:
        if port.get("name") == k.SERVING_PORT_NAME and port.get("containerPort"):
            return int(port["containerPort"])
    return k.DEFAULT_SERVING_PORT


def head_pod_serve_label(head_pod: Json, observation: ClusterObservation | None, *, exclude: bool) -> str | None:
    """updateHeadPodServeLabel's new value, or None to leave the label as it is.

    "false" when excludeHeadPodFromServeSvc; else the proxy actor's health. raybus difference: a
    head Pod the poller has not probed yet keeps an existing label (unknown is not unhealthy, so a
    fresh poller replica never pulls a serving head out of the serve Service); a Pod without the
    label gets "false", as KubeRay's first failing check would give."""
    name = str((head_pod.get("metadata") or {}).get("name") or "")
    current = ((head_pod.get("metadata") or {}).get("labels") or {}).get(c.SERVE_LABEL)
    if exclude:
        return "false"
    healthy = observation.proxy_healthy.get(name) if observation is not None else None
    if healthy is None:
        return current if current is not None else "false"
    return "true" if healthy else "false"


def update_head_pod_serve_label(service: RayService, head_pod: Json, observation: ClusterObservation | None) -> Command | None:
    """The label patch when the value changes (event UpdatedHeadPodServeLabel)."""
    meta = head_pod.get("metadata") or {}
    new = head_pod_serve_label(head_pod, observation, exclude=bool(service.spec.exclude_head_pod_from_serve_svc))
    if new is None or (meta.get("labels") or {}).get(c.SERVE_LABEL) == new:
        return None
    ns, name = str(meta.get("namespace") or service.namespace), str(meta.get("name") or "")
    return PatchObject(reason=f'Updated the serve label to "{new}" for the Head Pod {ns}/{name}',
                       target=ObjectRef(api_version="v1", kind="Pod", namespace=ns, name=name, uid=meta.get("uid")),
                       merge_patch={"metadata": {"labels": {c.SERVE_LABEL: new}}},
                       event_reason=c.UPDATED_HEAD_POD_SERVE_LABEL)


def num_serve_endpoints(slices: list[Json], *, namespace: str, service_name: str) -> int:
    """calculateNumServeEndpointsFromSlices: ready endpoints of the Service's EndpointSlices,
    counted once per Pod (targetRef.uid), so dual-stack slices do not double count."""
    ready: set[str] = set()
    for eps in slices:
        meta = eps.get("metadata") or {}
        if meta.get("namespace", namespace) != namespace:
            continue
        if (meta.get("labels") or {}).get(c.ENDPOINT_SLICE_SERVICE_NAME_LABEL) != service_name:
            continue
        for endpoint in eps.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is True:
                uid = (endpoint.get("targetRef") or {}).get("uid")
                if uid:
                    ready.add(str(uid))
    return len(ready)
