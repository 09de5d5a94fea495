"""Operator settings that validation depends on, passed explicitly (never read from env here).

Defaults are KubeRay v1.7.0's feature-gate defaults (``ray-operator/pkg/features/features.go``).
The service layer builds one of these from its own configuration (e.g. the operator's
``--feature-gates`` flag string via :meth:`FeatureGates.from_flag`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# KubeRay gate name -> our attribute name.
_GATE_NAMES: dict[str, str] = {
    "RayClusterStatusConditions": "ray_cluster_status_conditions",
    "RayJobDeletionPolicy": "ray_job_deletion_policy",
    "RayMultiHostIndexing": "ray_multi_host_indexing",
    "RayServiceIncrementalUpgrade": "ray_service_incremental_upgrade",
    "RayCronJob": "ray_cron_job",
    "SidecarSubmitterRestart": "sidecar_submitter_restart",
    "RayClusterNetworkPolicy": "ray_cluster_network_policy",
    "GCSFaultToleranceEmbeddedStorage": "gcs_fault_tolerance_embedded_storage",
    "RayClusterMTLS": "ray_cluster_mtls",
    "RayClusterHistoryServer": "ray_cluster_history_server",
    "KubernetesWAS": "kubernetes_was",
}


class FeatureGates(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ray_cluster_status_conditions: bool = True
    ray_job_deletion_policy: bool = True
    ray_multi_host_indexing: bool = True
    ray_service_incremental_upgrade: bool = True
    ray_cron_job: bool = False
    sidecar_submitter_restart: bool = False
    ray_cluster_network_policy: bool = False
    gcs_fault_tolerance_embedded_storage: bool = False
    ray_cluster_mtls: bool = False
    ray_cluster_history_server: bool = False
    kubernetes_was: bool = False

    @classmethod
    def from_flag(cls, flag: str) -> FeatureGates:
        """Parse KubeRay's ``--feature-gates`` syntax: ``"RayCronJob=true,RayJobDeletionPolicy=false"``.

        Unknown gate names or non-boolean values raise ValueError, as the Go operator refuses to start.
        """
        values: dict[str, bool] = {}
        for item in filter(None, (part.strip() for part in flag.split(","))):
            name, sep, raw = item.partition("=")
            if not sep or name.strip() not in _GATE_NAMES:
                raise ValueError(f"unrecognized feature gate: {item!r}")
            lowered = raw.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(f"invalid value of {name.strip()}: {raw!r}, err: must be true or false")
            values[_GATE_NAMES[name.strip()]] = lowered == "true"
        return cls(**values)


DEFAULT_FEATURE_GATES = FeatureGates()
