"""The watcher on the real kube-apiserver (issue 17): without the Gateway API CRDs it neither lists
nor logs about gateways/httproutes (a real server answers 404, which used to be retried with a
WARNING forever); once the CRDs are installed, discovery shows them and HTTPRoutes are watched
without a restart. The watcher runs as its own process with its deploy RBAC (a ServiceAccount
token from the TokenRequest API), scoped to the test's namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent
from raybus.cli.stack import RBAC_MANIFEST
from raybus.testing.envtest import ApiError, ControlPlane, install_crds
from raybus.testing.servers import NatsServer, die_with_parent, stop_process
from tests.integration.boundary.conftest import last_msg, until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
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


def _watcher_token(cp: ControlPlane, namespace: str) -> str:
    """The watcher's own ClusterRole from the deploy manifest, bound in this namespace only."""
    role = next(d for d in yaml.safe_load_all(RBAC_MANIFEST.read_text())
                if d and d.get("kind") == "ClusterRole" and d["metadata"]["name"] == "raybus-watcher")
    role_name = f"raybus-watcher-{namespace}"
    cp.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
               {"metadata": {"name": role_name}, "rules": role["rules"]})
    cp.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "raybus-watcher"}})
    cp.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", {
        "metadata": {"name": "raybus-watcher"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": "raybus-watcher", "namespace": namespace}]})
    return cp.token_for(namespace, "raybus-watcher")


@pytest.fixture
def no_gateway_api(ray_crds: ControlPlane, namespace: str) -> Iterator[ControlPlane]:
    _remove_gateway_crds(ray_crds)
    yield ray_crds
    _remove_gateway_crds(ray_crds)  # the control plane is shared by the whole run
    ray_crds.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/raybus-watcher-{namespace}")


def _log_lines(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append({"level": "RAW", "message": line})
    return out


def _complaints(log: Path) -> list[dict[str, Any]]:
    return [e for e in _log_lines(log) if e.get("level") in ("WARNING", "ERROR", "CRITICAL", "RAW")]


def _logged(log: Path, message: str, **fields: str) -> bool:
    return any(e.get("message") == message and all(e.get(k) == v for k, v in fields.items())
               for e in _log_lines(log))


async def test_gateway_api_watched_only_once_its_crds_are_served(
        no_gateway_api: ControlPlane, namespace: str, nats_server: NatsServer, tmp_path: Path) -> None:
    cp = no_gateway_api
    kubeconfig = cp.write_kubeconfig(tmp_path / "watcher.kubeconfig", _watcher_token(cp, namespace))
    log = tmp_path / "watcher.log"
    env = {**os.environ, "RAYBUS_NATS_URL": nats_server.url, "RAYBUS_KUBECONFIG": str(kubeconfig),
           "RAYBUS_WATCH_NAMESPACE": namespace, "RAYBUS_DISCOVERY_S": "0.5", "RAYBUS_METRICS_PORT": "0"}
    with log.open("ab") as out:
        # A service process, as stack.py spawns them (it starts in well under a second).
        proc = subprocess.Popen([sys.executable, "-m", "watcher", "--replica-id", "w0"],  # noqa: ASYNC220
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                preexec_fn=die_with_parent())  # noqa: PLW1509
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        service = yaml.safe_load((REPO / "deploy" / "samples" / "ray-service.sample.yaml").read_text())
        service["metadata"] = {"name": "rs", "namespace": namespace}
        owner = cp.request("POST", f"/apis/ray.io/v1/namespaces/{namespace}/rayservices", service)

        async def published(kind: s.Kind, name: str) -> ObjectEvent | None:
            assert proc.poll() is None, log.read_text()[-2000:]
            raw = await last_msg(js, s.STREAM_OBJECTS, s.object_subject(kind, namespace, name))
            return ObjectEvent.model_validate_json(raw.data) if raw is not None else None

        await until(lambda: published(s.Kind.RAYSERVICE, "rs"), timeout=60, what="the RayService on NATS")
        # Every kind's initial list has run (NetworkPolicy is listed last, after Gateway/HTTPRoute).
        async def listed_all() -> bool:
            return _logged(log, "relisted", kind=s.Kind.NETWORKPOLICY.value)
        await until(listed_all, timeout=30, what="the watcher's initial lists")
        for kind in (s.Kind.GATEWAY, s.Kind.HTTPROUTE):
            assert _logged(log, "optional kind not served by the API server; watched once discovery shows it",
                           kind=kind.value)
        assert _complaints(log) == []

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
        assert _logged(log, "optional kind now served, watching it", kind=s.Kind.HTTPROUTE.value)
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
        assert _complaints(log) == [], "the watcher complained after startup"
    finally:
        await nc.close()
        stop_process(proc)
