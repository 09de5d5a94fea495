"""The RayCluster a RayJob owns and its head Service (``constructRayClusterForRayJob``,
``BuildHeadServiceForRayJob``, ``FetchHeadServiceURL``)."""

from __future__ import annotations

import copy
from typing import Any

from raybus.api.predicates import as_dict, as_list
from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import JobSubmissionMode, RayJob
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.dicts import ensure_dict, ensure_list
from raybus.decisions.cluster.k8s_services import build_head_service, service_ports
from raybus.decisions.cluster.kuberay_names import (
    check_label,
    generate_identifier,
    head_service_name,
    owner_head_service_name,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.job import constants as c
from raybus.decisions.job.submitter import (
    SubmitterError,
    owner_reference,
    submission_mode,
    submitter_container,
)


def construct_ray_cluster(job: RayJob, *, name: str, job_id: str, dashboard_url: str,
                          settings: OperatorSettings) -> dict[str, Any]:
    """constructRayClusterForRayJob: rayClusterSpec as is, the RayJob's labels and annotations plus
    KubeRay's origin labels, the RayJob as controller owner; SidecarMode injects the submitter
    container into the head Pod and sets its restartPolicy to Never (a head restart would re-run
    the submitter; RayJob-level retries replace it)."""
    spec_model = job.spec.ray_cluster_spec
    if spec_model is None:
        raise SubmitterError("rayClusterSpec is required to create a RayCluster")
    mode = submission_mode(job)
    labels = dict(job.metadata.labels or {})
    labels[k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY] = job.name
    labels[k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY] = k.RAY_JOB_CRD
    labels[c.RAY_JOB_SUBMISSION_MODE_LABEL_KEY] = mode
    annotations = dict(job.metadata.annotations or {})
    spec = copy.deepcopy(spec_model.to_dict())
    if mode == JobSubmissionMode.SIDECAR:
        annotations[c.DISABLE_PROVISIONED_HEAD_RESTART_ANNOTATION_KEY] = "true"
        sidecar = submitter_container(job, job_id=job_id, dashboard_url=dashboard_url, cluster_name=name,
                                      cluster_spec=spec_model, settings=settings)
        head = ensure_dict(spec, "headGroupSpec")
        pod_spec = ensure_dict(ensure_dict(head, "template"), "spec")
        ensure_list(pod_spec, "containers").append(sidecar)
        pod_spec["restartPolicy"] = "Never"
    metadata: dict[str, Any] = {"name": name, "namespace": job.namespace, "labels": labels,
                                "ownerReferences": [owner_reference(job)]}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": k.RAY_API_VERSION, "kind": k.RAY_CLUSTER_KIND, "metadata": metadata, "spec": spec}


def dashboard_url(cluster: RayCluster, *, settings: OperatorSettings) -> str:
    """utils.FetchHeadServiceURL(cluster, "dashboard"): ``<head-svc>.<ns>.svc.<domain>:<port>``.

    KubeRay reads the port from the head Service; raybus derives the same Service from the cluster
    spec the way the cluster reconciler builds it (a custom headService's own ports come first).
    Raises SubmitterError when the Service has no port named dashboard."""
    ports: list[tuple[str, int]] = []
    custom = cluster.spec.head_group_spec.head_service
    for port in as_list(as_dict(as_dict(custom).get("spec")).get("ports")):
        port = as_dict(port)
        ports.append((str(port.get("name") or ""), int(port.get("port") or 0)))
    ports += list(service_ports(cluster).items())
    for port_name, number in ports:
        if port_name == k.DASHBOARD_PORT_NAME:
            return f"{head_service_name(cluster)}.{cluster.namespace}.svc.{settings.cluster_domain}:{number}"
    raise SubmitterError(f"{k.DASHBOARD_PORT_NAME} port is not found")


def build_head_service_for_rayjob(job: RayJob, cluster: RayCluster, *, settings: OperatorSettings) -> dict[str, Any]:
    """common.BuildHeadServiceForRayJob: the cluster's head Service renamed ``<rayjob>-head-svc``,
    labelled for the RayJob and owned by it, selecting the current cluster's head Pod."""
    service = build_head_service(cluster, settings=settings)
    meta = service["metadata"]
    meta["name"] = owner_head_service_name(job.name)
    meta["namespace"] = job.namespace
    meta["labels"] = {
        k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: job.name,
        k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: k.RAY_JOB_CRD,
        k.RAY_NODE_TYPE_LABEL_KEY: k.HEAD_NODE,
        k.RAY_ID_LABEL_KEY: check_label(generate_identifier(job.name, k.HEAD_NODE)),
    }
    meta["ownerReferences"] = [owner_reference(job)]
    return service


def service_selects_cluster(service: dict[str, Any]) -> str:
    return str(as_dict(as_dict(service.get("spec")).get("selector")).get(k.RAY_CLUSTER_LABEL_KEY) or "")
