"""RayCluster validation mirroring KubeRay v1.7 ``utils/validation.go``.

``ValidateRayClusterSpec`` in Go returns the *first* error; we return every independent problem
so a user can fix them in one go, but keep KubeRay's wording (and its ordering) for each one.
Checks that need the head Ray container are skipped when the head has no container (Go returns
"headGroupSpec should have at least one container" before reaching them).
"""

from __future__ import annotations

from raybus.api.defaults import spec_with_defaults
from raybus.api.k8s_names import go_list, is_dns1035_label, is_qualified_name, is_valid_label_value
from raybus.api.meta import ObjectMeta
from raybus.api.predicates import (
    ALLOWED_MANAGED_BY,
    MAX_RAY_CLUSTER_NAME_LENGTH,
    RAY_ENABLE_AUTOSCALER_V2,
    RAY_EXTERNAL_STORAGE_NS_ANNOTATION,
    RAY_FT_ENABLED_ANNOTATION,
    RAY_ORIGINATED_FROM_CRD_LABEL,
    RAY_REDIS_ADDRESS,
    REDIS_PASSWORD,
    REDIS_USERNAME,
    containers,
    env_value,
    env_var_by_name,
    env_var_exists,
    env_vars,
    head_env_enables_autoscaler_v2,
    is_autoscaling_enabled,
    is_autoscaling_v2_enabled,
    is_gcs_fault_tolerance_enabled,
    ray_container,
    restart_policy,
)
from raybus.api.raycluster import RayCluster, RayClusterConditionType, RayClusterSpec, WorkerGroupSpec
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_features import (
    ray_version_below,
    validate_auth,
    validate_autoscaler_options,
    validate_gcs_backend,
    validate_history_server,
    validate_network_policy,
    validate_tls,
)

MANAGED_BY_MESSAGE = (
    "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"
)


# The API server's SimpleNameGenerator: generateName truncated to 58 chars + 5 random [a-z0-9].
_GENERATED_SUFFIX = "abcde"
_MAX_GENERATE_NAME_BASE = 58


def effective_name(metadata: ObjectMeta) -> str:
    """The name KubeRay will see: ``name``, or what the API server makes of ``generateName``
    (validated with a stand-in suffix so manifests using generateName can be checked before create)."""
    if metadata.name:
        return metadata.name
    if metadata.generate_name:
        return metadata.generate_name[:_MAX_GENERATE_NAME_BASE] + _GENERATED_SUFFIX
    return ""


def validate_name(name: str, *, kind: str, max_length: int, prefix: str = "") -> list[str]:
    """ValidateRay{Cluster,Job,Service}Metadata: length limit first, then DNS-1035."""
    if len(name) > max_length:
        return [f"{prefix}{kind} name should be no more than {max_length} characters"]
    if problems := is_dns1035_label(name):
        return [f"{prefix}{kind} name should be a valid DNS1035 label: {go_list(problems)}"]
    return []


def validate_raycluster_metadata(metadata: ObjectMeta) -> list[str]:
    return validate_name(effective_name(metadata), kind="RayCluster", max_length=MAX_RAY_CLUSTER_NAME_LENGTH)


def validate_managed_by(managed_by: str | None) -> list[str]:
    # CRD CEL rule; enforced here too because not every API server we talk to evaluates CEL.
    if managed_by is not None and managed_by not in ALLOWED_MANAGED_BY:
        return [MANAGED_BY_MESSAGE]
    return []


def _group_resources(group: str, params: dict[str, str] | None, resources: dict[str, str] | None) -> list[str]:
    params = params or {}
    if any(params.get(k) for k in ("num-cpus", "num-gpus", "memory", "resources")) and resources:
        return [(f"resource fields should not be set in both rayStartParams and Resources for {group} group; "
                "please use only one")]
    return []


def _group_labels(group: str, params: dict[str, str] | None, labels: dict[str, str] | None) -> list[str]:
    if "labels" in (params or {}):
        return [(f"rayStartParams['labels'] is not supported for {group} group; please use the top-level "
                "Labels field instead")]
    errs: list[str] = []
    for key, val in (labels or {}).items():
        errs.extend(f"invalid label key for {group} group: '{key}', error: {e}" for e in is_qualified_name(key))
        errs.extend(
            f"invalid label value for key '{key}' in {group} group: '{val}', error: {e}"
            for e in is_valid_label_value(val)
        )
    return ["; ".join(errs)] if errs else []


def _v2_via_field_or_env(spec: RayClusterSpec) -> bool:
    return is_autoscaling_v2_enabled(spec) or head_env_enables_autoscaler_v2(spec)


