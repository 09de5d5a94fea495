"""KubeRay's spec predicates (``controllers/ray/utils/util.go``) and well-known keys.

Shared by validation and by reconcilers. Pod templates are raw dicts that may be malformed
(validation runs *before* anything trusts them), so every accessor here tolerates wrong types
and returns empty values instead of raising.
"""

from __future__ import annotations

from typing import Any

from raybus.api.raycluster import AuthMode, AuthOptions, AutoscalerVersion, GcsBackend, RayClusterSpec
from raybus.api.rayservice import RayServiceSpec, RayServiceUpgradeType
from raybus.api.settings import FeatureGates

# Annotations / labels (utils/constant.go).
RAY_FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
RAY_EXTERNAL_STORAGE_NS_ANNOTATION = "ray.io/external-storage-namespace"
RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
RAY_ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"
RAY_JOB_CLUSTER_SELECTOR_KEY = "ray.io/cluster"

# Environment variables KubeRay inspects or owns.
RAY_REDIS_ADDRESS = "RAY_REDIS_ADDRESS"
REDIS_PASSWORD = "REDIS_PASSWORD"
REDIS_USERNAME = "REDIS_USERNAME"
RAY_ENABLE_AUTOSCALER_V2 = "RAY_enable_autoscaler_v2"
KUBERAY_GEN_AUTOSCALER_START_CMD = "KUBERAY_GEN_AUTOSCALER_START_CMD"
RAY_TLS_ENV_VARS = ("RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")

# The Ray container is always the first container of a Ray pod template (RayContainerIndex = 0).
RAY_CONTAINER_INDEX = 0

MANAGED_BY_KUBERAY = "ray.io/kuberay-operator"
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"
ALLOWED_MANAGED_BY = (MANAGED_BY_KUBERAY, MANAGED_BY_MULTIKUEUE)

# Name limits (utils/constant.go): the longest generated child name must stay a valid DNS label,
# e.g. "<cluster>-serve-svc" / "<rayjob>-<5 rand>-head-svc".
MAX_RAY_CLUSTER_NAME_LENGTH = 53
MAX_RAY_JOB_NAME_LENGTH = 47
MAX_RAY_SERVICE_NAME_LENGTH = 47
MAX_RAY_CRON_JOB_NAME_LENGTH = 36


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_spec(template: object) -> dict[str, Any]:
    return as_dict(as_dict(template).get("spec"))


def containers(template: object) -> list[dict[str, Any]]:
    return [as_dict(c) for c in as_list(pod_spec(template).get("containers"))]


def ray_container(template: object) -> dict[str, Any] | None:
    found = containers(template)
    return found[RAY_CONTAINER_INDEX] if found else None


def restart_policy(template: object) -> str:
    value = pod_spec(template).get("restartPolicy")
    return value if isinstance(value, str) else ""


def env_vars(container: object) -> list[dict[str, Any]]:
    return [as_dict(e) for e in as_list(as_dict(container).get("env"))]


def env_var_by_name(name: str, envs: list[Any] | None) -> dict[str, Any] | None:
    for env in envs or []:
        if isinstance(env, dict) and env.get("name") == name:
            return env
    return None


def env_var_exists(name: str, envs: list[Any] | None) -> bool:
    return env_var_by_name(name, envs) is not None


def env_value(env: dict[str, Any] | None) -> str:
    value = (env or {}).get("value")
    return value if isinstance(value, str) else ""


def is_autoscaling_enabled(spec: RayClusterSpec | None) -> bool:
    return spec is not None and spec.enable_in_tree_autoscaling is True


def is_autoscaling_v2_enabled(spec: RayClusterSpec | None) -> bool:
    # Only the explicit field counts; the RAY_enable_autoscaler_v2 env var is checked separately by
    # callers (KubeRay < 1.4 style) exactly where KubeRay does.
    options = spec.autoscaler_options if spec is not None else None
    return options is not None and options.version == AutoscalerVersion.V2


def head_env_enables_autoscaler_v2(spec: RayClusterSpec) -> bool:
    env = env_var_by_name(RAY_ENABLE_AUTOSCALER_V2, env_vars(ray_container(spec.head_group_spec.template)))
    return env is not None and env_value(env) in ("1", "true")


def is_gcs_fault_tolerance_enabled(spec: RayClusterSpec, annotations: dict[str, str] | None) -> bool:
    value = (annotations or {}).get(RAY_FT_ENABLED_ANNOTATION)
    return (isinstance(value, str) and value.lower() == "true") or spec.gcs_fault_tolerance_options is not None


def gcs_fault_tolerance_backend(spec: RayClusterSpec) -> str:
    options = spec.gcs_fault_tolerance_options
    return (options.backend if options is not None and options.backend else None) or GcsBackend.REDIS.value


def is_auth_enabled(spec: RayClusterSpec) -> bool:
    return spec.auth_options is not None and spec.auth_options.mode == AuthMode.TOKEN


def is_k8s_auth_enabled(options: AuthOptions | None) -> bool:
    return options is not None and options.enable_k8s_token_auth is True


def is_tls_enabled(spec: RayClusterSpec) -> bool:
    return spec.tls_options is not None and spec.tls_options.enabled is True


def is_incremental_upgrade_enabled(spec: RayServiceSpec, gates: FeatureGates) -> bool:
    strategy = spec.upgrade_strategy
    return (
        gates.ray_service_incremental_upgrade
        and strategy is not None
        and strategy.type == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE
    )
