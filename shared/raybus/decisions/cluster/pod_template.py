"""Head and worker Pod manifests exactly as KubeRay builds them.

Mirrors ``DefaultHeadPodTemplate`` / ``DefaultWorkerPodTemplate`` followed by ``BuildPod``
(ray-operator/controllers/ray/common/pod.go, KubeRay v1.7) and the controller's ``buildHeadPod`` /
``buildWorkerPod`` (sidecar containers, owner reference). Differences by design:
- names are chosen by the caller (``metadata.name``; never ``generateName``) so a redelivered
  create command is idempotent; ``head_pod_name_prefix`` / ``worker_pod_name_prefix`` give the
  prefix KubeRay would hand to the API server.
- everything KubeRay reads from the environment or feature gates comes from ``OperatorSettings``.
Pure: the input cluster is never mutated.
"""

from __future__ import annotations

import copy
from typing import Any

from raybus.api.defaults import with_defaults
from raybus.api.raycluster import RayCluster, WorkerGroupSpec
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.autoscaler_container import (
    build_autoscaler_container,
    is_autoscaling_enabled,
    is_autoscaling_v1_enabled,
    is_autoscaling_v2_enabled,
    merge_autoscaler_overrides,
)
from raybus.decisions.cluster.dicts import ensure_dict, ensure_list
from raybus.decisions.cluster.gcs_ft import configure_gcs_fault_tolerance
from raybus.decisions.cluster.history_server import inject_history_server_collector, inject_ray_events_export
from raybus.decisions.cluster.kuberay_names import (
    check_name,
    fqdn_ray_ip,
    head_group_service_account_name,
    pod_name,
)
from raybus.decisions.cluster.pod_env import (
    configure_token_auth,
    is_auth_enabled,
    set_autoscaler_version_env,
    set_container_env_vars,
    set_container_token_auth_env_vars,
    set_init_container_env_vars,
)
from raybus.decisions.cluster.pod_parts import (
    add_empty_dir,
    creator_crd_type,
    ensure_metrics_port,
    is_overwrite_ray_container_cmd,
    label_pod,
    set_controller_reference,
    wait_gcs_ready_container,
)
from raybus.decisions.cluster.probes import init_liveness_and_readiness_probe
from raybus.decisions.cluster.ray_start import (
    container_command,
    convert_cmd_to_string,
    generate_ray_start_command,
    get_head_port,
    set_missing_ray_start_params,
    ulimit_command,
    update_ray_start_params_labels,
    update_ray_start_params_resources,
)
from raybus.decisions.cluster.settings import OperatorSettings

__all__ = [
    "build_head_pod",
    "build_worker_pod",
    "head_pod_name_prefix",
    "head_ray_start_params",
    "worker_pod_name_prefix",
    "worker_ray_start_params",
]


def head_pod_name_prefix(cluster: RayCluster, *, settings: OperatorSettings) -> str:
    """utils.PodName(<cluster>, head, ...): ``<cluster>-head-`` (generateName; append 5 random chars)
    or, with ENABLE_DETERMINISTIC_HEAD_POD_NAME, the full name ``<cluster>-head``. The cluster name is
    cut to its first 50 characters and lower-cased."""
    return pod_name(cluster.name, k.HEAD_NODE, generate_name=not settings.enable_deterministic_head_pod_name)


def worker_pod_name_prefix(cluster: RayCluster, group: WorkerGroupSpec) -> str:
    """utils.PodName(<cluster>-<group>, worker, true): ``<cluster>-<group>-worker-`` (prefix cut to 50)."""
    return pod_name(f"{cluster.name}-{group.group_name}", k.WORKER_NODE, generate_name=True)


