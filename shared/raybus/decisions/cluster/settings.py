"""Operator settings: every env knob, operator-config option and feature gate decision code reads.

KubeRay reads these with ``os.Getenv`` / ``features.Enabled`` deep inside its builders; decision
code here is pure, so the service process reads its environment once
(``OperatorSettings.from_env(env, feature_gates=...)``, runtime.settings.KubeRayEnv) and passes the frozen result in.
Defaults are KubeRay v1.7's. One flat model on purpose: other decision modules add their knobs here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.decisions.ray_events import ExportSettings

KUBERAY_VERSION = "v1.7.0"
# --batch-scheduler values raybus implements (KubeRay also has kai-scheduler, koordinator, WAS).
SUPPORTED_BATCH_SCHEDULERS = ("", "volcano", "yunikorn", "scheduler-plugins")


def _true(value: str | None) -> bool:
    """KubeRay's ``strings.ToLower(os.Getenv(X)) == "true"`` (default false)."""
    return (value or "").lower() == "true"


def _not_false(value: str | None) -> bool:
    """KubeRay's ``strings.ToLower(os.Getenv(X)) == "false"`` disables (default true)."""
    return (value or "").lower() != "false"


def _string_map(name: str, raw: str) -> dict[str, str]:
    """A JSON object of strings (KubeRay reads these maps from its config file); anything else is a
    startup error, as a malformed KubeRay config is."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{name} is not JSON: {exc}") from exc
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{name} must be a JSON object of strings")
    return value


class OperatorSettings(BaseModel):
    """Frozen operator configuration (env knobs + ``apis/config/v1alpha1`` options + feature gates)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- env knobs (utils/constant.go, common/pod.go, common/service.go) ---
    enable_probes_injection: bool = Field(
        default=True, description="ENABLE_PROBES_INJECTION (getEnableProbesInjection): only 'false' disables"
    )
    enable_init_container_injection: bool = Field(
        default=True,
        description="ENABLE_INIT_CONTAINER_INJECTION (getEnableInitContainerInjection): wait-gcs-ready "
        "init container in worker Pods; only 'false' disables",
    )
    enable_ray_head_cluster_ip_service: bool = Field(
        default=False,
        description="ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE: normal ClusterIP head Service instead of headless",
    )
    enable_login_shell: bool = Field(
        default=False,
        description="ENABLE_LOGIN_SHELL (utils.GetContainerCommand): /bin/bash -cl instead of -c",
    )
    enable_random_pod_delete: bool = Field(
        default=False, description="ENABLE_RANDOM_POD_DELETE: scale-down picks random Pods (autoscaling only)"
    )
    enable_deterministic_head_pod_name: bool = Field(
        default=False,
        description="ENABLE_DETERMINISTIC_HEAD_POD_NAME: head Pod named '<cluster>-head' (no random suffix)",
    )
    enable_gcs_ft_redis_cleanup: bool = Field(
        default=True,
        description="ENABLE_GCS_FT_REDIS_CLEANUP: Redis cleanup Job + finalizer; 'false' disables",
    )
    use_ingress_on_openshift: bool = Field(
        default=False, description="USE_INGRESS_ON_OPENSHIFT: Ingress instead of Route on OpenShift"
    )
    cluster_domain: str = Field(
        default="cluster.local", description="CLUSTER_DOMAIN (utils.GetClusterDomainName) used in FQ_RAY_IP"
    )
    raycluster_default_requeue_seconds: int = Field(
        default=300, description="RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV: steady-state requeue period"
    )
    kuberay_version: str = Field(
        default=KUBERAY_VERSION,
        description="utils.KUBERAY_VERSION: RAY_USAGE_STATS_EXTRA_TAGS and the ray.io/kuberay-version annotation",
    )
    expectations_timeout_seconds: float = Field(
        default=30.0,
        description="expectations.ExpectationsTimeout: a create expectation counts as met after this long",
    )

    # --- operator config file options (apis/config/v1alpha1.Configuration) ---
    default_container_envs: tuple[dict[str, Any], ...] = Field(
        default=(),
        description="defaultContainerEnvs: env vars added to every Ray container unless already set",
    )
    head_sidecar_containers: tuple[dict[str, Any], ...] = Field(
        default=(), description="headSidecarContainers: appended to every head Pod after the autoscaler"
    )
    worker_sidecar_containers: tuple[dict[str, Any], ...] = Field(
        default=(), description="workerSidecarContainers: appended to every worker Pod"
    )
    default_pod_annotations: dict[str, str] = Field(
        default_factory=dict,
        description="defaultPodAnnotations (v1.7): added to every Ray Pod unless its template sets the key "
        "(RAYBUS_DEFAULT_POD_ANNOTATIONS, a JSON object)",
    )
    default_pod_labels: dict[str, str] = Field(
        default_factory=dict,
        description="defaultPodLabels (v1.7): added to every Ray Pod unless its template sets the key "
        "(RAYBUS_DEFAULT_POD_LABELS, a JSON object)",
    )
    default_autoscaler_image: str | None = Field(
        default=None,
        description="Autoscaler sidecar image when autoscalerOptions.image is unset; None = the Ray head "
        "container's image (KubeRay's only behaviour; a raybus extension otherwise)",
    )

    batch_scheduler: str = Field(
        default="",
        description="--batch-scheduler (apis/config/v1alpha1 batchScheduler): volcano, yunikorn or "
        "scheduler-plugins (decisions/cluster/batch_scheduler.py); empty = the default scheduler",
    )

    # --- feature gates (--feature-gates; raybus.api.settings.FeatureGates, KubeRay v1.7.0 defaults) ---
    feature_gates: FeatureGates = Field(
        default=DEFAULT_FEATURE_GATES,
        description="All KubeRay feature gates (RayMultiHostIndexing labels worker Pods, ...)",
    )

    # --- raybus's own (not KubeRay's): head Pods push job ends to the dashboard-poller ---
    ray_events: ExportSettings = Field(
        default=ExportSettings(),
        description="RAYBUS_RAY_EVENTS_URL (the poller's receiver as Pods reach it) + RAYBUS_RAY_EVENTS_KEY "
        "(+ RAYBUS_RAY_EVENTS_REPORT_INTERVAL_MS): both set -> head Pods export Ray's events there "
        "(decisions/ray_events.py); either empty -> off, Pods exactly as KubeRay builds them",
    )

    @field_validator("batch_scheduler")
    @classmethod
    def _known_batch_scheduler(cls, value: str) -> str:
        """KubeRay refuses to start with an unknown --batch-scheduler ("the scheduler is not supported")."""
        if value not in SUPPORTED_BATCH_SCHEDULERS:
            raise ValueError(
                f"the scheduler is not supported, name={value} (raybus supports: "
                f"{', '.join(s for s in SUPPORTED_BATCH_SCHEDULERS if s)})"
            )
        return value

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, feature_gates: str = "", **overrides: Any
    ) -> OperatorSettings:
        """Settings from an environment mapping and a ``--feature-gates`` string ("A=true,B=false").

        Pure: the caller passes the environment in. Unknown gates raise ``ValueError`` as KubeRay's
        flag parsing does (FeatureGates.from_flag).
        """
        values: dict[str, Any] = {
            "enable_probes_injection": _not_false(env.get("ENABLE_PROBES_INJECTION")),
            "enable_init_container_injection": _not_false(env.get("ENABLE_INIT_CONTAINER_INJECTION")),
            "enable_ray_head_cluster_ip_service": _true(env.get("ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE")),
            "enable_login_shell": _true(env.get("ENABLE_LOGIN_SHELL")),
            "enable_random_pod_delete": _true(env.get("ENABLE_RANDOM_POD_DELETE")),
            "enable_deterministic_head_pod_name": _true(env.get("ENABLE_DETERMINISTIC_HEAD_POD_NAME")),
            "enable_gcs_ft_redis_cleanup": _not_false(env.get("ENABLE_GCS_FT_REDIS_CLEANUP")),
            "use_ingress_on_openshift": _true(env.get("USE_INGRESS_ON_OPENSHIFT")),
        }
        if env.get("CLUSTER_DOMAIN"):
            values["cluster_domain"] = env["CLUSTER_DOMAIN"]
        requeue = env.get("RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV", "")
        if requeue.isdigit() and int(requeue) > 0:
            values["raycluster_default_requeue_seconds"] = int(requeue)
        for field, name in (("default_pod_annotations", "RAYBUS_DEFAULT_POD_ANNOTATIONS"),
                            ("default_pod_labels", "RAYBUS_DEFAULT_POD_LABELS")):
            if env.get(name):
                values[field] = _string_map(name, env[name])
        interval = env.get("RAYBUS_RAY_EVENTS_REPORT_INTERVAL_MS", "")
        values["ray_events"] = ExportSettings(
            url=env.get("RAYBUS_RAY_EVENTS_URL", ""), key=env.get("RAYBUS_RAY_EVENTS_KEY", ""),
            **({"report_interval_ms": int(interval)} if interval.isdigit() and int(interval) > 0 else {}))
        values["feature_gates"] = FeatureGates.from_flag(feature_gates)
        values.update(overrides)
        return cls(**values)
