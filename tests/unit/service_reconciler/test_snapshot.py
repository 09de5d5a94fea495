"""What a RayService reconcile reads from the cache: its clusters (owned or associated by label),
their head Pods only, its Services and the per-cluster serve Services, their EndpointSlices, its
Gateway and HTTPRoute; nothing of other RayServices or plain RayClusters."""

from __future__ import annotations

from typing import Any

from raybus.api.rayservice import RayService
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent, ObjectKey
from raybus.runtime.cache import ObjectCache
from service_reconciler.app import KINDS
from service_reconciler.snapshot import build_snapshot
from service_reconciler.state import ServiceState
from tests.unit.decisions.rayservice.world import make_service

Json = dict[str, Any]
ORIGIN = {"ray.io/originated-from-crd": "RayService", "ray.io/originated-from-cr-name": "rs"}


def owner(kind: str, name: str) -> list[Json]:
    return [{"apiVersion": "ray.io/v1" if kind != "Service" else "v1", "kind": kind, "name": name,
             "uid": f"uid-{name}", "controller": True}]


def obj(kind: s.Kind, name: str, *, labels: Json | None = None, owners: list[Json] | None = None) -> Json:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels or {},
                         "ownerReferences": owners or []}}


def cache_with(objects: list[tuple[s.Kind, Json]]) -> ObjectCache:
    cache = ObjectCache(None, kinds=KINDS)  # fed directly, no NATS
    for kind, o in objects:
        cache.apply(ObjectEvent(key=ObjectKey(namespace="default", name=o["metadata"]["name"]), kind=kind.value,
                                type="ADDED", object=o))
    return cache


def names(items: list[Json]) -> list[str]:
    return sorted(x["metadata"]["name"] for x in items)


def test_snapshot_reads_what_belongs_to_the_rayservice() -> None:
    head = {"ray.io/cluster": "rs-a", "ray.io/node-type": "head"}
    cache = cache_with([
        (s.Kind.RAYCLUSTER, obj(s.Kind.RAYCLUSTER, "rs-a", labels=ORIGIN, owners=owner("RayService", "rs"))),
        (s.Kind.RAYCLUSTER, obj(s.Kind.RAYCLUSTER, "rs-orphan", labels=ORIGIN)),  # associated by label
        (s.Kind.RAYCLUSTER, obj(s.Kind.RAYCLUSTER, "plain")),
        (s.Kind.RAYCLUSTER, obj(s.Kind.RAYCLUSTER, "other-x", owners=owner("RayService", "other"))),
        (s.Kind.POD, obj(s.Kind.POD, "rs-a-head", labels=head)),
        (s.Kind.POD, obj(s.Kind.POD, "rs-a-worker", labels={**head, "ray.io/node-type": "worker"})),
        (s.Kind.POD, obj(s.Kind.POD, "plain-head", labels={**head, "ray.io/cluster": "plain"})),
        (s.Kind.SERVICE, obj(s.Kind.SERVICE, "rs-serve-svc", owners=owner("RayService", "rs"))),
        (s.Kind.SERVICE, obj(s.Kind.SERVICE, "rs-a-serve-svc", owners=owner("RayCluster", "rs-a"))),
        (s.Kind.SERVICE, obj(s.Kind.SERVICE, "plain-head-svc", owners=owner("RayCluster", "plain"))),
        (s.Kind.ENDPOINTSLICE, obj(s.Kind.ENDPOINTSLICE, "rs-serve-svc-x1", owners=owner("Service", "rs-serve-svc"),
                                   labels={"kubernetes.io/service-name": "rs-serve-svc"})),
        (s.Kind.ENDPOINTSLICE, obj(s.Kind.ENDPOINTSLICE, "plain-head-svc-x1",
                                   owners=owner("Service", "plain-head-svc"),
                                   labels={"kubernetes.io/service-name": "plain-head-svc"})),
        (s.Kind.GATEWAY, obj(s.Kind.GATEWAY, "rs-gateway", owners=owner("RayService", "rs"))),
        (s.Kind.HTTPROUTE, obj(s.Kind.HTTPROUTE, "rs-httproute", owners=owner("RayService", "rs"))),
        (s.Kind.GATEWAY, obj(s.Kind.GATEWAY, "other-gateway", owners=owner("RayService", "other"))),
    ])
    snap = build_snapshot(cache, RayService.model_validate(make_service("rs")), state=ServiceState(), failures=[])
    assert names(snap.clusters) == ["rs-a", "rs-orphan"]
    assert names(snap.pods) == ["rs-a-head"]
    assert names(snap.services) == ["rs-a-serve-svc", "rs-serve-svc"]
    assert names(snap.endpoint_slices) == ["rs-serve-svc-x1"]
    assert names(snap.gateways) == ["rs-gateway"] and names(snap.http_routes) == ["rs-httproute"]
    assert snap.observations == {} and snap.dashboard_results == []
