"""A reconcile that so far only runs KubeRay's validation step for one kind.

The RayJob and RayService controllers both start their reconcile with "parse, validate, and on
failure publish status + Warning event, terminal". Until their lifecycles are implemented that is
all their services do; valid objects are logged and left alone rather than half-handled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from raybus.api.meta import RayObject
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.job.validation import ValidationDecision
from raybus.runtime.controller import ReconcileFn
from raybus.runtime.reconciler_app import ReconcilerContext

log = logging.getLogger(__name__)
M = TypeVar("M", bound=RayObject)


def validating_reconcile(ctx: ReconcilerContext, *, kind: s.Kind, model: type[M],
                         decide: Callable[[M], ValidationDecision | None]) -> ReconcileFn:
    async def reconcile(key: ObjectKey) -> float | None:
        raw = ctx.cache.get(kind, key.namespace, key.name)
        if raw is None:
            return None
        try:
            obj = model.model_validate(raw)
        except ValidationError as exc:
            log.warning("object does not parse", extra={"key": str(key), "kind": kind.value,
                                                       "errors": exc.error_count()})
            return None
        decision = decide(obj)
        if decision is None:
            log.info("valid; its lifecycle is not implemented yet",
                     extra={"key": str(key), "kind": kind.value})
            return None
        for reason in decision.reasons:
            log.info(reason, extra={"key": str(key)})
        if decision.commands:
            await ctx.publish(key=key, kind=kind, commands=decision.commands,
                              reasons=decision.reasons, uid=obj.metadata.uid,
                              resource_version=obj.metadata.resource_version)
        return None  # KubeRay does not requeue after a validation failure

    return reconcile



