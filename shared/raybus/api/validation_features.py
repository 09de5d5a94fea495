"""RayClusterSpec checks for the v1.5-v1.7 optional features: GCS FT backends, auth, NetworkPolicy,
mTLS and the history-server collector (KubeRay ``utils/validation.go``). Messages are KubeRay's."""

from __future__ import annotations

from typing import Any

from raybus.api.k8s_names import go_list, is_dns1123_label, parse_generic_version
from raybus.api.predicates import (
    KUBERAY_GEN_AUTOSCALER_START_CMD,
    RAY_TLS_ENV_VARS,
    as_dict,
    containers,
    env_var_exists,
    env_vars,
    gcs_fault_tolerance_backend,
    is_auth_enabled,
    is_k8s_auth_enabled,
    is_tls_enabled,
)
from raybus.api.raycluster import GcsBackend, NetworkPolicyMode, RayClusterSpec
from raybus.api.settings import FeatureGates


def validate_gcs_backend(spec: RayClusterSpec, *, gates: FeatureGates) -> list[str]:
    options = spec.gcs_fault_tolerance_options
    if options is None:
        return []
    backend = gcs_fault_tolerance_backend(spec)
    if backend not in (GcsBackend.REDIS, GcsBackend.ROCKSDB):
        # CRD enum (redis;rocksdb); KubeRay's switch would silently treat it as redis.
        return [(f'spec.gcsFaultToleranceOptions.backend: Unsupported value: "{backend}": supported values: '
                '"redis", "rocksdb"')]
    if backend == GcsBackend.REDIS:
        if options.storage is not None:
            return [("cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies to "
                    "the 'rocksdb' backend")]
        return []
    errs: list[str] = []
    if not gates.gcs_fault_tolerance_embedded_storage:
        errs.append("the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: 'rocksdb') "
                    "requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled")
    for field, is_set in (
        ("RedisAddress", bool(options.redis_address)),
        ("RedisUsername", options.redis_username is not None),
        ("RedisPassword", options.redis_password is not None),
        ("ExternalStorageNamespace", bool(options.external_storage_namespace)),
    ):
        if is_set:
            errs.append(f"cannot set GcsFaultToleranceOptions.{field} when backend is 'rocksdb'")
    storage = options.storage
    has_managed_pvc_fields = storage is not None and (
        storage.size is not None or storage.storage_class_name is not None or bool(storage.access_modes)
    )
    if storage is not None and storage.claim_name and has_managed_pvc_fields:
        errs.append("GcsFaultToleranceOptions.Storage.ClaimName is mutually exclusive with size, "
                    "storageClassName, and accessModes")
    return errs


def ray_version_below(ray_version: str, minimum: tuple[int, ...]) -> bool | str:
    """Whether ``ray_version`` < ``minimum``; the parse error text when it is not a version."""
    try:
        return parse_generic_version(ray_version) < minimum
    except ValueError as exc:
        return str(exc)


def validate_auth(spec: RayClusterSpec) -> list[str]:
    options = spec.auth_options
    if options is not None and options.mode not in (None, "", "disabled", "token"):
        return [f'spec.authOptions.mode: Unsupported value: "{options.mode}": supported values: "disabled", "token"']
    if not is_auth_enabled(spec):
        if is_k8s_auth_enabled(options):
            return ["authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'"]
        return []
    version = spec.ray_version or ""
    if not version:
        return ["authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required"]
    below = ray_version_below(version, (2, 52, 0))
    if isinstance(below, str):
        return [f"authOptions.mode is 'token' but RayVersion format is invalid: {version}, {below}"]
    if below:
        return [f"authOptions.mode is 'token' but minimum Ray version is 2.52.0, got {version}"]
    if is_k8s_auth_enabled(options):
        if ray_version_below(version, (2, 55, 0)) is True:
            return [f"authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got {version}"]
        if options is not None and options.secret_name:
            return ["authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set"]
    return []


