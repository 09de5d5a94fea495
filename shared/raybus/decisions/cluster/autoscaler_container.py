"""The Ray autoscaler sidecar KubeRay adds to the head Pod (BuildAutoscalerContainer)."""

from __future__ import annotations

import copy
from typing import Any

from raybus.api.raycluster import AutoscalerOptions, RayClusterSpec
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.dicts import ensure_list
from raybus.decisions.cluster.pod_env import field_ref_env
from raybus.decisions.cluster.ray_start import container_command

AUTOSCALER_START_CMD = (
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
)
DEFAULT_AUTOSCALER_RESOURCES: dict[str, Any] = {
    "limits": {"cpu": "500m", "memory": "512Mi"},
    "requests": {"cpu": "500m", "memory": "512Mi"},
}


def is_autoscaling_enabled(spec: RayClusterSpec) -> bool:
    """utils.IsAutoscalingEnabled: enableInTreeAutoscaling == true."""
    return bool(spec.enable_in_tree_autoscaling)


def is_autoscaling_v2_enabled(spec: RayClusterSpec) -> bool:
    """utils.IsAutoscalingV2Enabled: autoscalerOptions.version == v2 (explicit only)."""
    return spec.autoscaler_options is not None and spec.autoscaler_options.version == "v2"


def is_autoscaling_v1_enabled(spec: RayClusterSpec) -> bool:
    """utils.IsAutoscalingV1Enabled: autoscalerOptions.version == v1 (explicit only, kuberay#4810)."""
    return spec.autoscaler_options is not None and spec.autoscaler_options.version == "v1"


def autoscaler_v1_restart_policy_warning(spec: RayClusterSpec) -> str | None:
    """v1.7 rayClusterReconcile: with autoscaler v1, worker groups whose Pod template sets a
    restartPolicy other than Never get a (non-blocking) InvalidRayClusterSpec Warning."""
    if not (is_autoscaling_enabled(spec) and is_autoscaling_v1_enabled(spec)):
        return None
    names = [group.group_name for group in spec.worker_group_specs or []
             if ((group.template or {}).get("spec") or {}).get("restartPolicy") not in (None, "", "Never")]
    if not names:
        return None
    return f"restartPolicy for worker groups [{', '.join(names)}] should be Never or unset when using autoscaler V1"


def build_autoscaler_container(image: str, *, login_shell: bool) -> dict[str, Any]:
    """BuildAutoscalerContainer: same image as the Ray head by default, Guaranteed 500m/512Mi."""
    return {
        "name": k.AUTOSCALER_CONTAINER_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            field_ref_env(k.RAY_CLUSTER_NAME, f"metadata.labels['{k.RAY_CLUSTER_LABEL_KEY}']"),
            field_ref_env(k.RAY_CLUSTER_NAMESPACE, "metadata.namespace"),
            field_ref_env("RAY_HEAD_POD_NAME", "metadata.name"),
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
            # Users overriding args can still run "$KUBERAY_GEN_AUTOSCALER_START_CMD".
            {"name": k.KUBERAY_GEN_AUTOSCALER_START_CMD, "value": AUTOSCALER_START_CMD},
        ],
        "command": container_command(login_shell=login_shell),
        "args": [AUTOSCALER_START_CMD],
        "resources": copy.deepcopy(DEFAULT_AUTOSCALER_RESOURCES),
    }


def merge_autoscaler_overrides(container: dict[str, Any], options: AutoscalerOptions | None) -> None:
    """mergeAutoscalerOverrides: resources/image/pullPolicy/securityContext/command/args replace;
    env/envFrom/volumeMounts append."""
    if options is None:
        return
    if options.resources is not None:
        container["resources"] = copy.deepcopy(options.resources)
    if options.image is not None:
        container["image"] = options.image
    if options.image_pull_policy is not None:
        container["imagePullPolicy"] = options.image_pull_policy
    for field, key in (
        (options.env, "env"),
        (options.env_from, "envFrom"),
        (options.volume_mounts, "volumeMounts"),
    ):
        if field:
            ensure_list(container, key).extend(copy.deepcopy(field))
    if options.security_context is not None:
        container["securityContext"] = copy.deepcopy(options.security_context)
    if options.command:
        container["command"] = list(options.command)
    if options.args:
        container["args"] = list(options.args)