def _template(source: dict[str, Any], *, name: str, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    template = copy.deepcopy(source)
    meta: dict[str, Any] = ensure_dict(template, "metadata")
    meta.pop("generateName", None)
    meta["name"] = name
    meta["namespace"] = namespace  # Pods are confined to the RayCluster's namespace.
    spec: dict[str, Any] = ensure_dict(template, "spec")
    if not spec.get("containers"):
        raise ValueError("the Pod template has no containers; the Ray container must be the first one")
    return template, meta


def _init_template_annotations(cluster: RayCluster, meta: dict[str, Any]) -> None:
    """initTemplateAnnotations: copy ray.io/overwrite-container-cmd from the RayCluster."""
    annotations = ensure_dict(meta, "annotations")
    if is_overwrite_ray_container_cmd(cluster.metadata.annotations):
        annotations[k.RAY_OVERWRITE_CONTAINER_CMD_ANNOTATION_KEY] = "true"


def _merged_labels(template_meta: dict[str, Any], group_labels: dict[str, str] | None) -> dict[str, str]:
    """mergeLabels: the group's top-level ``labels`` win over the template's."""
    return {**(template_meta.get("labels") or {}), **(group_labels or {})}


def head_ray_start_params(cluster: RayCluster) -> dict[str, str]:
    """The head group's rayStartParams after updateRayStartParams{Resources,Labels} (a copy)."""
    head = cluster.spec.head_group_spec
    params = dict(head.ray_start_params or {})
    update_ray_start_params_resources(params, head.resources)
    update_ray_start_params_labels(params, head.labels)
    return params


def worker_ray_start_params(group: WorkerGroupSpec) -> dict[str, str]:
    """A worker group's rayStartParams after updateRayStartParams{Resources,Labels} (a copy)."""
    params = dict(group.ray_start_params or {})
    update_ray_start_params_resources(params, group.resources)
    update_ray_start_params_labels(params, group.labels)
    return params


def build_head_pod(cluster: RayCluster, *, settings: OperatorSettings, name: str) -> dict[str, Any]:
    """The head Pod manifest (DefaultHeadPodTemplate + head sidecars + BuildPod + owner reference)."""
    cluster = with_defaults(cluster)
    spec = cluster.spec
    head = spec.head_group_spec
    head_port = get_head_port(head.ray_start_params or {})
    fqdn = fqdn_ray_ip(cluster, settings=settings)
    template, meta = _template(head.template, name=name, namespace=cluster.namespace)
    pod_spec: dict[str, Any] = template["spec"]
    containers: list[dict[str, Any]] = pod_spec["containers"]
    ray = containers[k.RAY_CONTAINER_INDEX]

    params = head_ray_start_params(cluster)
    meta["labels"] = label_pod(
        k.HEAD_NODE,
        cluster_name=cluster.name,
        group_name=k.RAY_NODE_HEAD_GROUP_LABEL_VALUE,
        override=_merged_labels(meta, head.labels),
    )
    set_missing_ray_start_params(params, node_type=k.HEAD_NODE, head_port=head_port, fqdn_ray_ip="")
    _init_template_annotations(cluster, meta)

    autoscaling = is_autoscaling_enabled(spec)
    if autoscaling:
        # KubeRay's autoscaler replaces Ray's monitor process.
        params["no-monitor"] = "true"
        pod_spec["serviceAccountName"] = check_name(head_group_service_account_name(cluster))
        image = settings.default_autoscaler_image or ray.get("image", "")
        autoscaler = build_autoscaler_container(image, login_shell=settings.enable_login_shell)
        if is_auth_enabled(spec.auth_options):
            set_container_token_auth_env_vars(autoscaler, cluster_name=cluster.name, auth=spec.auth_options)
        merge_autoscaler_overrides(autoscaler, spec.autoscaler_options)
        containers.append(autoscaler)
        if is_autoscaling_v2_enabled(spec):
            set_autoscaler_version_env(ray, v2=True)
            pod_spec["restartPolicy"] = "Never"
        elif is_autoscaling_v1_enabled(spec):
            set_autoscaler_version_env(ray, v2=False)

    configure_gcs_fault_tolerance(template, cluster, node_type=k.HEAD_NODE, head_params=params)
    ensure_metrics_port(ray)
    if is_auth_enabled(spec.auth_options):
        configure_token_auth(pod_spec, cluster_name=cluster.name, auth=spec.auth_options)
    containers.extend(copy.deepcopy(list(settings.head_sidecar_containers)))
    return _build_pod(
        cluster,
        template,
        node_type=k.HEAD_NODE,
        params=params,
        head_port=head_port,
        autoscaling=autoscaling,
        fqdn=fqdn,
        settings=settings,
    )


def build_worker_pod(
    cluster: RayCluster,
    group: WorkerGroupSpec,
    *,
    settings: OperatorSettings,
    name: str,
    replica_group_name: str | None = None,
    replica_index: int | None = None,
    host_index: int | None = None,
) -> dict[str, Any]:
    """A worker Pod manifest (DefaultWorkerPodTemplate + worker sidecars + BuildPod + owner ref).

    ``replica_index`` / ``replica_group_name`` / ``host_index`` feed the RayMultiHostIndexing labels;
    like KubeRay's int parameters they count as 0 / "" when not given.
    """
    cluster = with_defaults(cluster)
    spec = cluster.spec
    head_port = get_head_port(spec.head_group_spec.ray_start_params or {})
    fqdn = fqdn_ray_ip(cluster, settings=settings)
    template, meta = _template(group.template, name=name, namespace=cluster.namespace)
    pod_spec: dict[str, Any] = template["spec"]
    containers: list[dict[str, Any]] = pod_spec["containers"]
    ray = containers[k.RAY_CONTAINER_INDEX]

    if settings.enable_init_container_injection:
        # The worker only starts once the head's GCS answers `ray health-check`.
        init = wait_gcs_ready_container(
            ray, fqdn_ray_ip=fqdn, head_port=head_port, login_shell=settings.enable_login_shell
        )
        ensure_list(pod_spec, "initContainers").append(init)

    params = worker_ray_start_params(group)
    labels = label_pod(
        k.WORKER_NODE,
        cluster_name=cluster.name,
        group_name=group.group_name,
        override=_merged_labels(meta, group.labels),
    )
    if settings.feature_gates.ray_multi_host_indexing:
        labels[k.RAY_WORKER_REPLICA_INDEX_KEY] = str(replica_index or 0)
        if (group.num_of_hosts or 1) > 1:
            labels[k.RAY_WORKER_REPLICA_NAME_KEY] = replica_group_name or ""
            labels[k.RAY_HOST_INDEX_KEY] = str(host_index or 0)
    meta["labels"] = labels
    set_missing_ray_start_params(params, node_type=k.WORKER_NODE, head_port=head_port, fqdn_ray_ip=fqdn)
    _init_template_annotations(cluster, meta)
    configure_gcs_fault_tolerance(template, cluster, node_type=k.WORKER_NODE, head_params={})
    ensure_metrics_port(ray)
    if is_autoscaling_enabled(spec) and is_autoscaling_v2_enabled(spec):
        pod_spec["restartPolicy"] = "Never"
    if is_auth_enabled(spec.auth_options):
        configure_token_auth(pod_spec, cluster_name=cluster.name, auth=spec.auth_options)
    containers.extend(copy.deepcopy(list(settings.worker_sidecar_containers)))
    return _build_pod(
        cluster,
        template,
        node_type=k.WORKER_NODE,
        params=params,
        head_port=head_port,
        autoscaling=is_autoscaling_enabled(spec),
        fqdn=fqdn,
        settings=settings,
    )


def apply_default_pod_metadata(meta: dict[str, Any], settings: OperatorSettings) -> None:
    """buildHeadPod/buildWorkerPod (v1.7): the operator config's defaultPodAnnotations and
    defaultPodLabels, added before BuildPod; a key the Pod template already has keeps its value."""
    for field, defaults in (("annotations", settings.default_pod_annotations),
                            ("labels", settings.default_pod_labels)):
        if not defaults:
            continue
        current = meta.get(field)
        merged = dict(current) if isinstance(current, dict) else {}
        for key, value in defaults.items():
            merged.setdefault(key, value)
        meta[field] = merged


def _build_pod(
    cluster: RayCluster,
    template: dict[str, Any],
    *,
    node_type: str,
    params: dict[str, str],
    head_port: str,
    autoscaling: bool,
    fqdn: str,
    settings: OperatorSettings,
) -> dict[str, Any]:
    """BuildPod: serve label, volumes, container command, env vars, probes; plus the owner ref."""
    meta: dict[str, Any] = template["metadata"]
    apply_default_pod_metadata(meta, settings)
    pod_spec: dict[str, Any] = template["spec"]
    containers: list[dict[str, Any]] = pod_spec["containers"]
    ray = containers[k.RAY_CONTAINER_INDEX]
    creator = creator_crd_type(cluster)

    if creator == k.RAY_SERVICE_CRD:
        # Workers: readiness probe decides; head: the RayService controller flips the label.
        meta["labels"][k.RAY_CLUSTER_SERVING_SERVICE_LABEL_KEY] = (
            k.ENABLE_RAY_CLUSTER_SERVING_SERVICE_FALSE
            if node_type == k.HEAD_NODE
            else k.ENABLE_RAY_CLUSTER_SERVING_SERVICE_TRUE
        )

    _volumes_and_sidecars(cluster, pod_spec, ray, node_type=node_type, params=params, autoscaling=autoscaling,
                          settings=settings)
    ray_start_cmd = _ray_start_command(ray, meta, node_type=node_type, params=params, settings=settings)
    for init in pod_spec.get("initContainers") or []:
        set_init_container_env_vars(init, fqdn)
    set_container_env_vars(
        ray,
        node_type=node_type,
        fqdn_ray_ip=fqdn,
        head_port=head_port,
        ray_start_cmd=ray_start_cmd,
        creator_crd_type=creator,
        default_container_envs=settings.default_container_envs,
        kuberay_version=settings.kuberay_version,
    )
    if settings.enable_probes_injection:
        init_liveness_and_readiness_probe(
            ray,
            node_type=node_type,
            creator_crd_type=creator,
            params=params,
            ray_version=cluster.spec.ray_version,
        )
    set_controller_reference(meta, cluster)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def _volumes_and_sidecars(cluster: RayCluster, pod_spec: dict[str, Any], ray: dict[str, Any], *, node_type: str,
                          params: dict[str, str], autoscaling: bool, settings: OperatorSettings) -> None:
    """BuildPod's volumes: /dev/shm, the autoscaler's shared log volume, the history server's
    collector, and raybus's Ray-event export on the head."""
    containers: list[dict[str, Any]] = pod_spec["containers"]
    # /dev/shm for the object store, unless the user points plasma elsewhere.
    if k.PLASMA_DIRECTORY_PARAM_KEY not in params:
        add_empty_dir(
            ray,
            pod_spec,
            name=k.SHARED_MEMORY_VOLUME_NAME,
            path=k.SHARED_MEMORY_VOLUME_MOUNT_PATH,
            medium="Memory",
        )
    if node_type == k.HEAD_NODE and autoscaling:
        # The autoscaler writes logs the head's event logger reads (ray-project/ray#13434).
        autoscaler = next(c for c in containers if c.get("name") == k.AUTOSCALER_CONTAINER_NAME)
        for target in (ray, autoscaler):
            add_empty_dir(
                target, pod_spec, name=k.RAY_LOG_VOLUME_NAME, path=k.RAY_LOG_VOLUME_MOUNT_PATH, medium=""
            )
    # Same place as the autoscaler's sidecar: the collector shares its /tmp/ray volume.
    inject_history_server_collector(pod_spec, cluster, node_type=node_type, settings=settings)
    # raybus's own: the head pushes job ends to the dashboard-poller (decisions/ray_events.py). Only
    # the head (its GCS records the job supervisor actors' deaths), and never over an export address
    # the user or the history server collector already set: Ray exports to one address only.
    if node_type == k.HEAD_NODE:
        inject_ray_events_export(ray, settings.ray_events, namespace=cluster.namespace, cluster=cluster.name,
                                 uid=cluster.metadata.uid or "")


def _ray_start_command(ray: dict[str, Any], meta: dict[str, Any], *, node_type: str, params: dict[str, str],
                       settings: OperatorSettings) -> str:
    """The container's command: the user's, then `ray start` (unless it already runs it, or the
    overwrite annotation says the user owns the command). Returns the generated ray start command."""
    cmd = ""
    if ray.get("command"):
        cmd = convert_cmd_to_string(list(ray["command"]))
    if ray.get("args"):
        cmd += convert_cmd_to_string(list(ray["args"]))
    ray_start_cmd = generate_ray_start_command(node_type, params, resources=ray.get("resources") or {})
    if not is_overwrite_ray_container_cmd(meta.get("annotations")) and "ray start" not in cmd:
        generated = f"{ulimit_command()}; {ray_start_cmd}"
        ray["command"] = container_command(login_shell=settings.enable_login_shell)
        # `ray start --block` never returns, so the user's command runs first.
        ray["args"] = [f"{cmd} && {generated}" if cmd else generated]
    return ray_start_cmd
