"""One RayService reconcile: snapshot -> `reconcile_rayservice` -> Redis state -> one published step.

Order (KubeRay's reconcile is synchronous; ours is one step at a time):
1. the RayService is gone -> stop observing for it, forget its Redis state (KubeRay: GC + the
   in-process caches' cleanup);
2. the StepRunner's barrier holds the decision until the previous step's writes are answered
   (read-your-writes), so the decision always starts from what the previous one wrote;
3. the snapshot: cache objects, the poller's observations, the previous step's dashboard commands
   paired with their results, and the previous step's failed Kubernetes commands (KubeRay's error
   of the reconcile that made the call: seen once);
4. the decision; its Redis updates (serve-config cache, deletion deadlines, in-flight dashboard
   commands) are persisted BEFORE the step is published;
5. publish, and look again once the writes are answered (KubeRay requeues every 2 s; a RayService's
   own status write does not wake it: the For() predicate).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from raybus.api.rayservice import RayService
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.commands import ObjectRef, RecordEvent
from raybus.decisions.rayservice.model import CommandFailure, ServiceSettings
from raybus.decisions.rayservice.reconcile import reconcile_rayservice
from raybus.runtime.controller import Result
from raybus.runtime.outcomes import real_failures
from raybus.runtime.reconciler_app import ReconcilerContext
from raybus.runtime.stepper import Step, StepRunner, dashboard_command_ids, new_batch_id
from service_reconciler.snapshot import build_snapshot
from service_reconciler.state import ServiceStateStore

log = logging.getLogger(__name__)
# After a step that wrote something, decide again as soon as its writes are answered: the barrier
# holds that reconcile (cheap cache reads, backing off to 1 s) until then.
FOLLOW_UP_S = 0.05


class ServiceReconciler:
    def __init__(self, ctx: ReconcilerContext, settings: ServiceSettings) -> None:
        self._ctx = ctx
        self._settings = settings
        self.runner = StepRunner(ctx, kind=s.Kind.RAYSERVICE, k8s_kind="RayService")
        self.state = ServiceStateStore(ctx.store)
        self._last_batch: dict[ObjectKey, str] = {}  # the previous step's command batch
        self._resumed: set[ObjectKey] = set()  # keys whose persisted in-flight commands were re-armed
        self._unparseable: dict[ObjectKey, str] = {}  # resourceVersion already reported

    async def reconcile(self, key: ObjectKey) -> Result:
        raw = self._ctx.cache.get(s.Kind.RAYSERVICE, key.namespace, key.name)
        if raw is None:
            await self.state.delete(key)
            self._last_batch.pop(key, None)
            self._resumed.discard(key)
            self._unparseable.pop(key, None)
            return await self.runner.gone(key)
        held = await self.runner.wait(key)
        if held is not None:
            return held
        state = await self.state.load(key)
        if key not in self._resumed:
            # First look since this replica started (or took the partition over): the dashboard
            # commands the previous owner published are answered before anyone decides again.
            self._resumed.add(key)
            if state.inflight and not self.runner.barrier.holds(key):
                self.runner.barrier.wrote(key, batch=None, status=None, dashboard=[x.id for x in state.inflight])
                held = await self.runner.wait(key)
                if held is not None:
                    return held
        try:
            service = RayService.model_validate(raw)
        except ValidationError as exc:
            return await self._invalid(key, raw, exc)
        snapshot = build_snapshot(self._ctx.cache, service, state=state, failures=self._failures(key))
        decision = reconcile_rayservice(snapshot, settings=self._settings, now=datetime.now(UTC))
        batch_id = new_batch_id()
        new_state = state.after(decision, command_ids=dashboard_command_ids(batch_id, len(decision.dashboard_commands)))
        # Before publishing: a deadline must exist before the step that relies on it, and the
        # in-flight commands must be known to whoever reads their results (even after a crash).
        await self.state.save(key, state, new_state)
        self._last_batch[key] = batch_id
        requeue = decision.requeue_after
        if decision.commands or decision.dashboard_commands or decision.status is not None:
            requeue = FOLLOW_UP_S if requeue is None else min(requeue, FOLLOW_UP_S)
        return await self.runner.publish(key, raw, Step(
            commands=decision.commands, dashboard_commands=decision.dashboard_commands, status=decision.status,
            interests=decision.interest, requeue_after=requeue, error=decision.error, reasons=decision.reasons,
            batch_id=batch_id))

    def _failures(self, key: ObjectKey) -> list[CommandFailure]:
        """The previous step's failed API calls, once (KubeRay's error of that reconcile)."""
        batch = self._last_batch.pop(key, None)
        outcome = self._ctx.outcomes.by_batch.get(batch) if batch is not None else None
        if outcome is None:
            return []
        return [CommandFailure(reason=r.error_reason or r.op, message=r.message,
                               target=r.target) for r in real_failures(outcome.results)]

    async def _invalid(self, key: ObjectKey, raw: dict[str, Any], exc: ValidationError) -> Result:
        # The API server accepted it (preserve-unknown-fields), our models did not: KubeRay's
        # InvalidRayServiceSpec Warning (once per version), never a crashed replica.
        meta = raw.get("metadata") or {}
        rv = str(meta.get("resourceVersion") or "")
        if self._unparseable.get(key) == rv:
            return Result()
        self._unparseable[key] = rv
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        message = f"{key.namespace}/{key.name}: {problems}"
        ref = ObjectRef(api_version="ray.io/v1", kind="RayService", namespace=key.namespace, name=key.name,
                        uid=meta.get("uid"))
        return await self.runner.publish(key, raw, Step(
            commands=[RecordEvent(reason=message, target=ref, type="Warning", event_reason="InvalidRayServiceSpec",
                                  message=message)], reasons=[message]))
