"""The watcher on the real kube-apiserver (issue 17): without the Gateway API CRDs it neither lists
nor logs about gateways/httproutes (a real server answers 404, which used to be retried with a
WARNING forever); once the CRDs are installed, discovery shows them and HTTPRoutes are watched
without a restart. The watcher runs as its own process with its deploy RBAC (a ServiceAccount
token from the TokenRequest API), scoped to the test's namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
import yaml

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent
from raybus_sim.testing.envtest import ApiError, ControlPlane, install_crds
from raybus_sim.testing.servers import NatsServer
from tests.integration.boundary.conftest import last_msg, until
from tests.integration.realapi.kit import REPO, RealApiServices, logged

pytestmark = pytest.mark.integration
GATEWAY_CRDS = Path(__file__).parent / "fixtures" / "gateway-api-crds.yaml"
GATEWAY_GV = "/apis/gateway.networking.k8s.io/v1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _gateway_api_served(cp: ControlPlane) -> bool:
    try:
        cp.request("GET", GATEWAY_GV)
    except ApiError as exc:
        if exc.code == 404:
            return False
        raise
    return True


def _remove_gateway_crds(cp: ControlPlane) -> None:
    for name in ("gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"):
        try:
            cp.request("DELETE", f"{CRDS}/{name}")
        except ApiError as exc:
            if exc.code != 404:
                raise
    cp.wait_for(lambda: not _gateway_api_served(cp), "the Gateway API to leave discovery")


@pytest.fixture
def no_gateway_api(ray_crds: ControlPlane) -> Iterator[ControlPlane]:
    _remove_gateway_crds(ray_crds)
    yield ray_crds
    _remove_gateway_crds(ray_crds)  # the control plane is shared by the whole run


async def test_gateway_api_watched_only_once_its_crds_are_served(
        no_gateway_api: ControlPlane, services: RealApiServices, nats_server: NatsServer) -> None:
    cp, namespace = no_gateway_api, services.namespace
    services.start("watcher", RAYBUS_DISCOVERY_S="0.5")
    log = services.log("watcher")
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        service = yaml.safe_load((REPO / "deploy" / "samples" / "ray-service.sample.yaml").read_text())
        service["metadata"] = {"name": "rs", "namespace": namespace}
        owner = cp.request("POST", f"/apis/ray.io/v1/namespaces/{namespace}/rayservices", service)

        async def published(kind: s.Kind, name: str) -> ObjectEvent | None:
            services.check_alive()
            raw = await last_msg(js, s.STREAM_OBJECTS, s.object_subject(kind, namespace, name))
            return ObjectEvent.model_validate_json(raw.data) if raw is not None else None

        await until(lambda: published(s.Kind.RAYSERVICE, "rs"), timeout=60, what="the RayService on NATS")
        # Every kind's initial list has run (NetworkPolicy is listed last, after Gateway/HTTPRoute).
        async def listed_all() -> bool:
            return logged(log, "relisted", kind=s.Kind.NETWORKPOLICY.value)
        await until(listed_all, timeout=30, what="the watcher's initial lists")
        for kind in (s.Kind.GATEWAY, s.Kind.HTTPROUTE):
            assert logged(log, "optional kind not served by the API server; watched once discovery shows it",
                           kind=kind.value)
        assert services.complaints() == {}

        install_crds(cp, [GATEWAY_CRDS])
        route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                 "metadata": {"name": "rs-route", "ownerReferences": [{
                     "apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs",
                     "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
                 "spec": {"parentRefs": [{"name": "rs-gateway"}]}}
        cp.request("POST", f"{GATEWAY_GV}/namespaces/{namespace}/httproutes", route)
        event = await until(lambda: published(s.Kind.HTTPROUTE, "rs-route"), timeout=30,
                            what="the HTTPRoute on NATS raybus.obj.httproute.>")
        assert event.type in ("ADDED", "SYNC") and event.kind == s.Kind.HTTPROUTE.value
        assert event.object["metadata"]["ownerReferences"][0]["name"] == "rs"
        assert logged(log, "optional kind now served, watching it", kind=s.Kind.HTTPROUTE.value)
        # An HTTPRoute nothing of raybus owns is not published (owned_only), as before.
        cp.request("POST", f"{GATEWAY_GV}/namespaces/{namespace}/httproutes",
                   {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                    "metadata": {"name": "foreign"}, "spec": {}})
        cp.request("PATCH", f"{GATEWAY_GV}/namespaces/{namespace}/httproutes/rs-route",
                   {"metadata": {"labels": {"after": "foreign"}}}, content_type="application/merge-patch+json")

        async def relabelled() -> bool:
            event = await published(s.Kind.HTTPROUTE, "rs-route")
            return event is not None and event.object["metadata"].get("labels", {}).get("after") == "foreign"
        await until(relabelled, timeout=30, what="the route's update on NATS")
        # The foreign route was created before that update: the watcher has seen and dropped it.
        assert await published(s.Kind.HTTPROUTE, "foreign") is None
        assert services.complaints() == {}, "the watcher complained after startup"
    finally:
        await nc.close()
