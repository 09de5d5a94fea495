"""RayJob validation mirroring KubeRay v1.7 ValidateRayJobMetadata / ValidateRayJobSpec /
ValidateRayJobStatus (``utils/validation.go``). KubeRay stops at the first error; we report all
independent ones, each in KubeRay's words."""

from __future__ import annotations

import yaml

from raybus.api.meta import ObjectMeta
from raybus.api.predicates import (
    MAX_RAY_JOB_NAME_LENGTH,
    RAY_JOB_CLUSTER_SELECTOR_KEY,
    is_autoscaling_enabled,
    is_k8s_auth_enabled,
    restart_policy,
)
from raybus.api.rayjob import (
    DeletionPolicyType,
    DeletionRule,
    JobDeploymentStatus,
    JobSubmissionMode,
    RayJob,
    RayJobSpec,
)
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation_cluster import (
    effective_name,
    validate_managed_by,
    validate_name,
    validate_raycluster_spec,
)

INVALID = "The RayJob spec is invalid: "
# KubeRay enforces TTL ordering along this sequence: workers go first, the RayJob itself last.
_DELETION_ORDER = (DeletionPolicyType.DELETE_WORKERS, DeletionPolicyType.DELETE_CLUSTER, DeletionPolicyType.DELETE_SELF)
_POLICIES = tuple(p.value for p in DeletionPolicyType)


def validate_rayjob_metadata(metadata: ObjectMeta) -> list[str]:
    return validate_name(
        effective_name(metadata), kind="RayJob", max_length=MAX_RAY_JOB_NAME_LENGTH, prefix="The RayJob metadata is invalid: "
    )


def validate_runtime_env_yaml(runtime_env_yaml: str | None) -> list[str]:
    """dashboardclient.UnmarshalRuntimeEnvYAML: must decode into a map (only syntax is checked)."""
    if not runtime_env_yaml:
        return []
    try:
        parsed = yaml.safe_load(runtime_env_yaml)
    except Exception as exc:  # noqa: BLE001 - any decoder failure is the user's YAML, never our bug
        return [f"failed to unmarshal RuntimeEnvYAML: {runtime_env_yaml}: {exc}"]
    if parsed is not None and not isinstance(parsed, dict):
        return [(f"failed to unmarshal RuntimeEnvYAML: {runtime_env_yaml}: cannot unmarshal "
                f"{type(parsed).__name__} into Go value of type map[string]interface {{}}")]
    return []


def _legacy_policies(spec: RayJobSpec) -> list[str]:
    strategy = spec.deletion_strategy
    assert strategy is not None
    if strategy.on_success is None or strategy.on_failure is None:
        return [("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy "
                "deletion policy fields of DeletionStrategy")]
    on_success, on_failure = strategy.on_success.policy, strategy.on_failure.policy
    if on_success is None:
        return [("the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy "
                "is enabled")]
    if on_failure is None:
        return [("the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset when DeletionStrategy "
                "is enabled")]
    errs = [f'spec.deletionStrategy.{where}.policy: Unsupported value: "{p}": supported values: '
            + ", ".join(f'"{v}"' for v in _POLICIES)
            for where, p in (("onSuccess", on_success), ("onFailure", on_failure)) if p not in _POLICIES]
    cluster_level = (DeletionPolicyType.DELETE_CLUSTER, DeletionPolicyType.DELETE_WORKERS)
    if spec.cluster_selector:
        if on_success in cluster_level:
            errs.append(f"the ClusterSelector mode doesn't support DeletionStrategy={on_success} on success")
        if on_failure in cluster_level:
            errs.append(f"the ClusterSelector mode doesn't support DeletionStrategy={on_failure} on failure")
    workers = DeletionPolicyType.DELETE_WORKERS
    if workers in (on_success, on_failure) and is_autoscaling_enabled(spec.ray_cluster_spec):
        errs.append("DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled")
    if spec.shutdown_after_job_finishes and DeletionPolicyType.DELETE_NONE in (on_success, on_failure):
        errs.append(INVALID + "shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'")
    return errs


