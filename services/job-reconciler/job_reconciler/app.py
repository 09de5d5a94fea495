"""job-reconciler: KubeRay's RayJob controller as a bus consumer (wiring only; one reconcile is
`job_reconciler.reconciler`)."""

from __future__ import annotations

from job_reconciler.reconciler import JobReconciler
from raybus.bus import subjects as s
from raybus.decisions.settings import DecisionSettings
from raybus.runtime.controller import ReconcileFn
from raybus.runtime.reconciler_app import ReconcilerApp, ReconcilerContext
from raybus.runtime.settings import ReconcilerSettings

KINDS = [s.Kind.RAYJOB, s.Kind.RAYCLUSTER, s.Kind.JOB, s.Kind.POD, s.Kind.SERVICE]


class JobReconcilerApp(ReconcilerApp):
    def __init__(self, settings: ReconcilerSettings, decisions: DecisionSettings) -> None:
        self.reconciler: JobReconciler | None = None

        def make(ctx: ReconcilerContext) -> ReconcileFn:
            self.reconciler = JobReconciler(ctx, decisions.job)
            return self.reconciler.reconcile

        # Pods: only those of RayJob clusters (the head's submitter container in SidecarMode), not
        # every Pod of every RayCluster. RayClusters: all (clusterSelector uses a user's cluster).
        super().__init__(settings, controller=s.Controller.JOB, primary_kind=s.Kind.RAYJOB,
                         kinds=KINDS, make_reconcile=make, dashboard=True,
                         scopes={s.Kind.POD: "rayjob"})


def create_app(settings: ReconcilerSettings, decisions: DecisionSettings | None = None) -> ReconcilerApp:
    return JobReconcilerApp(settings, decisions or DecisionSettings())
