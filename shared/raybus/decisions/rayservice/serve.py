"""reconcileServe and the serve-config cache (rayservice_controller.go: reconcileServe,
getAndCheckServeStatus, checkIfNeedSubmitServeApplications, updateServeDeployment, cacheServeConfig,
cleanUpServeConfigCache).

KubeRay calls the dashboard inline; here the dashboard gateway observes (``ClusterObservation``) and
executes (``PutServeConfig``), and the cache (KubeRay's in-process LRU) lives in Redis.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import yaml

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.api.settings import FeatureGates
from raybus.decisions.commands import Command, ObjectRef, RecordEvent
from raybus.decisions.dashboard_contract import PutServeConfig, ServeAppObservation
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.model import DashboardOutcome, ServeConfigCacheEntry, TimedObservation

Json = dict[str, Any]
# A PutServeConfig whose reason starts with this is applyServeTargetCapacity's, not updateServeDeployment's.
TARGET_CAPACITY_REASON = "Applying new target_capacity"
# After a successful submit, "no Serve application found" only triggers a resubmit once the poller
# has seen the cluster after the submit, or after KubeRay's requeue period (it re-checked every 2 s).
RESUBMIT_GRACE = timedelta(seconds=c.SERVICE_DEFAULT_REQUEUE_SECONDS)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: same result, ~10x faster


def serve_config_hash(serve_config_v2: str) -> str:
    """Identity of a serveConfigV2 string (KubeRay compares the cached string itself)."""
    return hashlib.sha256(serve_config_v2.encode()).hexdigest()[:32]


def parse_serve_config(serve_config_v2: str) -> Json:
    """yaml.Unmarshal into map[string]interface{} then json.Marshal: a JSON-safe dict."""
    loaded = yaml.load(serve_config_v2, Loader=_LOADER) if serve_config_v2 else None
    out = json.loads(json.dumps(loaded if isinstance(loaded, dict) else {}, default=str))
    assert isinstance(out, dict)
    return out


def serve_applications(serve_apps: dict[str, ServeAppObservation]) -> tuple[bool, dict[str, Json]]:
    """getAndCheckServeStatus: (every app RUNNING and at least one, applicationStatuses)."""
    apps: dict[str, Json] = {}
    ready = True
    for name, app in serve_apps.items():
        entry: Json = {}
        if app.status:
            entry["status"] = app.status
        if app.message:
            entry["message"] = app.message
        deployments: dict[str, Json] = {}
        for dep_name, dep in app.deployments.items():
            deployments[dep_name] = {k: v for k, v in (("status", dep.status), ("message", dep.message)) if v}
        if deployments:
            entry["serveDeploymentStatuses"] = deployments
        if app.status != c.APP_RUNNING:
            ready = False
        apps[name or c.DEFAULT_SERVE_APP_NAME] = entry
    return ready and bool(apps), apps


def check_if_need_submit_serve_applications(cached_hash: str, spec_hash: str,
                                            apps: dict[str, Json]) -> tuple[bool, str]:
    """checkIfNeedSubmitServeApplications (hashes instead of the strings; "" = nothing cached)."""
    if not cached_hash:
        return True, "Nothing has been cached for the cluster."
    if not apps:
        return True, ("No Serve application found in the RayCluster. A possible reason is that the head "
                      "Pod crashed and GCS FT was not enabled.")
    if cached_hash != spec_hash:
        return True, "Current V2 Serve config doesn't match cached Serve config."
    return False, "Current V2 Serve config matches cached Serve config."


def is_head_pod_running_and_ready(pod: Json | None) -> bool:
    """utils.IsRunningAndReady."""
    if not pod:
        return False
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        cond.get("type") == "Ready" and cond.get("status") == "True" for cond in status.get("conditions") or [])


def is_head_ready(cluster: RayCluster, head_pod: Json | None, gates: FeatureGates) -> bool:
    """reconcileServe's first check: HeadPodReady (gate RayClusterStatusConditions) or the pod itself."""
    if gates.ray_cluster_status_conditions:
        conditions = cluster.status.conditions if cluster.status is not None else None
        return any(cond.type == "HeadPodReady" and cond.status == "True" for cond in conditions or [])
    return is_head_pod_running_and_ready(head_pod)


def service_ref(service: RayService) -> ObjectRef:
    return ObjectRef(api_version="ray.io/v1", kind="RayService", namespace=service.namespace,
                     name=service.name, uid=service.metadata.uid)


@dataclass
class DashboardResults:
    """What the previous round's dashboard commands mean for this round."""

    cache: dict[str, ServeConfigCacheEntry | None] = field(default_factory=dict)
    events: list[Command] = field(default_factory=list)
    error: str | None = None