def _worker_group(group: WorkerGroupSpec, spec: RayClusterSpec, *, has_head: bool) -> list[str]:
    name = group.group_name
    errs: list[str] = []
    if not containers(group.template):
        errs.append("workerGroupSpec should have at least one container")
    # With autoscaling the autoscaler owns the bounds, so KubeRay lets them be omitted.
    if not is_autoscaling_enabled(spec) and (group.min_replicas is None or group.max_replicas is None):
        errs.append(f"worker group {name} must set both minReplicas and maxReplicas when autoscaling is disabled")
    if group.min_replicas is not None and group.min_replicas < 0:
        errs.append(f"worker group {name} has negative minReplicas {group.min_replicas}")
    if group.max_replicas is not None and group.max_replicas < 0:
        errs.append(f"worker group {name} has negative maxReplicas {group.max_replicas}")
    if group.min_replicas is not None and group.max_replicas is not None and group.min_replicas > group.max_replicas:
        errs.append(f"worker group {name} has minReplicas {group.min_replicas} greater than maxReplicas "
                    f"{group.max_replicas}")
    # raybus addition: KubeRay computes replicas*numOfHosts pods, so numOfHosts 0 would silently create no
    # workers and a negative one is nonsense. (replicas outside [min,max] is *not* an error: KubeRay clamps.)
    if group.num_of_hosts is not None and group.num_of_hosts < 1:
        errs.append(f"worker group {name} has numOfHosts {group.num_of_hosts}; numOfHosts must be at least 1 "
                    "(omit it for the default of 1)")
    errs += _group_resources(name, group.ray_start_params, group.resources)
    errs += _group_labels(name, group.ray_start_params, group.labels)
    if group.idle_timeout_seconds is not None:
        if group.idle_timeout_seconds < 0:
            errs.append(f"worker group {name}: idleTimeoutSeconds must be non-negative, got "
                        f"{group.idle_timeout_seconds}")
        elif has_head and not _v2_via_field_or_env(spec):
            errs.append(f"worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please "
                        "set .spec.autoscalerOptions.version to 'v2' (or set RAY_enable_autoscaler_v2 environment "
                        "variable to 'true' in the head pod if using KubeRay < 1.4.0)")
    if group.priority:
        errs += _worker_priority(group, spec, has_head=has_head)
    return errs


def _worker_priority(group: WorkerGroupSpec, spec: RayClusterSpec, *, has_head: bool) -> list[str]:
    name = group.group_name
    if not spec.ray_version:
        return [(f"worker group {name}: priority is set, but RayVersion was not specified. Ray version 2.56.0 or "
                "later is required")]
    below = ray_version_below(spec.ray_version, (2, 56, 0))
    if isinstance(below, str):
        return [f"worker group {name}: priority is set, but RayVersion format is invalid: {spec.ray_version}, {below}"]
    if below:
        return [f"worker group {name}: priority is set, but minimum Ray version is 2.56.0, got {spec.ray_version}"]
    if has_head and not _v2_via_field_or_env(spec):
        return [(f"worker group {name}: priority is set to {group.priority}, but autoscaler v2 is not enabled. "
                "Priority is only supported with autoscaler v2 enabled")]
    return []


def _gcs_fault_tolerance(spec: RayClusterSpec, annotations: dict[str, str]) -> list[str]:
    head_envs = env_vars(ray_container(spec.head_group_spec.template))
    params = spec.head_group_spec.ray_start_params or {}
    errs: list[str] = []
    if annotations.get(RAY_FT_ENABLED_ANNOTATION, "") != "" and spec.gcs_fault_tolerance_options is not None:
        errs.append(f"{RAY_FT_ENABLED_ANNOTATION} annotation and GcsFaultToleranceOptions are both set. Please use "
                    "only GcsFaultToleranceOptions to configure GCS fault tolerance")
    if not is_gcs_fault_tolerance_enabled(spec, annotations) and env_var_exists(RAY_REDIS_ADDRESS, head_envs):
        errs.append(f"{RAY_REDIS_ADDRESS} is set which implicitly enables GCS fault tolerance, but "
                    "GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable GCS "
                    "fault tolerance")
    if spec.gcs_fault_tolerance_options is not None:
        if params.get("redis-password"):
            errs.append("cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled - "
                        "use GcsFaultToleranceOptions.RedisPassword instead")
        if env_var_exists(REDIS_PASSWORD, head_envs):
            errs.append("cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled - "
                        "use GcsFaultToleranceOptions.RedisPassword instead")
        if env_var_exists(RAY_REDIS_ADDRESS, head_envs):
            errs.append("cannot set `RAY_REDIS_ADDRESS` env var in head Pod when GcsFaultToleranceOptions is "
                        "enabled - use GcsFaultToleranceOptions.RedisAddress instead")
        if annotations.get(RAY_EXTERNAL_STORAGE_NS_ANNOTATION):
            errs.append("cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is "
                        "enabled - use GcsFaultToleranceOptions.ExternalStorageNamespace instead")
    if params.get("redis-username") or env_var_exists(REDIS_USERNAME, head_envs):
        errs.append("cannot set redis username in rayStartParams or environment variables - use "
                    "GcsFaultToleranceOptions.RedisUsername instead")
    return errs