def _rule_problem(i: int, rule: DeletionRule, spec: RayJobSpec) -> str | None:
    cond = rule.condition
    if cond.job_status is not None and cond.job_deployment_status is not None:
        return f"deletionRules[{i}]: cannot set both JobStatus and JobDeploymentStatus at the same time"
    if cond.job_status is None and cond.job_deployment_status is None:
        return f"deletionRules[{i}]: exactly one of JobStatus and JobDeploymentStatus must be set"
    if (cond.ttl_seconds or 0) < 0:
        return f"deletionRules[{i}]: TTLSeconds must be non-negative"
    # CRD enums (policy, jobStatus SUCCEEDED|FAILED, jobDeploymentStatus Failed), checked here as well.
    if rule.policy not in _POLICIES:
        return f'deletionRules[{i}]: Unsupported value: "{rule.policy}": supported values: ' + ", ".join(
            f'"{v}"' for v in _POLICIES)
    if cond.job_status is not None and cond.job_status not in ("SUCCEEDED", "FAILED"):
        return f'deletionRules[{i}]: condition.jobStatus: Unsupported value: "{cond.job_status}": supported values: ' \
            '"SUCCEEDED", "FAILED"'
    if cond.job_deployment_status is not None and cond.job_deployment_status != JobDeploymentStatus.FAILED:
        return (f'deletionRules[{i}]: condition.jobDeploymentStatus: Unsupported value: '
                f'"{cond.job_deployment_status}": supported values: "Failed"')
    if spec.cluster_selector and rule.policy in (DeletionPolicyType.DELETE_CLUSTER, DeletionPolicyType.DELETE_WORKERS):
        return f"deletionRules[{i}]: DeletionPolicyType '{rule.policy}' not supported when ClusterSelector is set"
    if is_autoscaling_enabled(spec.ray_cluster_spec) and rule.policy == DeletionPolicyType.DELETE_WORKERS:
        return f"deletionRules[{i}]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled"
    return None


def _deletion_rules(spec: RayJobSpec) -> list[str]:
    assert spec.deletion_strategy is not None
    errs: list[str] = []
    # (condition kind, condition value) -> policy -> ttl
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for i, rule in enumerate(spec.deletion_strategy.deletion_rules or []):
        if (problem := _rule_problem(i, rule, spec)) is not None:
            errs.append(problem)
            continue
        cond = rule.condition
        key = ("JobStatus", cond.job_status) if cond.job_status is not None else (
            "JobDeploymentStatus", cond.job_deployment_status or "")
        ttls = groups.setdefault(key, {})
        if rule.policy in ttls:
            errs.append(f"deletionRules[{i}]: duplicate rule for DeletionPolicyType '{rule.policy}' and {key[0]} "
                        f"'{key[1]}'")
            continue
        ttls[rule.policy] = cond.ttl_seconds or 0
    for (kind, value), ttls in groups.items():
        prev: tuple[str, int] | None = None
        for policy in _DELETION_ORDER:
            if policy not in ttls:
                continue
            if prev is not None and ttls[policy] < prev[1]:
                errs.append(f"for {kind} '{value}': {policy} TTL ({ttls[policy]}) must be >= {prev[0]} TTL ({prev[1]})")
            prev = (policy.value, ttls[policy])
    return errs


def _deletion_configuration(spec: RayJobSpec, *, gates: FeatureGates) -> list[str]:
    if not spec.shutdown_after_job_finishes and (spec.ttl_seconds_after_finished or 0) > 0:
        return [INVALID + "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"]
    strategy = spec.deletion_strategy
    if strategy is None:
        return []
    if not gates.ray_job_deletion_policy:
        return ["RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy"]
    legacy = strategy.on_success is not None or strategy.on_failure is not None
    rules = bool(strategy.deletion_rules)
    if rules and spec.shutdown_after_job_finishes:
        return [INVALID + "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"]
    if rules and legacy:
        return [INVALID + "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"]
    if legacy:
        return _legacy_policies(spec)
    if rules:
        return _deletion_rules(spec)
    return [INVALID + "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field "
            "(cannot be empty)"]


