"""What one RayService reconcile accumulates, and when its status is written (steps 13-14)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raybus.decisions.commands import Command
from raybus.decisions.dashboard_contract import DashboardCommand, DashboardInterest
from raybus.decisions.rayservice.model import ServeConfigCacheEntry, ServiceDecision
from raybus.decisions.rayservice.status import inconsistent_statuses, rfc3339

Json = dict[str, Any]


@dataclass
class Round:
    """What one reconcile accumulates (KubeRay's side effects, in order)."""

    commands: list[Command] = field(default_factory=list)
    dashboard: list[DashboardCommand] = field(default_factory=list)
    cache: dict[str, ServeConfigCacheEntry | None] = field(default_factory=dict)
    deadlines: dict[str, datetime | None] = field(default_factory=dict)
    wake: list[datetime] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def decision(self, *, now: datetime, status: Json | None = None, interest: list[DashboardInterest] | None = None,
                 error: str | None = None) -> ServiceDecision:
        requeue = max(0.0, (min(self.wake) - now).total_seconds()) if self.wake and error is None else None
        return ServiceDecision(commands=self.commands, dashboard_commands=self.dashboard, status=status,
                               interest=interest, serve_config_cache=self.cache, deletion_deadlines=self.deadlines,
                               requeue_after=requeue, error=error, reasons=self.reasons + ([error] if error else []))


def changed(original: Json, status: Json, now: datetime) -> Json | None:
    """Step 13: write only when InconsistentRayServiceStatuses says so (then lastUpdateTime=now)."""
    if not inconsistent_statuses(original, status):
        return None
    return {**status, "lastUpdateTime": rfc3339(now)}
