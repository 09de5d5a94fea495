"""GCS fault tolerance wiring on head and worker Pods (configureGCSFaultTolerance / configureRedisFT)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from raybus.api.raycluster import GcsFaultToleranceOptions, RayCluster, RedisCredential
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.dicts import ensure_dict, ensure_list
from raybus.decisions.cluster.pod_env import env_var_exists


def is_gcs_fault_tolerance_enabled(cluster: RayCluster) -> bool:
    """utils.IsGCSFaultToleranceEnabled: ray.io/ft-enabled=true (any case) or gcsFaultToleranceOptions set."""
    annotations = cluster.metadata.annotations or {}
    value = annotations.get(k.RAY_FT_ENABLED_ANNOTATION_KEY)
    return (
        value is not None and value.lower() == "true"
    ) or cluster.spec.gcs_fault_tolerance_options is not None


def is_gcs_fault_tolerance_embedded(options: GcsFaultToleranceOptions | None) -> bool:
    """utils.IsGCSFaultToleranceEmbedded: backend == rocksdb."""
    return options is not None and options.backend == "rocksdb"


def external_storage_namespace(cluster: RayCluster) -> str:
    """Priority: gcsFaultToleranceOptions.externalStorageNamespace > annotation > the cluster UID."""
    namespace = cluster.metadata.uid or ""
    annotations = cluster.metadata.annotations or {}
    if k.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY in annotations:
        namespace = annotations[k.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY]
    options = cluster.spec.gcs_fault_tolerance_options
    if options is not None and options.external_storage_namespace:
        namespace = options.external_storage_namespace
    return namespace


def _credential_env(name: str, cred: RedisCredential) -> dict[str, Any]:
    """An EnvVar carrying value or valueFrom verbatim; Secret values are never resolved here."""
    env: dict[str, Any] = {"name": name}
    if cred.value:
        env["value"] = cred.value
    if cred.value_from is not None:
        env["valueFrom"] = dict(cred.value_from)
    return env


def configure_gcs_fault_tolerance(
    template: dict[str, Any], cluster: RayCluster, *, node_type: str, head_params: MutableMapping[str, str]
) -> None:
    """configureGCSFaultTolerance. ``head_params`` is the head group's rayStartParams (KubeRay writes
    ``redis-username``/``redis-password`` = ``$REDIS_*`` into it)."""
    enabled = is_gcs_fault_tolerance_enabled(cluster)
    annotations: dict[str, str] = ensure_dict(ensure_dict(template, "metadata"), "annotations")
    if node_type == k.HEAD_NODE:
        annotations[k.RAY_FT_ENABLED_ANNOTATION_KEY] = "true" if enabled else "false"
    if not enabled:
        return
    container = template["spec"]["containers"][k.RAY_CONTAINER_INDEX]
    env: list[dict[str, Any]] = ensure_list(container, "env")
    if node_type == k.WORKER_NODE and not env_var_exists(k.RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S, env):
        # Workers outlive a ~120 s head restart instead of exiting after Ray's 60 s default.
        env.append(
            {
                "name": k.RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S,
                "value": k.DEFAULT_WORKER_RAY_GCS_RECONNECT_TIMEOUT_S,
            }
        )
    if node_type != k.HEAD_NODE:
        return
    options = cluster.spec.gcs_fault_tolerance_options
    if is_gcs_fault_tolerance_embedded(options):
        return  # configureEmbeddedFT (RocksDB, alpha gate) is not implemented in raybus yet.
    _configure_redis_ft(annotations, env, cluster, options, head_params)


def _configure_redis_ft(
    annotations: dict[str, str],
    env: list[dict[str, Any]],
    cluster: RayCluster,
    options: GcsFaultToleranceOptions | None,
    head_params: MutableMapping[str, str],
) -> None:
    """configureRedisFT: storage namespace, Redis address, username and password."""
    storage_ns = external_storage_namespace(cluster)
    annotations[k.RAY_EXTERNAL_STORAGE_NS_ANNOTATION_KEY] = storage_ns
    if not env_var_exists(k.RAY_EXTERNAL_STORAGE_NS, env):
        env.append({"name": k.RAY_EXTERNAL_STORAGE_NS, "value": storage_ns})
    if options is not None:
        address: dict[str, Any] = {"name": k.RAY_REDIS_ADDRESS}
        if options.redis_address:  # EnvVar.value is omitempty
            address["value"] = options.redis_address
        env.append(address)
        if options.redis_username is not None:
            head_params["redis-username"] = "$REDIS_USERNAME"  # Ray >= 2.41
            env.append(_credential_env(k.REDIS_USERNAME, options.redis_username))
        if options.redis_password is not None:
            head_params["redis-password"] = "$REDIS_PASSWORD"
            env.append(_credential_env(k.REDIS_PASSWORD, options.redis_password))
    elif not env_var_exists(k.REDIS_PASSWORD, env) and "redis-password" in head_params:
        # Legacy: a plain-text redis-password param is mirrored so the Redis cleanup Job can log in.
        env.append({"name": k.REDIS_PASSWORD, "value": head_params["redis-password"]})
