"""RayJob controller settings: the env knobs KubeRay's RayJob controller reads, passed in frozen.

KubeRay reads them with ``os.Getenv`` inside the reconcile; decision code is pure, so the service
reads its environment once (``JobSettings.from_env(env, feature_gates=...)``, runtime.settings.KubeRayEnv). The cluster
builder knobs (CLUSTER_DOMAIN, ENABLE_LOGIN_SHELL, feature gates) live in the shared
:class:`OperatorSettings`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.job import constants as c

_GO_ATOI = re.compile(r"^[+-]?[0-9]+$")


def _atoi(value: str | None, default: int) -> int:
    """strconv.Atoi with KubeRay's fallback to the default on any parse error."""
    return int(value) if value is not None and _GO_ATOI.match(value) else default


class JobSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    operator: OperatorSettings = Field(default_factory=OperatorSettings)
    transition_grace_period_seconds: int = Field(
        default=c.DEFAULT_TRANSITION_GRACE_PERIOD_SECONDS,
        description="RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS: jobStatus terminal but the "
        "submitter not finished -> Complete/Failed after this long",
    )
    status_check_timeout_seconds: int = Field(
        default=c.DEFAULT_STATUS_CHECK_TIMEOUT_SECONDS,
        description="RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS: the dashboard unreadable this long -> Failed "
        "(JobStatusCheckTimeoutExceeded)",
    )
    submitter_finished_timeout_seconds: int = Field(
        default=c.DEFAULT_SUBMITTER_FINISHED_TIMEOUT_SECONDS,
        description="DefaultSubmitterFinishedTimeout (a constant in KubeRay): the submitter finished but "
        "the Ray job is not terminal this long -> Failed",
    )
    delete_rayjob_cr_after_job_finishes: bool = Field(
        default=False,
        description="DELETE_RAYJOB_CR_AFTER_JOB_FINISHES: shutdownAfterJobFinishes deletes the RayJob "
        "itself instead of its RayCluster",
    )

    @property
    def deletion_policy_gate(self) -> bool:
        """features.Enabled(features.RayJobDeletionPolicy)."""
        return self.operator.feature_gates.ray_job_deletion_policy

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, feature_gates: str = "", **overrides: Any) -> JobSettings:
        values: dict[str, Any] = {
            "operator": OperatorSettings.from_env(env, feature_gates=feature_gates),
            "transition_grace_period_seconds": _atoi(
                env.get("RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS"),
                c.DEFAULT_TRANSITION_GRACE_PERIOD_SECONDS,
            ),
            "status_check_timeout_seconds": _atoi(
                env.get("RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS"), c.DEFAULT_STATUS_CHECK_TIMEOUT_SECONDS
            ),
            "delete_rayjob_cr_after_job_finishes": (
                env.get("DELETE_RAYJOB_CR_AFTER_JOB_FINISHES") or ""
            ).lower() == "true",
        }
        values.update(overrides)
        return cls(**values)
