"""cluster-reconciler: KubeRay's RayCluster controller as a bus consumer (wiring only; one
reconcile is `cluster_reconciler.reconciler`)."""

from __future__ import annotations

from typing import Any

from cluster_reconciler.reconciler import ClusterReconciler
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.cluster import podutil
from raybus.decisions.settings import DecisionSettings
from raybus.runtime.controller import ReconcileFn
from raybus.runtime.reconciler_app import ReconcilerApp, ReconcilerContext
from raybus.runtime.settings import ReconcilerSettings

KINDS = [s.Kind.RAYCLUSTER, s.Kind.POD, s.Kind.SERVICE, s.Kind.INGRESS, s.Kind.SERVICEACCOUNT,
         s.Kind.ROLE, s.Kind.ROLEBINDING, s.Kind.JOB, s.Kind.NETWORKPOLICY,
         s.Kind.PODGROUP]
# A RayCluster woken by events runs at most once a second (runtime/workqueue.py): its Pods step
# through scheduled/started/ready one after the other, and deciding after each step was two
# thirds of its runs, deciding nothing. A cluster quiet for a second still runs 0.1 s after its
# first event. RayJobs and RayServices are woken by far fewer events and keep every run (their
# job-end and Serve latencies are measured against KubeRay's 2-3 s polls).
MIN_INTERVAL_S = 1.0


class ClusterReconcilerApp(ReconcilerApp):
    def __init__(self, settings: ReconcilerSettings, decisions: DecisionSettings) -> None:
        self.reconciler: ClusterReconciler | None = None

        def make(ctx: ReconcilerContext) -> ReconcileFn:
            self.reconciler = ClusterReconciler(ctx, decisions.operator)
            return self.reconciler.reconcile

        super().__init__(settings, controller=s.Controller.CLUSTER,
                         primary_kind=s.Kind.RAYCLUSTER, kinds=KINDS, make_reconcile=make,
                         min_interval_s=MIN_INTERVAL_S)

    async def prepare(self, ctx: ReconcilerContext) -> None:
        assert self.reconciler is not None and self.runtime is not None
        self.reconciler.bind(self.runtime.look_again, self.runtime.epoch, requeue_after=self.runtime.requeue_after)
        ctx.cache.listeners.setdefault(s.Kind.POD.value, []).append(self._on_pod)

    def _on_pod(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """A Pod event wakes its RayCluster from this replica's cache, not through a trigger: a
        Pod steps through five or six versions, and a trigger per version was a third of the
        bus's messages per Pod, each one published, stored, fetched and acked. The watcher
        publishes no RayCluster trigger for a labelled Pod (watcher.app.on_change)."""
        assert self.runtime is not None
        pod = new if new is not None else old
        namespace = str(((pod or {}).get("metadata") or {}).get("namespace") or "")
        cause = f"{'DELETED' if new is None else 'ADDED' if old is None else 'MODIFIED'} pod"
        for cluster in podutil.clusters_to_wake(old, new):
            self.runtime.wake(ObjectKey(namespace=namespace, name=cluster), cause)


def create_app(settings: ReconcilerSettings, decisions: DecisionSettings | None = None) -> ReconcilerApp:
    return ClusterReconcilerApp(settings, decisions or DecisionSettings())
