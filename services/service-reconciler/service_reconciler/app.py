"""service-reconciler: KubeRay's RayService controller as a bus consumer.

The decision is `raybus.decisions.rayservice.reconcile_rayservice` (seed 000, steps 1-14); this
service feeds it from the snapshot cache, the dashboard gateway and Redis, and publishes each
decision as one step (`service_reconciler.reconciler`). The serve-config cache and the dangling
clusters' deletion deadlines live in Redis (`service_reconciler.state`).
"""

from __future__ import annotations

from raybus.bus import subjects as s
from raybus.decisions.settings import DecisionSettings
from raybus.runtime.controller import ReconcileFn
from raybus.runtime.reconciler_app import ReconcilerApp, ReconcilerContext
from raybus.runtime.settings import ReconcilerSettings
from service_reconciler.reconciler import ServiceReconciler

# What the reconcile reads: its RayClusters, their head Pods, its Services and their EndpointSlices,
# and for the incremental upgrade its Gateway and HTTPRoute.
KINDS = [s.Kind.RAYSERVICE, s.Kind.RAYCLUSTER, s.Kind.POD, s.Kind.SERVICE, s.Kind.ENDPOINTSLICE,
         s.Kind.GATEWAY, s.Kind.HTTPROUTE]


class ServiceReconcilerApp(ReconcilerApp):
    def __init__(self, settings: ReconcilerSettings, decisions: DecisionSettings) -> None:
        self.reconciler: ServiceReconciler | None = None

        def make(ctx: ReconcilerContext) -> ReconcileFn:
            self.reconciler = ServiceReconciler(ctx, decisions.service)
            return self.reconciler.reconcile

        # Pods: only those of RayService clusters (their heads are read), not every Ray Pod.
        super().__init__(settings, controller=s.Controller.SERVICE, primary_kind=s.Kind.RAYSERVICE,
                         kinds=KINDS, make_reconcile=make, dashboard=True, scopes={s.Kind.POD: "rayservice"})


def create_app(settings: ReconcilerSettings, decisions: DecisionSettings | None = None) -> ReconcilerApp:
    return ServiceReconcilerApp(settings, decisions or DecisionSettings())
