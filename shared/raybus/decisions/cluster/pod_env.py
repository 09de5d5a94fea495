"""Environment variables KubeRay injects into Ray containers (common/pod.go).

Containers are plain camelCase dicts; every function mutates the container it is given, appending
in the order KubeRay appends (the order is visible in the Pod spec and therefore in its hash).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from raybus.api.raycluster import AuthOptions
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.dicts import ensure_list
from raybus.decisions.cluster.kuberay_names import check_name, extract_ray_ip_from_fqdn

Container = dict[str, Any]


def env_var_exists(name: str, env: Iterable[dict[str, Any]] | None) -> bool:
    """utils.EnvVarExists."""
    return any(item.get("name") == name for item in env or ())


def _env(container: Container) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = ensure_list(container, "env")
    return env


def field_ref_env(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def set_init_container_env_vars(container: Container, fqdn_ray_ip: str) -> None:
    """setInitContainerEnvVars: FQ_RAY_IP and the deprecated RAY_IP, appended unconditionally."""
    _env(container).extend(
        [
            {"name": k.FQ_RAY_IP, "value": fqdn_ray_ip},
            {"name": k.RAY_IP, "value": extract_ray_ip_from_fqdn(fqdn_ray_ip)},
        ]
    )


def set_container_env_vars(
    container: Container,
    *,
    node_type: str,
    fqdn_ray_ip: str,
    head_port: str,
    ray_start_cmd: str,
    creator_crd_type: str,
    default_container_envs: Iterable[dict[str, Any]],
    kuberay_version: str,
) -> None:
    """setContainerEnvVars for the Ray container of a head or worker Pod."""
    env = _env(container)
    for default in default_container_envs:
        if not env_var_exists(default.get("name", ""), env):
            env.append(dict(default))
    # case 1: head => 127.0.0.1; case 2: worker => the head Service FQDN.
    ip = k.LOCAL_HOST
    if node_type == k.WORKER_NODE:
        ip = fqdn_ray_ip
        env.append({"name": k.FQ_RAY_IP, "value": ip})
        env.append({"name": k.RAY_IP, "value": extract_ray_ip_from_fqdn(ip)})
    env.append(field_ref_env(k.RAY_CLUSTER_NAME, f"metadata.labels['{k.RAY_CLUSTER_LABEL_KEY}']"))
    env.append(field_ref_env(k.RAY_CLUSTER_NAMESPACE, "metadata.namespace"))
    # RAY_CLOUD_INSTANCE_ID / RAY_NODE_TYPE_NAME are read by Ray Autoscaler V2 (kuberay#1751, #1965).
    env.append(field_ref_env(k.RAY_CLOUD_INSTANCE_ID, "metadata.name"))
    env.append(field_ref_env(k.RAY_NODE_TYPE_NAME, f"metadata.labels['{k.RAY_NODE_GROUP_LABEL_KEY}']"))
    env.append({"name": k.KUBERAY_GEN_RAY_START_CMD, "value": ray_start_cmd})
    if not env_var_exists(k.RAY_PORT, env):
        env.append({"name": k.RAY_PORT, "value": head_port})
    if creator_crd_type == k.RAY_SERVICE_CRD:
        # Only for RayService clusters, to improve the serving SLA.
        for name, value in (
            (k.RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO, "0"),
            (k.RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS, "5"),
            (k.RAY_SERVE_KV_TIMEOUT_S, "5"),
        ):
            if not env_var_exists(name, env):
                env.append({"name": name, "value": value})
    if not env_var_exists(k.RAY_ADDRESS, env):
        env.append({"name": k.RAY_ADDRESS, "value": f"{ip}:{head_port}"})
    if not env_var_exists(k.RAY_USAGE_STATS_KUBERAY_IN_USE, env):
        env.append({"name": k.RAY_USAGE_STATS_KUBERAY_IN_USE, "value": "1"})
    if node_type == k.HEAD_NODE:
        env.append(
            {
                "name": k.RAY_USAGE_STATS_EXTRA_TAGS,
                "value": f"kuberay_version={kuberay_version};kuberay_crd={creator_crd_type}",
            }
        )
    if not env_var_exists(k.RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE, env):
        env.append({"name": k.RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE, "value": "1"})


def set_autoscaler_version_env(container: Container, *, v2: bool) -> None:
    """setAutoscalerV2EnvVars / setAutoscalerV1EnvVars (kuberay#4810): RAY_enable_autoscaler_v2."""
    _env(container).append({"name": k.RAY_ENABLE_AUTOSCALER_V2, "value": "true" if v2 else "false"})


def is_auth_enabled(auth: AuthOptions | None) -> bool:
    """utils.IsAuthEnabled: authOptions.mode == token."""
    return auth is not None and auth.mode == k.AUTH_MODE_TOKEN


def is_k8s_auth_enabled(auth: AuthOptions | None) -> bool:
    """utils.IsK8sAuthEnabled: authOptions.enableK8sTokenAuth."""
    return auth is not None and bool(auth.enable_k8s_token_auth)


def auth_secret_name(cluster_name: str, auth: AuthOptions | None) -> str:
    """The token Secret: authOptions.secretName, else ``CheckName(<cluster>)`` (reconcileAuthSecret)."""
    if auth is not None and auth.secret_name:
        return auth.secret_name
    return check_name(cluster_name)


def set_container_token_auth_env_vars(
    container: Container, *, cluster_name: str, auth: AuthOptions | None
) -> None:
    """SetContainerTokenAuthEnvVars: RAY_AUTH_MODE=token plus either the K8s-token flag and mount or
    RAY_AUTH_TOKEN from the Secret (a secretKeyRef; the token value is never read here)."""
    env = _env(container)
    if not env_var_exists(k.RAY_AUTH_MODE_ENV_VAR, env):
        env.append({"name": k.RAY_AUTH_MODE_ENV_VAR, "value": k.AUTH_MODE_TOKEN})
    if is_k8s_auth_enabled(auth):
        if not env_var_exists(k.RAY_ENABLE_K8S_TOKEN_AUTH_ENV_VAR, env):
            env.append({"name": k.RAY_ENABLE_K8S_TOKEN_AUTH_ENV_VAR, "value": "true"})
        mounts: list[dict[str, Any]] = ensure_list(container, "volumeMounts")
        if not any(m.get("name") == k.RAY_TOKEN_VOLUME_NAME for m in mounts):
            mounts.append(
                {"name": k.RAY_TOKEN_VOLUME_NAME, "mountPath": k.RAY_TOKEN_MOUNT_PATH, "readOnly": True}
            )
        return
    if not env_var_exists(k.RAY_AUTH_TOKEN_ENV_VAR, env):
        secret = auth_secret_name(cluster_name, auth)
        env.append(
            {
                "name": k.RAY_AUTH_TOKEN_ENV_VAR,
                "valueFrom": {"secretKeyRef": {"name": secret, "key": k.RAY_AUTH_TOKEN_SECRET_KEY}},
            }
        )


def add_ray_token_volume(pod_spec: dict[str, Any]) -> None:
    """AddRayTokenVolume: projected service-account token volume for K8s token auth."""
    volumes: list[dict[str, Any]] = ensure_list(pod_spec, "volumes")
    if any(v.get("name") == k.RAY_TOKEN_VOLUME_NAME for v in volumes):
        return
    volumes.append(
        {
            "name": k.RAY_TOKEN_VOLUME_NAME,
            "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
        }
    )


def configure_token_auth(pod_spec: dict[str, Any], *, cluster_name: str, auth: AuthOptions | None) -> None:
    """configureTokenAuth: the Ray container, the token volume (K8s auth), and wait-gcs-ready."""
    set_container_token_auth_env_vars(
        pod_spec["containers"][k.RAY_CONTAINER_INDEX], cluster_name=cluster_name, auth=auth
    )
    if is_k8s_auth_enabled(auth):
        add_ray_token_volume(pod_spec)
    for init in pod_spec.get("initContainers") or []:
        if init.get("name") == k.WAIT_GCS_READY_INIT_CONTAINER_NAME:
            set_container_token_auth_env_vars(init, cluster_name=cluster_name, auth=auth)
