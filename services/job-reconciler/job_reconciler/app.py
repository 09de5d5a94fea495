"""job-reconciler: KubeRay's RayJob controller as a bus consumer.

Implemented so far: KubeRay's validation step (ValidationFailed status + Warning event, terminal).
The RayJob lifecycle (cluster creation, submission modes, deadlines, deletion rules) is not yet
implemented: valid RayJobs are logged and left untouched rather than half-handled.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from raybus.api.rayjob import RayJob
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.job.validation import rayjob_validation
from raybus.runtime.controller import ReconcileFn
from raybus.runtime.reconciler_app import ReconcilerApp, ReconcilerContext
from raybus.runtime.service import CommonSettings

log = logging.getLogger(__name__)


def make_reconcile(ctx: ReconcilerContext) -> ReconcileFn:
    async def reconcile(key: ObjectKey) -> float | None:
        raw = ctx.cache.get(s.Kind.RAYJOB, key.namespace, key.name)
        if raw is None:
            return None
        try:
            job = RayJob.model_validate(raw)
        except ValidationError as exc:
            log.warning("RayJob does not parse", extra={"key": str(key), "errors": exc.error_count()})
            return None
        decision = rayjob_validation(job)
        if decision is None:
            log.info("RayJob is valid; its lifecycle is not implemented yet", extra={"key": str(key)})
            return None
        for reason in decision.reasons:
            log.info(reason, extra={"key": str(key)})
        if decision.commands:
            await ctx.publish(key=key, kind=s.Kind.RAYJOB, commands=decision.commands,
                              reasons=decision.reasons, uid=job.metadata.uid,
                              resource_version=job.metadata.resource_version)
        return None  # ValidationFailed is terminal: no requeue, as KubeRay

    return reconcile


def create_app(settings: CommonSettings) -> ReconcilerApp:
    return ReconcilerApp(settings, controller=s.Controller.JOB, primary_kind=s.Kind.RAYJOB,
                         kinds=[s.Kind.RAYJOB, s.Kind.RAYCLUSTER], make_reconcile=make_reconcile)