def _submission(spec: RayJobSpec) -> list[str]:
    errs: list[str] = []
    mode = spec.submission_mode or JobSubmissionMode.K8S_JOB.value
    backoff = spec.backoff_limit
    if mode not in tuple(JobSubmissionMode):
        # raybus addition: KubeRay's CRD has no enum here and the controller would never submit the job.
        errs.append(f'spec.submissionMode: Unsupported value: "{mode}": supported values: "K8sJobMode", '
                    '"HTTPMode", "InteractiveMode", "SidecarMode"')
    if spec.cluster_selector:
        if not spec.cluster_selector.get(RAY_JOB_CLUSTER_SELECTOR_KEY):
            errs.append("cluster name in ClusterSelector should not be empty")
        if mode == JobSubmissionMode.SIDECAR:
            errs.append("ClusterSelector is not supported in SidecarMode")
        if backoff is not None and backoff > 0:
            errs.append(INVALID + "BackoffLimit is incompatible with ClusterSelector mode")
    # Retries would reuse spec.jobId and mis-detect the job as Running (kuberay#3525).
    if mode == JobSubmissionMode.INTERACTIVE and backoff is not None and backoff > 0:
        errs.append(INVALID + "BackoffLimit is incompatible with InteractiveMode")
    if mode == JobSubmissionMode.SIDECAR:
        if spec.submitter_pod_template is not None:
            errs.append("Currently, SidecarMode doesn't support SubmitterPodTemplate")
        if spec.submitter_config is not None:
            errs.append("Currently, SidecarMode doesn't support SubmitterConfig")
        if spec.ray_cluster_spec is not None and restart_policy(
            spec.ray_cluster_spec.head_group_spec.template
        ) not in ("", "Never"):
            errs.append("restartPolicy for head Pod should be Never or unset when using SidecarMode")
    return errs


def validate_rayjob_spec(
    spec: RayJobSpec, annotations: dict[str, str] | None = None, *, gates: FeatureGates = DEFAULT_FEATURE_GATES
) -> list[str]:
    """ValidateRayJobSpec; also validates RayCronJob.spec.jobTemplate."""
    errs: list[str] = []
    # KubeRay's suspend limitations are a subset of Kueue's.
    if spec.suspend and not spec.shutdown_after_job_finishes:
        errs.append(INVALID + "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended")
    if (spec.ttl_seconds_after_finished or 0) < 0:
        errs.append(INVALID + "TTLSecondsAfterFinished must be a non-negative integer")
    errs += _deletion_configuration(spec, gates=gates)
    if spec.suspend and spec.cluster_selector:
        errs.append(INVALID + "the ClusterSelector mode doesn't support the suspend operation")
    if spec.ray_cluster_spec is None and not spec.cluster_selector:
        errs.append(INVALID + "one of RayClusterSpec or ClusterSelector must be set")
    errs += _submission(spec)
    if spec.ray_cluster_spec is not None:
        if is_k8s_auth_enabled(spec.ray_cluster_spec.auth_options):
            errs.append(INVALID + "K8s token auth mode is currently not supported for RayJob")
        errs += [INVALID + e for e in validate_raycluster_spec(spec.ray_cluster_spec, annotations, gates=gates)]
    errs += validate_runtime_env_yaml(spec.runtime_env_yaml)
    if spec.active_deadline_seconds is not None and spec.active_deadline_seconds <= 0:
        errs.append(INVALID + "activeDeadlineSeconds must be a positive integer")
    if spec.pre_running_deadline_seconds is not None and spec.pre_running_deadline_seconds <= 0:
        errs.append(INVALID + "preRunningDeadlineSeconds must be a positive integer")
    if spec.backoff_limit is not None and spec.backoff_limit < 0:
        errs.append(INVALID + "backoffLimit must be a positive integer")
    return errs + validate_managed_by(spec.managed_by)


def validate_rayjob_status(job: RayJob) -> list[str]:
    mode = job.spec.submission_mode or JobSubmissionMode.K8S_JOB.value
    status = job.status.job_deployment_status if job.status is not None else None
    if status == JobDeploymentStatus.WAITING and mode != JobSubmissionMode.INTERACTIVE:
        return [("The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not "
                "InteractiveMode")]
    return []


def validate_rayjob(job: RayJob, *, settings: FeatureGates = DEFAULT_FEATURE_GATES) -> list[str]:
    """Everything KubeRay's validateRayJob checks; non-empty means JobDeploymentStatus ValidationFailed."""
    return (
        validate_rayjob_metadata(job.metadata)
        + validate_rayjob_spec(job.spec, job.metadata.annotations, gates=settings)
        + validate_rayjob_status(job)
    )
