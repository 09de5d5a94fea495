"""One RayJob reconcile: the RayJob from the cache (gone -> forget it), the read-your-writes barrier
(the previous step's writes answered and visible), a JobSnapshot of the cache (cluster, submitter
Job, head Pods, head Service, the dashboard-poller's observation, the previous step's failures and
dashboard results), the pure `reconcile_rayjob`, then one published step: commands, dashboard
commands, the status (optimistic, on the resourceVersion decided on) and the dashboard interest.
No dashboard call happens here: job status arrives as observations, which trigger a reconcile.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pydantic import ValidationError

from job_reconciler.snapshot import (
    PreviousStep,
    build_snapshot,
    previous_failures,
    previous_results,
)
from raybus.api.rayjob import RayJob
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.job.reconcile import reconcile_rayjob
from raybus.decisions.job.settings import JobSettings
from raybus.runtime.controller import Result
from raybus.runtime.reconciler_app import ReconcilerContext
from raybus.runtime.stepper import Step, StepRunner, dashboard_command_ids, new_batch_id

log = logging.getLogger(__name__)
# A clusterSelector cluster is not owned by the RayJob, so its changes wake nobody: look again
# like KubeRay's 3 s requeue while waiting for it to become ready.
SELECTED_CLUSTER_POLL_S = 3.0


class JobReconciler:
    def __init__(self, ctx: ReconcilerContext, settings: JobSettings) -> None:
        self._ctx = ctx
        self._settings = settings
        self.runner = StepRunner(ctx, kind=s.Kind.RAYJOB, k8s_kind="RayJob")
        self._previous: dict[ObjectKey, PreviousStep] = {}

    async def reconcile(self, key: ObjectKey) -> Result:
        ctx = self._ctx
        raw = ctx.cache.get(s.Kind.RAYJOB, key.namespace, key.name)
        if raw is None:
            self._previous.pop(key, None)
            return await self.runner.gone(key)
        held = await self.runner.wait(key)
        if held is not None:
            return held
        try:
            job = RayJob.model_validate(raw)
        except ValidationError as exc:
            # Accepted by the API server (preserve-unknown-fields) but not by our models: never
            # crash the replica; nothing sensible to decide on.
            log.warning("RayJob does not parse", extra={"key": str(key), "errors": exc.error_count()})
            return Result()
        previous = self._previous.get(key)
        snapshot = build_snapshot(ctx.cache, job, failures=previous_failures(ctx.outcomes, previous),
                                  results=previous_results(ctx.cache, key, previous))
        decision = reconcile_rayjob(snapshot, settings=self._settings, now=datetime.now(UTC))
        requeue = decision.requeue_after
        status = (decision.status or {}).get("jobDeploymentStatus") or (
            job.status.job_deployment_status if job.status is not None else None)
        if job.spec.cluster_selector and status == "Initializing" and decision.error is None:
            requeue = min(requeue, SELECTED_CLUSTER_POLL_S) if requeue is not None else SELECTED_CLUSTER_POLL_S
        batch_id = new_batch_id()
        self._previous[key] = PreviousStep(
            batch=batch_id if decision.commands else None,
            dashboard=tuple(dashboard_command_ids(batch_id, len(decision.dashboard_commands))))
        return await self.runner.publish(key, raw, Step(
            commands=decision.commands, dashboard_commands=decision.dashboard_commands,
            status=decision.status, interests=[decision.interest], requeue_after=requeue,
            error=decision.error, reasons=decision.reasons, batch_id=batch_id))
