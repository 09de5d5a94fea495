"""Less common verbs: binding/eviction subresources, deletecollection, sendInitialEvents, dryRun, pod logs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from raybus_sim.apiserver import RunningApiServer, start_apiserver

from .conftest import FIXTURE_CRDS

pytestmark = pytest.mark.integration
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def bare() -> AsyncIterator[RunningApiServer]:
    """No kubelet: pods stay where the test puts them. WatchList on (sendInitialEvents is served)."""
    srv = await start_apiserver(crd_dir=FIXTURE_CRDS, kubelet=False, watch_list=True)
    yield srv
    await srv.stop()


async def _req(http: aiohttp.ClientSession, method: str, url: str, body: object = None,
               ctype: str = "application/json") -> tuple[int, dict]:
    data = None if body is None else json.dumps(body)
    async with http.request(method, url, data=data, headers={"Content-Type": ctype}) as r:
        return r.status, await r.json(content_type=None)


def _pod(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}, {"name": "d", "image": "busybox"}]}}


async def test_binding_eviction_and_deletecollection(bare: RunningApiServer) -> None:
    base = bare.url + PODS
    async with aiohttp.ClientSession() as http:
        for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
            assert (await _req(http, "POST", base, _pod(name, tier=tier)))[0] == 201
        status, body = await _req(http, "POST", f"{base}/a/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"kind": "Node", "name": "n1"}})
        assert status == 201 and body["status"] == "Success"
        _, pod = await _req(http, "GET", f"{base}/a")
        assert pod["spec"]["nodeName"] == "n1"
        assert [c["type"] for c in pod["status"]["conditions"]] == ["PodScheduled"]
        status, body = await _req(http, "POST", f"{base}/a/binding", {"target": {"name": "n2"}})
        assert status == 409 and body["reason"] == "Conflict"

        status, _ = await _req(http, "POST", f"{base}/a/eviction", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}})
        assert status == 201
        assert (await _req(http, "GET", f"{base}/a"))[0] == 404

        status, body = await _req(http, "DELETE", f"{base}?labelSelector=tier%3Dx")
        assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["b"]
        _, listed = await _req(http, "GET", base)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["c"]
        assert "kind" not in listed["items"][0]  # built-in list items carry no kind, as upstream

        status, body = await _req(http, "GET", f"{base}/c/log")
        assert status == 400 and "a container name must be specified" in body["message"]
        async with http.get(f"{base}/c/log?container=d") as r:
            assert r.status == 200 and await r.text() == ""


async def test_dry_run_and_send_initial_events(bare: RunningApiServer) -> None:
    base = bare.url + "/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as http:
        status, body = await _req(http, "POST", f"{base}?dryRun=All", {"metadata": {"name": "dry"}})
        assert status == 201 and body["metadata"]["uid"] and "resourceVersion" not in body["metadata"]
        assert (await _req(http, "GET", f"{base}/dry"))[0] == 404
        await _req(http, "POST", base, {"metadata": {"name": "real"}, "data": {"a": "1"}})
        status, body = await _req(http, "PATCH", f"{base}/real?dryRun=All", {"data": {"a": "2"}},
                                  "application/merge-patch+json")
        assert status == 200 and body["data"] == {"a": "2"}
        assert (await _req(http, "GET", f"{base}/real"))[1]["data"] == {"a": "1"}
        status, _ = await _req(http, "DELETE", f"{base}/real", {"dryRun": ["All"]})
        assert status == 200 and (await _req(http, "GET", f"{base}/real"))[0] == 200

        url = (f"{base}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
               f"&timeoutSeconds=1&fieldSelector=metadata.name%3Dreal")
        async with http.get(url) as r:
            events = [json.loads(line) async for line in r.content if line.strip()]
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_rv_from_another_resource_resumes_without_410(bare: RunningApiServer) -> None:
    # resourceVersions are global (etcd-like): an rv read from configmaps is a valid start for roles.
    async with aiohttp.ClientSession() as http:
        _, body = await _req(http, "GET", bare.url + "/api/v1/namespaces/default/configmaps")
        rv = body["metadata"]["resourceVersion"]
        roles = bare.url + "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles"
        await _req(http, "POST", roles, {"metadata": {"name": "r"}, "rules": []})
        async with http.get(f"{roles}?watch=1&resourceVersion={rv}&timeoutSeconds=1") as r:
            events = [json.loads(line) async for line in r.content if line.strip()]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "r")]


async def test_service_account_admission(bare: RunningApiServer) -> None:
    base = bare.url + PODS
    async with aiohttp.ClientSession() as http:
        pod = _pod("sa-missing")
        pod["spec"]["serviceAccountName"] = "ghost"
        status, body = await _req(http, "POST", base, pod)
        assert status == 403 and body["reason"] == "Forbidden"
        assert body["message"] == ('pods "sa-missing" is forbidden: error looking up service account default/ghost: '
                                   'serviceaccount "ghost" not found')
        _, created = await _req(http, "POST", base, _pod("sa-default"))
        vols = created["spec"]["volumes"]
        assert len(vols) == 1 and vols[0]["name"].startswith("kube-api-access-")
        mounts = [m for c in created["spec"]["containers"] for m in c["volumeMounts"]]
        assert {m["mountPath"] for m in mounts} == {"/var/run/secrets/kubernetes.io/serviceaccount"}
        off = _pod("sa-off")
        off["spec"]["automountServiceAccountToken"] = False
        _, created = await _req(http, "POST", base, off)
        assert "volumes" not in created["spec"]


async def test_pod_defaults_like_a_real_apiserver(bare: RunningApiServer) -> None:
    pod = _pod("defaults")
    c = pod["spec"]["containers"][0]
    c["resources"] = {"limits": {"cpu": 1, "memory": "2048Mi"}}
    c["readinessProbe"] = {"httpGet": {"port": 8000}}
    c["env"] = [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    pod["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "x"}}]
    async with aiohttp.ClientSession() as http:
        status, got = await _req(http, "POST", bare.url + PODS, pod)
    assert status == 201
    c = got["spec"]["containers"][0]
    assert c["resources"] == {"limits": {"cpu": "1", "memory": "2Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}}
    assert c["readinessProbe"] == {"httpGet": {"port": 8000, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                                   "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert c["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "metadata.name", "apiVersion": "v1"}
    assert c["imagePullPolicy"] == "Always" and got["status"]["qosClass"] == "Burstable"
    assert got["spec"]["volumes"][0]["configMap"] == {"name": "x", "defaultMode": 420}
    # a PUT that omits defaulted fields / sends un-canonical quantities is not a spec change (no 422)
    got["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 1
    del got["spec"]["dnsPolicy"]
    async with aiohttp.ClientSession() as http:
        status, put = await _req(http, "PUT", f"{bare.url}{PODS}/defaults", got)
    assert status == 200, put
    assert put["spec"]["dnsPolicy"] == "ClusterFirst" and put["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1"


async def test_paged_list_is_a_consistent_snapshot(bare: RunningApiServer) -> None:
    base = bare.url + "/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as http:
        for i in range(5):
            await _req(http, "POST", base, {"metadata": {"name": f"c{i}", "labels": {"s": "1"}}, "data": {"v": "0"}})
        _, first = await _req(http, "GET", f"{base}?labelSelector=s&limit=2")
        token, rv = first["metadata"]["continue"], first["metadata"]["resourceVersion"]
        # changes after the first page do not leak into later pages
        await _req(http, "PATCH", f"{base}/c3", {"data": {"v": "1"}}, "application/merge-patch+json")
        await _req(http, "DELETE", f"{base}/c4")
        await _req(http, "POST", base, {"metadata": {"name": "c5", "labels": {"s": "1"}}})
        _, second = await _req(http, "GET", f"{base}?labelSelector=s&limit=2&continue={token}")
        _, third = await _req(http, "GET", f"{base}?labelSelector=s&limit=2&continue={second['metadata']['continue']}")
        names = [o["metadata"]["name"] for page in (first, second, third) for o in page["items"]]
        assert names == ["c0", "c1", "c2", "c3", "c4"] and "continue" not in third["metadata"]
        assert second["items"][1]["data"] == {"v": "0"} and second["metadata"]["resourceVersion"] == rv
        bare.state.snapshots._snaps.clear()  # as if compacted
        status, body = await _req(http, "GET", f"{base}?labelSelector=s&limit=2&continue={token}")
        assert status == 410 and body["reason"] == "Expired"
