"""What one RayService reconcile reads, gathered from the replica's snapshot cache.

KubeRay's reconcile GETs/LISTs these from its informer cache (the RayClusters it associates by
label, their head Pods, its Services and their EndpointSlices, its Gateway and HTTPRoute) and asks
the dashboard inline; here the dashboard part is the poller's last observation per cluster and the
results of the commands published in the previous step.
"""

from __future__ import annotations

from typing import Any

from raybus.api.rayservice import RayService
from raybus.bus import subjects as s
from raybus.bus.envelopes import DashboardResultMessage
from raybus.decisions.cluster import podutil
from raybus.decisions.rayservice.model import (
    CommandFailure,
    DashboardOutcome,
    ServiceSnapshot,
    TimedObservation,
)
from raybus.decisions.rayservice.services import head_service_name, serve_service_name
from raybus.runtime.cache import ObjectCache, union_by_name
from service_reconciler.state import InflightCommand, ServiceState

Json = dict[str, Any]
ORIGINATED_FROM_CR_NAME = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def _name(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def rayservice_clusters(cache: ObjectCache, service: RayService) -> list[Json]:
    """Its RayClusters: by ownerRef, and by KubeRay's association labels (the ones cleanup uses)."""
    ns, name = service.namespace, service.name
    labelled = [x for x in cache.objects(s.Kind.RAYCLUSTER, ns)
                if ((x.get("metadata") or {}).get("labels") or {}).get(ORIGINATED_FROM_CR_NAME) == name
                and ((x.get("metadata") or {}).get("labels") or {}).get(ORIGINATED_FROM_CRD) == "RayService"]
    return union_by_name(cache.owned_by(s.Kind.RAYCLUSTER, ns, owner_kind="RayService", owner_name=name), labelled)


def paired_results(inflight: list[InflightCommand],
                   results: dict[str, DashboardResultMessage]) -> list[DashboardOutcome]:
    """The previous step's dashboard commands with their results (a command without one, given
    up on by the barrier, is simply decided again)."""
    out = []
    for item in inflight:
        res = results.get(item.id)
        if res is not None:
            out.append(DashboardOutcome(command=item.command, result=res.result, finished_at=res.finished_at))
    return out


def build_snapshot(cache: ObjectCache, service: RayService, *, state: ServiceState,
                   failures: list[CommandFailure]) -> ServiceSnapshot:
    ns, name = service.namespace, service.name
    clusters = rayservice_clusters(cache, service)
    cluster_names = [_name(x) for x in clusters]
    pods = [p for c in cluster_names for p in cache.labelled(s.Kind.POD, ns, c) if podutil.is_head(p)]
    by_name = [x for x in (cache.get(s.Kind.SERVICE, ns, n)
                           for n in (head_service_name(service), serve_service_name(service))) if x is not None]
    services = union_by_name(cache.owned_by(s.Kind.SERVICE, ns, owner_kind="RayService", owner_name=name), by_name,
                      *(cache.owned_by(s.Kind.SERVICE, ns, owner_kind="RayCluster", owner_name=c) for c in cluster_names))
    # The EndpointSlice controller makes each Service the owner of its slices.
    slices = [e for svc in services
              for e in cache.owned_by(s.Kind.ENDPOINTSLICE, ns, owner_kind="Service", owner_name=_name(svc))
              if ((e.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == _name(svc)]
    observations = {}
    for cluster in cluster_names:
        msg = cache.dashboard_message(ns, cluster)
        if msg is not None:
            observations[cluster] = TimedObservation(observation=msg.observation, observed_at=msg.observed_at)
    results = {r.result.command_id: r for r in cache.dashboard_results(ns, name)}
    return ServiceSnapshot(
        service=service, clusters=clusters, pods=pods, services=services, endpoint_slices=slices,
        gateways=cache.owned_by(s.Kind.GATEWAY, ns, owner_kind="RayService", owner_name=name),
        http_routes=cache.owned_by(s.Kind.HTTPROUTE, ns, owner_kind="RayService", owner_name=name),
        observations=observations, serve_config_cache=dict(state.serve_configs),
        deletion_deadlines=dict(state.deadlines), dashboard_results=paired_results(state.inflight, results),
        failed_commands=failures)