def apply_dashboard_results(service: RayService, outcomes: list[DashboardOutcome], status: Json, *,
                            now: datetime) -> DashboardResults:
    """The tail of updateServeDeployment / applyServeTargetCapacity, one round later.

    ok: cache what the cluster was given (cacheServeConfig), record the Normal event, and for a
    target_capacity step set the cluster's status targetCapacity. failed/unknown: the Warning event
    and KubeRay's error (rate-limited retry); nothing is cached, so the next round resubmits."""
    out = DashboardResults()
    ref = service_ref(service)
    where = service.namespace
    for outcome in outcomes:
        cmd = outcome.command
        if not isinstance(cmd, PutServeConfig):
            continue
        if outcome.result.expired:
            # Revoked before any poller ran it: no dashboard answered, so neither an event nor
            # KubeRay's error; nothing was cached either, so this round decides it again.
            continue
        is_tc = cmd.reason.startswith(TARGET_CAPACITY_REASON)
        target = f"{where}/{cmd.cluster}"
        if outcome.result.state == "ok":
            tc = cmd.config.get("target_capacity")
            tc_int = int(tc) if isinstance(tc, (int, float)) and not isinstance(tc, bool) else None
            out.cache[cmd.cluster] = ServeConfigCacheEntry(
                config_hash=cmd.config_hash, target_capacity=tc_int, submitted_at=outcome.finished_at or now)
            if is_tc and tc_int is not None:
                for key in ("activeServiceStatus", "pendingServiceStatus"):
                    block = status.get(key) or {}
                    if block.get("rayClusterName") == cmd.cluster:
                        status[key] = {**block, "targetCapacity": tc_int}
            reason = c.UPDATED_SERVE_TARGET_CAPACITY if is_tc else c.UPDATED_SERVE_APPLICATIONS
            message = (f"Updated target_capacity of serve applications to to the RayCluster {target}" if is_tc
                       else f"Updated serve applications to the RayCluster {target}")
            out.events.append(RecordEvent(reason=message, target=ref, event_reason=reason, message=message))
            continue
        err = c.SERVE_UPDATE_ERROR.format(err=outcome.result.message or outcome.result.state)
        if is_tc:
            reason, message = (c.FAILED_TO_UPDATE_TARGET_CAPACITY,
                               f"Failed to update target_capacity of serve applications to the RayCluster {target}: {err}")
        else:
            reason, message = (c.FAILED_TO_UPDATE_SERVE_APPLICATIONS,
                               f"Failed to update serve applications to the RayCluster {target}: {err}")
        out.events.append(RecordEvent(reason=message, target=ref, type="Warning", event_reason=reason,
                                      message=message))
        out.error = out.error or err
    return out


def clean_up_serve_config_cache(cache: dict[str, ServeConfigCacheEntry], status: Json) -> dict[str, None]:
    """cleanUpServeConfigCache: forget every cluster that is neither active nor pending."""
    keep = {(status.get(k) or {}).get("rayClusterName") or "" for k in ("activeServiceStatus", "pendingServiceStatus")}
    return {name: None for name in cache if name not in keep}


@dataclass
class ServeResult:
    """reconcileServe's (isReady, serveApplications, err) plus what it asked the dashboard to do."""

    ready: bool = False
    apps: dict[str, Json] | None = None
    dashboard_commands: list[PutServeConfig] = field(default_factory=list)
    # The dashboard has not answered (never read, or unreachable): KubeRay's GetMultiApplicationStatus
    # error. The round ends before the status write; the next observation triggers a new round.
    dashboard_unavailable: bool = False
    requeue_at: datetime | None = None
    reasons: list[str] = field(default_factory=list)


def submit_command(service: RayService, cluster_name: str, status: Json, *, incremental: bool,
                   reason: str) -> PutServeConfig:
    """updateServeDeployment: serveConfigV2 as JSON; with the incremental upgrade, the cluster's
    status targetCapacity goes along so a new cluster does not jump to 100 %."""
    spec_cfg = service.spec.serve_config_v2 or ""
    config = parse_serve_config(spec_cfg)
    if incremental:
        for key in ("activeServiceStatus", "pendingServiceStatus"):
            block = status.get(key) or {}
            if block.get("rayClusterName") == cluster_name and block.get("targetCapacity") is not None:
                config["target_capacity"] = block["targetCapacity"]
                break
    return PutServeConfig(reason=reason, cluster=cluster_name, config=config,
                          config_hash=serve_config_hash(spec_cfg))


def reconcile_serve(service: RayService, cluster: RayCluster, head_pod: Json | None, *, status: Json,
                    observation: TimedObservation | None, cached: ServeConfigCacheEntry | None,
                    gates: FeatureGates, incremental: bool, skip_config_update: bool,
                    now: datetime) -> ServeResult:
    """reconcileServe for one cluster (the target_capacity part lives in incremental.py)."""
    out = ServeResult()
    if not is_head_ready(cluster, head_pod, gates):
        out.reasons.append(f"{cluster.name}: the head Pod is not ready; Serve is not reconciled yet")
        return out
    obs = observation.observation if observation is not None else None
    if obs is None or obs.serve_apps is None or not obs.reachable:
        out.dashboard_unavailable = True
        out.reasons.append(f"{cluster.name}: failed to get Serve application statuses from the dashboard "
                           "(not observed yet or unreachable)")
        return out
    out.ready, out.apps = serve_applications(obs.serve_apps)
    spec_hash = serve_config_hash(service.spec.serve_config_v2 or "")
    should, why = check_if_need_submit_serve_applications(cached.config_hash if cached else "", spec_hash, out.apps)
    if should and cached is not None and not out.apps and cached.config_hash == spec_hash \
            and cached.submitted_at is not None:
        # The "0 apps" case right after our own submit: the poller has not looked since.
        seen_after = observation is not None and observation.observed_at is not None \
            and observation.observed_at > cached.submitted_at
        if not seen_after and now < cached.submitted_at + RESUBMIT_GRACE:
            out.requeue_at = cached.submitted_at + RESUBMIT_GRACE
            out.reasons.append(f"{cluster.name}: submitted at {cached.submitted_at.isoformat()}, "
                               "waiting for the dashboard to list the applications")
            return out
    out.reasons.append(f"{cluster.name}: checkIfNeedSubmitServeApplications={should}: {why}")
    if should and skip_config_update:
        out.reasons.append(f"{cluster.name}: Serve config submission blocked for the active cluster "
                           "during NewClusterWithIncrementalUpgrade")
    elif should:
        out.dashboard_commands.append(submit_command(
            service, cluster.name, status, incremental=incremental,
            reason=f"Updating serve applications on the RayCluster {service.namespace}/{cluster.name}: {why}"))
    return out