def validate_network_policy(spec: RayClusterSpec, *, gates: FeatureGates) -> list[str]:
    policy = spec.network_policy
    if policy is None:
        return []
    errs: list[str] = []
    if not gates.ray_cluster_network_policy:
        errs.append("spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled")
    # kubebuilder default is DenyAll when mode is unset.
    mode = policy.mode or NetworkPolicyMode.DENY_ALL.value
    if mode not in tuple(NetworkPolicyMode):
        errs.append(f'spec.networkPolicy.mode: Unsupported value: "{mode}": supported values: '
                    '"DenyAll", "DenyAllIngress", "DenyAllEgress"')
    for where, rules in (("head", policy.head), ("worker", policy.worker)):
        if rules is None:
            continue
        if mode == NetworkPolicyMode.DENY_ALL_EGRESS and rules.ingress_rules:
            errs.append(f'networkPolicy.{where}.ingressRules cannot be set when mode is "{mode}" '
                        "(ingress is not restricted)")
        if mode == NetworkPolicyMode.DENY_ALL_INGRESS and rules.egress_rules:
            errs.append(f'networkPolicy.{where}.egressRules cannot be set when mode is "{mode}" '
                        "(egress is not restricted)")
    # Group names are embedded in NetworkPolicy object names, so they must be DNS-1123 labels here.
    group_names: set[str] = set()
    for group in spec.worker_group_specs or []:
        if problems := is_dns1123_label(group.group_name):
            errs.append(f'worker group name "{group.group_name}" must be a valid DNS1123 label when networkPolicy '
                        f"is enabled (it is embedded in the NetworkPolicy name): {go_list(problems)}")
        group_names.add(group.group_name)
    for wg in policy.worker_groups or []:
        if mode == NetworkPolicyMode.DENY_ALL_EGRESS and wg.ingress_rules:
            errs.append(f'networkPolicy.workerGroups["{wg.group_name}"].ingressRules cannot be set when mode is '
                        f'"{mode}" (ingress is not restricted)')
        if mode == NetworkPolicyMode.DENY_ALL_INGRESS and wg.egress_rules:
            errs.append(f'networkPolicy.workerGroups["{wg.group_name}"].egressRules cannot be set when mode is '
                        f'"{mode}" (egress is not restricted)')
        if wg.group_name not in group_names:
            errs.append(f'networkPolicy.workerGroups["{wg.group_name}"] does not match any group name in '
                        "workerGroupSpecs")
    return errs


def _tls_env_conflicts(container: dict[str, Any] | None, location: str) -> list[str]:
    envs = env_vars(container)
    return [
        f"cannot set {name} environment variable in {location} when tlsOptions is set "
        "- the operator manages TLS configuration automatically"
        for name in RAY_TLS_ENV_VARS
        if env_var_exists(name, envs)
    ]


def validate_tls(spec: RayClusterSpec, *, gates: FeatureGates) -> list[str]:
    errs: list[str] = []
    if spec.tls_options is not None and not gates.ray_cluster_mtls:
        errs.append("spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled")
    if not is_tls_enabled(spec):
        return errs
    head = containers(spec.head_group_spec.template)
    if head:
        errs.extend(_tls_env_conflicts(head[0], "head Pod"))
    for group in spec.worker_group_specs or []:
        found = containers(group.template)
        if found:
            errs.extend(_tls_env_conflicts(found[0], f'worker group "{group.group_name}"'))
    if spec.autoscaler_options is not None:
        envs = [as_dict(e) for e in spec.autoscaler_options.env or []]
        errs.extend(
            f"cannot set {name} environment variable in autoscalerOptions.env when tlsOptions is set "
            "- the operator manages TLS configuration for the autoscaler automatically"
            for name in RAY_TLS_ENV_VARS
            if env_var_exists(name, envs)
        )
    return errs


def validate_history_server(spec: RayClusterSpec, *, gates: FeatureGates) -> list[str]:
    options = spec.history_server_options
    if options is None:
        return []
    if not gates.ray_cluster_history_server:
        return ["RayClusterHistoryServer feature gate is not enabled"]
    if options.collector_options is None:
        return ["historyServerOptions.collectorOptions must be set"]
    if not options.collector_options.image:
        return ["historyServerOptions.collectorOptions.image must be set"]
    return []


def validate_autoscaler_options(spec: RayClusterSpec) -> list[str]:
    options = spec.autoscaler_options
    if options is None:
        return []
    errs: list[str] = []
    if options.idle_timeout_seconds is not None and options.idle_timeout_seconds < 0:
        errs.append(f"autoscalerOptions.idleTimeoutSeconds must be non-negative, got {options.idle_timeout_seconds}")
    if env_var_exists(KUBERAY_GEN_AUTOSCALER_START_CMD, [as_dict(e) for e in options.env or []]):
        errs.append(f"autoscalerOptions.env must not contain {KUBERAY_GEN_AUTOSCALER_START_CMD}: it is managed by "
                    "KubeRay and injected automatically into the autoscaler container")
    if options.upscaling_mode is not None and options.upscaling_mode not in ("Default", "Aggressive", "Conservative"):
        errs.append(f'spec.autoscalerOptions.upscalingMode: Unsupported value: "{options.upscaling_mode}": '
                    'supported values: "Default", "Aggressive", "Conservative"')
    if options.version is not None and options.version not in ("v1", "v2"):
        errs.append(f'spec.autoscalerOptions.version: Unsupported value: "{options.version}": '
                    'supported values: "v1", "v2"')
    return errs