def _autoscaling(spec: RayClusterSpec, *, gates: FeatureGates) -> list[str]:
    errs: list[str] = []
    groups = spec.worker_group_specs or []
    head_envs = env_vars(ray_container(spec.head_group_spec.template))
    if not gates.ray_job_deletion_policy:
        errs += [f"worker group {g.group_name} can be suspended only when the RayJobDeletionPolicy feature gate is "
                 "enabled" for g in groups if g.suspend]
    if not is_autoscaling_enabled(spec):
        env = env_var_by_name(RAY_ENABLE_AUTOSCALER_V2, head_envs)
        if env is not None and env_value(env) in ("1", "true"):
            errs.append(f"environment variable {RAY_ENABLE_AUTOSCALER_V2} cannot be set to '{env_value(env)}' when "
                        "enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use "
                        "autoscaler v2")
        return errs
    errs += [f"worker group {g.group_name} cannot be suspended with Autoscaler enabled" for g in groups if g.suspend]
    options = spec.autoscaler_options
    if options is not None and options.version is not None and env_var_exists(RAY_ENABLE_AUTOSCALER_V2, head_envs):
        errs.append(f"both .spec.autoscalerOptions.version and head Pod env var {RAY_ENABLE_AUTOSCALER_V2} are set, "
                    "please only use the former")
    if is_autoscaling_v2_enabled(spec):
        # The v2 autoscaler replaces failed Pods itself; a kubelet restart would double-count them.
        if restart_policy(spec.head_group_spec.template) not in ("", "Never"):
            errs.append("restartPolicy for head Pod should be Never or unset when using autoscaler V2")
        errs += [f"restartPolicy for worker group {g.group_name} should be Never or unset when using autoscaler V2"
                 for g in groups if restart_policy(g.template) not in ("", "Never")]
    return errs


def validate_raycluster_spec(
    spec: RayClusterSpec,
    annotations: dict[str, str] | None = None,
    *,
    gates: FeatureGates = DEFAULT_FEATURE_GATES,
    apply_crd_defaults: bool = True,
) -> list[str]:
    """ValidateRayClusterSpec. Also used for RayJob.spec.rayClusterSpec / RayService.spec.rayClusterConfig.

    KubeRay only ever sees objects after the API server applied the CRD defaults (minReplicas 0,
    maxReplicas MaxInt32, ...), so by default we validate the defaulted spec too; pass
    ``apply_crd_defaults=False`` to check a spec exactly as written.
    """
    if apply_crd_defaults:
        spec = spec_with_defaults(spec)
    annotations = annotations or {}
    head = spec.head_group_spec
    has_head = bool(containers(head.template))
    errs: list[str] = [] if has_head else ["headGroupSpec should have at least one container"]
    errs += _group_resources("Head", head.ray_start_params, head.resources)
    errs += _group_labels("Head", head.ray_start_params, head.labels)
    for group in spec.worker_group_specs or []:
        errs += _worker_group(group, spec, has_head=has_head)
    if has_head:
        errs += _gcs_fault_tolerance(spec, annotations)
        errs += _autoscaling(spec, gates=gates)
    errs += validate_gcs_backend(spec, gates=gates)
    errs += validate_autoscaler_options(spec)
    errs += validate_history_server(spec, gates=gates)
    errs += validate_auth(spec)
    errs += validate_network_policy(spec, gates=gates)
    errs += validate_tls(spec, gates=gates)
    return errs


def validate_raycluster_upgrade_options(cluster: RayCluster) -> list[str]:
    strategy = cluster.spec.upgrade_strategy
    if strategy is None or strategy.type is None:
        return []
    if strategy.type not in ("Recreate", "None"):
        return [(f"The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value {strategy.type} is invalid, "
                "valid options are Recreate or None")]
    creator = (cluster.metadata.labels or {}).get(RAY_ORIGINATED_FROM_CRD_LABEL, "")
    if creator in ("RayJob", "RayService"):
        return [f"upgradeStrategy cannot be set when RayCluster is created by {creator}"]
    return []


def validate_raycluster_status(cluster: RayCluster) -> list[str]:
    true_types = {c.type for c in (cluster.status.conditions or []) if c.status == "True"} if cluster.status else set()
    if {RayClusterConditionType.SUSPENDING, RayClusterConditionType.SUSPENDED} <= true_types:
        return [("invalid RayCluster State: rayv1.RayClusterSuspending and rayv1.RayClusterSuspended conditions "
                "should not be both true")]
    return []


def validate_worker_group_names(spec: RayClusterSpec) -> list[str]:
    """The (optional) KubeRay validating webhook's check; duplicates break pod naming and scaling."""
    seen: set[str] = set()
    errs: list[str] = []
    for i, group in enumerate(spec.worker_group_specs or []):
        if group.group_name in seen:
            errs.append(f'spec.workerGroupSpecs[{i}]: Invalid value: "{group.group_name}": worker group names '
                        "must be unique")
        seen.add(group.group_name)
    return errs


def validate_raycluster(cluster: RayCluster, *, settings: FeatureGates = DEFAULT_FEATURE_GATES) -> list[str]:
    """Everything KubeRay checks before reconciling a RayCluster; empty list = valid."""
    return (
        validate_raycluster_metadata(cluster.metadata)
        + validate_managed_by(cluster.spec.managed_by)
        + validate_worker_group_names(cluster.spec)
        + validate_raycluster_spec(cluster.spec, cluster.metadata.annotations, gates=settings)
        + validate_raycluster_upgrade_options(cluster)
        + validate_raycluster_status(cluster)
    )
