"""Incremental upgrade rollback end to end (KubeRay v1.7): A -> B -> A on the local stack. The test
plays the Gateway API controller (the local API server has none): it marks the Gateway and HTTPRoute
Accepted/Programmed/ResolvedRefs; raybus does the rest (HTTPRoute weights, target_capacity)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator

import pytest

from raybus.adapters.kube import KubeError, resource_for
from tests.integration.e2e.conftest import NS, Kube
from tests.integration.e2e.rayservice_kit import (
    RS,
    SAMPLE,
    ClusterWatch,
    EndpointSampler,
    Json,
    Services,
    active_name,
    condition,
    pending_name,
    rayservice_doc,
)

GATEWAY = resource_for("gateway.networking.k8s.io/v1", "Gateway")
ROUTE = resource_for("gateway.networking.k8s.io/v1", "HTTPRoute")
T = "2026-01-01T00:00:00Z"


def _cond(type_: str) -> Json:
    return {"type": type_, "status": "True", "reason": type_, "message": "", "lastTransitionTime": T,
            "observedGeneration": 1}


async def _gateway_controller(kube: Kube) -> None:
    """Accept and program every Gateway and HTTPRoute of the namespace (what Istio/Envoy Gateway do)."""
    while True:
        with contextlib.suppress(KubeError):
            gateways, _ = await kube.c.list_all(GATEWAY, namespace=NS)
            for gw in gateways:
                if not (gw.get("status") or {}).get("conditions"):
                    body = copy.deepcopy(gw)
                    body["status"] = {"conditions": [_cond("Accepted"), _cond("Programmed")]}
                    await kube.c.replace_status(GATEWAY, body)
            routes, _ = await kube.c.list_all(ROUTE, namespace=NS)
            for route in routes:
                parents = [{"parentRef": {"name": ref.get("name"), "namespace": ref.get("namespace", NS)},
                            "controllerName": "example.com/gateway",
                            "conditions": [_cond("Accepted"), _cond("ResolvedRefs")]}
                           for ref in (route.get("spec") or {}).get("parentRefs") or []]
                if (route.get("status") or {}).get("parents") != parents:
                    body = copy.deepcopy(route)
                    body["status"] = {"parents": parents}
                    await kube.c.replace_status(ROUTE, body)
        await asyncio.sleep(0.2)


@pytest.fixture
async def gateways(kube: Kube) -> AsyncIterator[None]:
    task = asyncio.create_task(_gateway_controller(kube))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.fixture
async def services(kube: Kube) -> AsyncIterator[Services]:
    svc = Services(kube)
    yield svc
    for name in svc.created:
        with contextlib.suppress(KubeError):
            await kube.c.delete(RS, namespace=NS, name=name)


@pytest.fixture
async def watch(kube: Kube) -> AsyncIterator[ClusterWatch]:
    w = ClusterWatch(kube.c)
    await w.start()
    yield w
    await w.stop()


def _head_env(doc: Json) -> list[Json]:
    return doc["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0].setdefault("env", [])


def _traffic(rs: Json, block: str) -> int:
    return int(((rs.get("status") or {}).get(block) or {}).get("trafficRoutedPercent", -1))


async def test_incremental_rollback_a_b_a_returns_traffic_to_a(
        kube: Kube, services: Services, watch: ClusterWatch, gateways: None) -> None:
    name = "rs-rollback"
    doc = rayservice_doc(SAMPLE, name)
    doc["spec"]["rayClusterDeletionDelaySeconds"] = 1
    doc["spec"]["upgradeStrategy"] = {"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": {
        "gatewayClassName": "example", "stepSizePercent": 25, "intervalSeconds": 2, "maxSurgePercent": 50}}
    doc["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    spec_a = copy.deepcopy(doc["spec"]["rayClusterConfig"])
    await services.apply(doc)
    rs = await services.wait(name, lambda r: active_name(r) != "" and condition(r, "Ready").get("status") == "True",
                             timeout=120, what="A ready")
    a = active_name(rs)
    sampler = EndpointSampler(services, f"{a}-serve-svc")
    sampler.start()
    # A -> B: wait until B takes part of the traffic.
    spec_b = copy.deepcopy(spec_a)
    _head_env({"spec": {"rayClusterConfig": spec_b}}).append({"name": "UPGRADE", "value": "B"})
    await services.patch(name, {"spec": {"rayClusterConfig": spec_b}})
    rs = await services.wait(name, lambda r: pending_name(r) not in ("", a) and _traffic(r, "pendingServiceStatus") > 0,
                             timeout=120, what="B receiving traffic")
    b = pending_name(rs)
    # B -> A: the rollback.
    await services.patch(name, {"spec": {"rayClusterConfig": spec_a}})
    seen_rollback: list[Json] = []

    def rolled_back(r: Json) -> bool:
        if condition(r, "RollbackInProgress").get("status") == "True":
            seen_rollback.append(condition(r, "RollbackInProgress"))
        return pending_name(r) == "" and active_name(r) == a and not condition(r, "RollbackInProgress")

    rs = await services.wait(name, rolled_back, timeout=120, what="rollback to A complete")
    await kube.eventually(lambda: _true(watch.lives.get(b) is not None and watch.lives[b].deleted is not None),
                          timeout=60, what="B deleted")
    samples = await sampler.stop()
    assert seen_rollback and seen_rollback[0]["reason"] == "DesiredClusterSpecChanged"
    assert active_name(rs) == a and _traffic(rs, "activeServiceStatus") == 100
    assert (rs["status"]["activeServiceStatus"] or {}).get("targetCapacity") == 100
    assert condition(rs, "UpgradeInProgress")["status"] == "False"
    route = await kube.c.get(ROUTE, namespace=NS, name=f"{name}-httproute")
    backends = route["spec"]["rules"][0]["backendRefs"]
    assert [(x["name"], x["weight"]) for x in backends] == [(f"{a}-serve-svc", 100)]
    # A ready endpoint behind A's Service at every 0.2 s sample, from before B to after B went.
    assert len(samples) >= 10 and min(count for _, count in samples) >= 1, samples
    assert a in watch.lives and watch.lives[a].deleted is None


async def _true(value: bool) -> bool:
    return value
