"""service-reconciler: KubeRay's RayService controller as a bus consumer.

Implemented so far: KubeRay's validation step (Ready=False ValidationFailed + Warning event).
The RayService lifecycle (active/pending clusters, serve config, promotion, services) is not yet
implemented: valid RayServices are logged and left untouched rather than half-handled.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pydantic import ValidationError

from raybus.api.rayservice import RayService
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.service.validation import rayservice_validation
from raybus.runtime.controller import ReconcileFn
from raybus.runtime.reconciler_app import ReconcilerApp, ReconcilerContext
from raybus.runtime.service import CommonSettings

log = logging.getLogger(__name__)


def make_reconcile(ctx: ReconcilerContext) -> ReconcileFn:
    async def reconcile(key: ObjectKey) -> float | None:
        raw = ctx.cache.get(s.Kind.RAYSERVICE, key.namespace, key.name)
        if raw is None:
            return None
        try:
            service = RayService.model_validate(raw)
        except ValidationError as exc:
            log.warning("RayService does not parse", extra={"key": str(key), "errors": exc.error_count()})
            return None
        decision = rayservice_validation(service, now=datetime.now(UTC))
        if decision is None:
            log.info("RayService is valid; its lifecycle is not implemented yet", extra={"key": str(key)})
            return None
        for reason in decision.reasons:
            log.info(reason, extra={"key": str(key)})
        if decision.commands:
            await ctx.publish(key=key, kind=s.Kind.RAYSERVICE, commands=decision.commands,
                              reasons=decision.reasons, uid=service.metadata.uid,
                              resource_version=service.metadata.resource_version)
        return None  # KubeRay does not requeue after a validation failure

    return reconcile


def create_app(settings: CommonSettings) -> ReconcilerApp:
    return ReconcilerApp(settings, controller=s.Controller.SERVICE, primary_kind=s.Kind.RAYSERVICE,
                         kinds=[s.Kind.RAYSERVICE, s.Kind.RAYCLUSTER], make_reconcile=make_reconcile)
