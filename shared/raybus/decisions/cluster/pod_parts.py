"""Building blocks of KubeRay Pods: system labels, emptyDir volumes, wait-gcs-ready, owner refs."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.dicts import ensure_list
from raybus.decisions.cluster.kuberay_names import check_label, generate_identifier
from raybus.decisions.cluster.ray_start import container_command

INIT_CONTAINER_RESOURCES: dict[str, Any] = {
    "limits": {"cpu": "200m", "memory": "256Mi"},
    "requests": {"cpu": "200m", "memory": "256Mi"},
}

# DefaultWorkerPodTemplate's health-check loop (tabs included: the Go raw string is indented).
_WAIT_GCS_READY_SCRIPT = """
\t\t\t\t\tSECONDS=0
\t\t\t\t\twhile true; do
\t\t\t\t\t\tif (( SECONDS <= 120 )); then
\t\t\t\t\t\t\tif ray health-check --address {addr} > /dev/null 2>&1; then
\t\t\t\t\t\t\t\techo "GCS is ready."
\t\t\t\t\t\t\t\tbreak
\t\t\t\t\t\t\tfi
\t\t\t\t\t\t\techo "$SECONDS seconds elapsed: Waiting for GCS to be ready."
\t\t\t\t\t\telse
\t\t\t\t\t\t\tif ray health-check --address {addr}; then
\t\t\t\t\t\t\t\techo "GCS is ready. Any error messages above can be safely ignored."
\t\t\t\t\t\t\t\tbreak
\t\t\t\t\t\t\tfi
\t\t\t\t\t\t\techo "$SECONDS seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, \
refer to the FAQ at https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html."
\t\t\t\t\t\tfi
\t\t\t\t\t\tsleep 5
\t\t\t\t\tdone
\t\t\t\t"""


def label_pod(
    node_type: str, *, cluster_name: str, group_name: str, override: Mapping[str, str]
) -> dict[str, str]:
    """labelPod: system labels, then the user's labels except node-type, group and cluster."""
    labels = {
        k.RAY_NODE_LABEL_KEY: "yes",
        k.RAY_CLUSTER_LABEL_KEY: cluster_name,
        k.RAY_NODE_TYPE_LABEL_KEY: node_type,
        k.RAY_NODE_GROUP_LABEL_KEY: group_name,
        k.RAY_ID_LABEL_KEY: check_label(generate_identifier(cluster_name, node_type)),
        k.KUBERNETES_APPLICATION_NAME_LABEL_KEY: k.APPLICATION_NAME,
        k.KUBERNETES_CREATED_BY_LABEL_KEY: k.COMPONENT_NAME,
    }
    for key, value in override.items():
        if key not in k.NON_OVERRIDABLE_POD_LABELS:
            labels[key] = value
    return labels


def creator_crd_type(cluster: RayCluster) -> str:
    """getCreatorCRDType / utils.GetCRDType from the cluster's ray.io/originated-from-crd label."""
    value = (cluster.metadata.labels or {}).get(k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY, "")
    return value if value in (k.RAY_JOB_CRD, k.RAY_SERVICE_CRD) else k.RAY_CLUSTER_CRD


def is_overwrite_ray_container_cmd(annotations: Mapping[str, str] | None) -> bool:
    """isOverwriteRayContainerCmd: ray.io/overwrite-container-cmd == "true" (any case)."""
    value = (annotations or {}).get(k.RAY_OVERWRITE_CONTAINER_CMD_ANNOTATION_KEY)
    return value is not None and value.lower() == "true"


def find_memory_req_or_limit(container: Mapping[str, Any]) -> Any:
    """findMemoryReqOrLimit: memory limit if the key is set, else the request, else None."""
    resources = container.get("resources") or {}
    for kind in ("limits", "requests"):
        values = resources.get(kind) or {}
        if "memory" in values:
            return values["memory"]
    return None


def add_empty_dir(
    container: dict[str, Any], pod_spec: dict[str, Any], *, name: str, path: str, medium: str
) -> None:
    """addEmptyDir: skip if ``path`` is already mounted; add the volume if missing; mount it.

    A ``Memory`` volume is sized to the container's memory limit (else request), as in
    makeEmptyDirVolume; other media get no size limit.
    """
    mounts: list[dict[str, Any]] = ensure_list(container, "volumeMounts")
    if any(m.get("mountPath") == path for m in mounts):
        return
    volumes: list[dict[str, Any]] = ensure_list(pod_spec, "volumes")
    if not any(v.get("name") == name for v in volumes):
        empty_dir: dict[str, Any] = {}
        if medium:
            empty_dir["medium"] = medium
        if medium == "Memory":
            size = find_memory_req_or_limit(container)
            if size is not None:
                empty_dir["sizeLimit"] = str(size)
        volumes.append({"name": name, "emptyDir": empty_dir})
    mounts.append({"mountPath": path, "name": name})


def ensure_metrics_port(container: dict[str, Any]) -> None:
    """Add ``metrics: 8080`` unless the Ray container already has a port named metrics."""
    ports: list[dict[str, Any]] = ensure_list(container, "ports")
    if not any(p.get("name") == k.METRICS_PORT_NAME for p in ports):
        ports.append({"name": k.METRICS_PORT_NAME, "containerPort": k.DEFAULT_METRICS_PORT})


def wait_gcs_ready_container(
    ray: Mapping[str, Any], *, fqdn_ray_ip: str, head_port: str, login_shell: bool
) -> dict[str, Any]:
    """The wait-gcs-ready init container: Ray image, the user's env and mounts (TLS), fixed 200m/256Mi."""
    init: dict[str, Any] = {"name": k.WAIT_GCS_READY_INIT_CONTAINER_NAME, "image": ray.get("image", "")}
    if ray.get("imagePullPolicy"):
        init["imagePullPolicy"] = ray["imagePullPolicy"]
    init["command"] = container_command(login_shell=login_shell)
    init["args"] = [_WAIT_GCS_READY_SCRIPT.format(addr=f"{fqdn_ray_ip}:{head_port}")]
    if ray.get("securityContext") is not None:
        init["securityContext"] = copy.deepcopy(ray["securityContext"])
    if ray.get("env"):
        init["env"] = copy.deepcopy(ray["env"])
    if ray.get("volumeMounts"):
        init["volumeMounts"] = copy.deepcopy(ray["volumeMounts"])
    init["resources"] = copy.deepcopy(INIT_CONTAINER_RESOURCES)
    return init


def owner_reference(cluster: RayCluster) -> dict[str, Any]:
    """controllerutil.SetControllerReference's entry for the RayCluster."""
    return {
        "apiVersion": k.RAY_API_VERSION,
        "kind": k.RAY_CLUSTER_KIND,
        "name": cluster.name,
        "uid": cluster.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def set_controller_reference(metadata: dict[str, Any], cluster: RayCluster) -> None:
    """Keep non-controller owner refs from the template, make the RayCluster the controller."""
    refs = [
        ref
        for ref in metadata.get("ownerReferences") or []
        if not ref.get("controller") and ref.get("uid") != cluster.metadata.uid
    ]
    refs.append(owner_reference(cluster))
    metadata["ownerReferences"] = refs
