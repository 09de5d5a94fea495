"""RayService validation mirroring KubeRay v1.7 ValidateRayServiceMetadata / ValidateRayServiceSpec /
ValidateClusterUpgradeOptions (``utils/validation.go``)."""

from __future__ import annotations

import re

import yaml

from raybus.api.k8s_names import parse_go_duration_seconds
from raybus.api.meta import ObjectMeta
from raybus.api.predicates import (
    MAX_RAY_SERVICE_NAME_LENGTH,
    RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION,
    as_dict,
    is_autoscaling_enabled,
    is_incremental_upgrade_enabled,
    is_k8s_auth_enabled,
)
from raybus.api.rayservice import RayService, RayServiceSpec, RayServiceUpgradeType
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_cluster import (
    effective_name,
    validate_managed_by,
    validate_name,
    validate_raycluster_spec,
)

INVALID = "The RayService spec is invalid: "
_META_INVALID = "The RayService metadata is invalid: "
_ATOI = re.compile(r"[+-]?[0-9]+")


def validate_initializing_timeout(annotations: dict[str, str] | None) -> list[str]:
    """``ray.io/initializing-timeout``: a Go duration ("5m") or integer seconds, and positive."""
    value = (annotations or {}).get(RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION, "")
    if not value:
        return []
    key = RAY_SERVICE_INITIALIZING_TIMEOUT_ANNOTATION
    try:
        seconds = parse_go_duration_seconds(value)
    except ValueError:
        pass
    else:
        return [] if seconds > 0 else [f"annotation {key} must be a positive duration, got: {value}"]
    # Go tries time.ParseDuration first, then strconv.Atoi.
    if _ATOI.fullmatch(value):
        return [] if int(value) > 0 else [f"annotation {key} must be a positive integer (seconds), got: {value}"]
    return [(f"annotation {key} has invalid format: {value}. Expected Go duration format (e.g., '5m', '1h') or "
            "positive integer seconds")]


def validate_rayservice_metadata(metadata: ObjectMeta) -> list[str]:
    errs = validate_name(
        effective_name(metadata), kind="RayService", max_length=MAX_RAY_SERVICE_NAME_LENGTH, prefix=_META_INVALID
    )
    return errs + [
        _META_INVALID + "RayService annotations is invalid: " + e
        for e in validate_initializing_timeout(metadata.annotations)
    ]


def validate_cluster_upgrade_options(spec: RayServiceSpec) -> list[str]:
    """Only called for NewClusterWithIncrementalUpgrade (Gateway API traffic shifting)."""
    if not is_autoscaling_enabled(spec.ray_cluster_config):
        return ["Ray Autoscaler is required for NewClusterWithIncrementalUpgrade"]
    options = spec.upgrade_strategy.cluster_upgrade_options if spec.upgrade_strategy else None
    if options is None:
        return ["ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade"]
    errs: list[str] = []
    # CRD default 100 applies when unset.
    max_surge = 100 if options.max_surge_percent is None else options.max_surge_percent
    step = options.step_size_percent
    if not 0 <= max_surge <= 100:
        errs.append("maxSurgePercent must be between 0 and 100")
    if step is None or not 0 <= step <= 100:
        errs.append("stepSizePercent must be between 0 and 100")
    elif step > max_surge:
        errs.append("stepSizePercent must be less than or equal to maxSurgePercent")
    if options.interval_seconds is None or options.interval_seconds <= 0:
        errs.append("intervalSeconds must be greater than 0")
    if not options.gateway_class_name:
        errs.append("gatewayClassName is required for NewClusterWithIncrementalUpgrade")
    return errs


def validate_serve_config_v2(serve_config_v2: str | None) -> list[str]:
    """raybus addition: KubeRay only finds a broken serveConfigV2 when it first submits it to the
    dashboard (and then retries forever); rejecting it up front names the field to fix."""
    if not serve_config_v2:
        return []
    try:
        parsed = yaml.safe_load(serve_config_v2)
    except Exception as exc:  # noqa: BLE001 - any decoder failure is the user's YAML
        return [INVALID + f"serveConfigV2 is not valid YAML: {exc}"]
    if parsed is not None and not isinstance(parsed, dict):
        return [INVALID + f"serveConfigV2 must be a YAML mapping (with an 'applications' list), got "
                f"{type(parsed).__name__}"]
    return []


def validate_rayservice_spec(
    service: RayService, *, gates: FeatureGates = DEFAULT_FEATURE_GATES
) -> list[str]:
    spec = service.spec
    cluster = spec.ray_cluster_config
    errs: list[str] = []
    if is_k8s_auth_enabled(cluster.auth_options):
        errs.append(INVALID + "K8s token auth mode is currently not supported for RayService")
    errs += [INVALID + e for e in validate_raycluster_spec(cluster, service.metadata.annotations, gates=gates)]
    head_service = cluster.head_group_spec.head_service
    if head_service is not None and as_dict(head_service.get("metadata")).get("name"):
        # The RayService owns head-service naming so it can switch it between active/pending clusters.
        errs.append(INVALID + "spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set")
    strategy = spec.upgrade_strategy
    if strategy is not None and strategy.type is not None and strategy.type not in tuple(RayServiceUpgradeType):
        errs.append(INVALID + f"Spec.UpgradeStrategy.Type value {strategy.type} is invalid, valid options are "
                    "NewClusterWithIncrementalUpgrade, NewCluster, or None")
    delay = spec.ray_cluster_deletion_delay_seconds
    if delay is not None and delay < 0:
        errs.append(INVALID + f"Spec.RayClusterDeletionDelaySeconds should be a non-negative integer, got {delay}")
    if is_incremental_upgrade_enabled(spec, gates):
        errs += [INVALID + e for e in validate_cluster_upgrade_options(spec)]
    return errs + validate_serve_config_v2(spec.serve_config_v2) + validate_managed_by(spec.managed_by)


def validate_rayservice(service: RayService, *, settings: FeatureGates = DEFAULT_FEATURE_GATES) -> list[str]:
    """Everything KubeRay checks before reconciling a RayService; empty list = valid."""
    return validate_rayservice_metadata(service.metadata) + validate_rayservice_spec(service, gates=settings)
