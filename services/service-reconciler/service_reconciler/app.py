"""service-reconciler: KubeRay's RayService controller as a bus consumer.

Implemented so far: KubeRay's validation step (Ready=False ValidationFailed + Warning event).
The RayService lifecycle (active/pending clusters, serve config, promotion, services) is not yet
implemented: valid RayServices are logged and left untouched rather than half-handled.
"""

from __future__ import annotations

from datetime import UTC, datetime

from raybus.api.rayservice import RayService
from raybus.bus import subjects as s
from raybus.decisions.job.validation import ValidationDecision
from raybus.decisions.service.validation import rayservice_validation
from raybus.runtime.reconciler_app import ReconcilerApp
from raybus.runtime.service import CommonSettings
from raybus.runtime.validating import validating_reconcile


def _decide(service: RayService) -> ValidationDecision | None:
    return rayservice_validation(service, now=datetime.now(UTC))


def create_app(settings: CommonSettings) -> ReconcilerApp:
    return ReconcilerApp(
        settings, controller=s.Controller.SERVICE, primary_kind=s.Kind.RAYSERVICE,
        kinds=[s.Kind.RAYSERVICE, s.Kind.RAYCLUSTER],
        make_reconcile=lambda ctx: validating_reconcile(ctx, kind=s.Kind.RAYSERVICE,
                                                        model=RayService, decide=_decide))
