"""The operator settings of all three controllers in one frozen model: what the reconcilers decide
with and what the command-executor's and dashboard-poller's admission re-run the same builders
with (raybus.runtime.decision_settings loads it from flags and the environment, one way for all)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.job.settings import JobSettings
from raybus.decisions.rayservice.model import ServiceSettings


class DecisionSettings(BaseModel):
    """Operator knobs of all three controllers, built from one OperatorSettings."""

    model_config = ConfigDict(frozen=True)
    operator: OperatorSettings = Field(default_factory=OperatorSettings)
    job: JobSettings = Field(default_factory=JobSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, feature_gates: str = "",
                 batch_scheduler: str = "") -> DecisionSettings:
        """Raises ValueError on an unknown gate or batch scheduler, as KubeRay refuses to start."""
        operator = OperatorSettings.from_env(env, feature_gates=feature_gates, batch_scheduler=batch_scheduler)
        return cls.of(operator, job=JobSettings.from_env(env, feature_gates=feature_gates),
                      service=ServiceSettings.from_env(env, feature_gates=feature_gates))

    @classmethod
    def of(cls, operator: OperatorSettings, *, job: JobSettings | None = None,
           service: ServiceSettings | None = None) -> DecisionSettings:
        """One OperatorSettings shared by every controller's settings."""
        job = (job or JobSettings()).model_copy(update={"operator": operator})
        service = (service or ServiceSettings()).model_copy(update={"operator": operator})
        return cls(operator=operator, job=job, service=service)
