"""kubernetes-asyncio against the local API server over HTTP: CRUD, conflicts, watch, generation, selectors."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from raybus_sim.apiserver import RunningApiServer, start_apiserver

from .conftest import FIXTURE_CRDS
from .helpers import eventually

pytestmark = pytest.mark.integration
RC = {"group": "ray.io", "version": "v1", "plural": "rayclusters"}
# CustomObjectsApi would send a dict body as application/json-patch+json (400 upstream too): say merge.
MERGE = {"_content_type": "application/merge-patch+json"}


def raycluster(name: str, replicas: int = 1) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
            "spec": {"rayVersion": "2.52.0", "workerGroupSpecs": [{"groupName": "w", "replicas": replicas}]}}


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


async def test_crud_and_error_statuses(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}, "data": {"a": "1"}})
    assert cm.metadata.uid and cm.metadata.creation_timestamp and int(cm.metadata.resource_version) > 0
    got = await core.read_namespaced_config_map("c1", "default")
    assert got.data == {"a": "1"} and got.metadata.generation is None

    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}})
    assert exc.value.status == 409
    body = status_of(exc.value)
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'configmaps "c1" already exists', "reason": "AlreadyExists",
                    "details": {"name": "c1", "kind": "configmaps"}, "code": 409}

    with pytest.raises(ApiException) as exc:
        await core.read_namespaced_config_map("nope", "default")
    assert exc.value.status == 404 and status_of(exc.value)["reason"] == "NotFound"

    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "Bad_Name"}})
    assert exc.value.status == 422
    body = status_of(exc.value)
    assert body["reason"] == "Invalid" and body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value')

    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("missing-ns", {"metadata": {"name": "x"}})
    assert exc.value.status == 404 and status_of(exc.value)["message"] == 'namespaces "missing-ns" not found'

    gen = await core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}})
    assert gen.metadata.name.startswith("gen-") and len(gen.metadata.name) == 9

    status = await core.delete_namespaced_config_map("c1", "default")
    assert status.status == "Success"
    names = [i.metadata.name for i in (await core.list_namespaced_config_map("default")).items]
    assert "c1" not in names and gen.metadata.name in names


async def test_stale_resource_version_conflicts(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"v": "0"}})
    stale = cm.metadata.resource_version
    cm.data = {"v": "1"}
    updated = await core.replace_namespaced_config_map("c", "default", cm)
    assert int(updated.metadata.resource_version) > int(stale)
    cm.data, cm.metadata.resource_version = {"v": "2"}, stale
    with pytest.raises(ApiException) as exc:
        await core.replace_namespaced_config_map("c", "default", cm)
    assert exc.value.status == 409
    assert status_of(exc.value)["message"] == ('Operation cannot be fulfilled on configmaps "c": the object has '
                                               'been modified; please apply your changes to the latest version '
                                               'and try again')
    # a no-op update keeps the resourceVersion (no write, no event)
    same = await core.replace_namespaced_config_map("c", "default", updated)
    assert same.metadata.resource_version == updated.metadata.resource_version
    # custom resources refuse unconditional PUT
    co = client.CustomObjectsApi(api)
    rc = await co.create_namespaced_custom_object(**RC, namespace="default", body=raycluster("r"))
    rc["metadata"].pop("resourceVersion")
    with pytest.raises(ApiException) as exc:
        await co.replace_namespaced_custom_object(**RC, namespace="default", name="r", body=rc)
    assert exc.value.status == 422


async def test_generation_and_status_subresource(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    rc = await co.create_namespaced_custom_object(**RC, namespace="default",
                                                  body={**raycluster("g"), "status": {"state": "bogus"}})
    assert rc["metadata"]["generation"] == 1 and "status" not in rc  # status dropped on create
    rc = await co.patch_namespaced_custom_object_status(**RC, namespace="default", name="g",
                                                        body={"status": {"state": "ready"}}, **MERGE)
    assert rc["status"] == {"state": "ready"} and rc["metadata"]["generation"] == 1
    rc = await co.patch_namespaced_custom_object(**RC, namespace="default", name="g",
                                                 body={"metadata": {"labels": {"x": "y"}}}, **MERGE)
    assert rc["metadata"]["generation"] == 1  # metadata-only change
    rc = await co.patch_namespaced_custom_object(**RC, namespace="default", name="g",
                                                 body={"spec": {"rayVersion": "2.53.0"}, "status": {"state": "x"}}, **MERGE)
    assert rc["metadata"]["generation"] == 2 and rc["status"] == {"state": "ready"}  # status ignored on main


async def test_watch_events_resume_and_410(server: RunningApiServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    start_rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "w", "labels": {"k": "v"}}})
    await core.patch_namespaced_config_map("w", "default", {"data": {"a": "b"}})
    await core.delete_namespaced_config_map("w", "default")
    seen = []
    async with watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start_rv,
                                    label_selector="k=v", timeout_seconds=1) as stream:
        async for ev in stream:
            seen.append((ev["type"], ev["object"].metadata.name, ev["object"].data))
            if len(seen) == 3:
                break
    assert seen == [("ADDED", "w", None), ("MODIFIED", "w", {"a": "b"}), ("DELETED", "w", {"a": "b"})]

    # The history window is bounded: a resourceVersion older than it is answered with 410 Expired.
    small = await start_apiserver(crd_dir=FIXTURE_CRDS, kubelet=False, history_size=5)
    try:
        cfg = client.Configuration(host=small.url)
        async with client.ApiClient(cfg) as c2:
            core2 = client.CoreV1Api(c2)
            old = (await core2.list_namespaced_config_map("default")).metadata.resource_version
            for i in range(8):
                await core2.create_namespaced_config_map("default", {"metadata": {"name": f"m{i}"}})
            with pytest.raises(ApiException) as exc:
                async with watch.Watch().stream(core2.list_namespaced_config_map, "default",
                                                resource_version=old, timeout_seconds=1) as stream:
                    async for _ in stream:
                        pass
            assert exc.value.status == 410 and "Expired" in exc.value.reason
    finally:
        await small.stop()


async def test_watch_selector_transitions_and_bookmarks(server: RunningApiServer) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        base = f"{server.url}/api/v1/namespaces/default/configmaps"
        async with http.post(base, json={"metadata": {"name": "s", "labels": {"tier": "a"}}}) as r:
            rv = (await r.json())["metadata"]["resourceVersion"]
        url = f"{base}?watch=1&resourceVersion={rv}&labelSelector=tier%20in%20(b,c)&allowWatchBookmarks=true"
        server.state.bookmark_interval = 0.1
        async with http.get(url + "&timeoutSeconds=2") as resp:
            async with http.patch(f"{base}/s", data=json.dumps({"metadata": {"labels": {"tier": "b"}}}),
                                  headers={"Content-Type": "application/merge-patch+json"}):
                pass
            async with http.patch(f"{base}/s", data=json.dumps({"metadata": {"labels": {"tier": "z"}}}),
                                  headers={"Content-Type": "application/merge-patch+json"}):
                pass
            types = []
            async for line in resp.content:
                ev = json.loads(line)
                types.append(ev["type"])
                if ev["type"] == "BOOKMARK":
                    assert int(ev["object"]["metadata"]["resourceVersion"]) > int(rv)
                    break
    # entering the selector looks like ADDED, leaving it like DELETED
    assert types == ["ADDED", "DELETED", "BOOKMARK"]


async def test_selectors(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    for name, labels in [("a", {"app": "x", "tier": "web"}), ("b", {"app": "x"}), ("c", {"app": "y", "tier": "db"})]:
        await core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})

    async def names(**kw: str) -> list[str]:
        return sorted(i.metadata.name for i in (await core.list_namespaced_config_map("default", **kw)).items)

    assert await names(label_selector="app=x") == ["a", "b"]
    assert await names(label_selector="app==x,tier") == ["a"]
    # != and !key also match objects without the label, like the per-namespace kube-root-ca.crt
    assert await names(label_selector="app!=x") == ["c", "kube-root-ca.crt"]
    assert await names(label_selector="tier in (web, db)") == ["a", "c"]
    assert await names(label_selector="app notin (x),!nothing") == ["c", "kube-root-ca.crt"]
    assert await names(label_selector="!tier,app") == ["b"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    assert await names(field_selector="metadata.name!=b,metadata.namespace=default") == ["a", "c", "kube-root-ca.crt"]
    with pytest.raises(ApiException) as exc:
        await names(field_selector="spec.bogus=1")
    assert exc.value.status == 400
    page = await core.list_namespaced_config_map("default", limit=2, label_selector="app")
    assert [i.metadata.name for i in page.items] == ["a", "b"] and page.metadata._continue
    rest = await core.list_namespaced_config_map("default", limit=2, label_selector="app",
                                                 _continue=page.metadata._continue)
    assert [i.metadata.name for i in rest.items] == ["c"] and not rest.metadata._continue


async def test_patch_flavours(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", {"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {
        "containers": [{"name": "one", "image": "busybox:1", "env": [{"name": "E", "value": "1"}]},
                       {"name": "two", "image": "busybox:1"}]}})
    # strategic merge (the client's default for dict bodies on built-ins): containers merge by name
    pod = await core.patch_namespaced_pod("p", "default", {"spec": {"containers": [{"name": "two", "image": "busybox:2"}]}})
    assert [(c.name, c.image) for c in pod.spec.containers] == [("one", "busybox:1"), ("two", "busybox:2")]
    assert pod.spec.containers[0].env[0].value == "1"
    # JSON patch (list body)
    pod = await core.patch_namespaced_pod("p", "default", [{"op": "replace", "path": "/metadata/labels/a", "value": "2"},
                                                          {"op": "add", "path": "/metadata/labels/b", "value": "3"}])
    assert pod.metadata.labels == {"a": "2", "b": "3"}
    # spec changes other than images are rejected like upstream
    with pytest.raises(ApiException) as exc:
        await core.patch_namespaced_pod("p", "default", {"spec": {"restartPolicy": "Never"}})
    assert exc.value.status == 422
    # pod status writes on the main resource are ignored; status subresource writes land
    pod = await core.patch_namespaced_pod("p", "default", {"status": {"phase": "Bogus"}})
    assert pod.status.phase != "Bogus"
    co = client.CustomObjectsApi(api)
    await co.create_namespaced_custom_object(**RC, namespace="default", body=raycluster("sm"))
    import aiohttp

    # strategic merge is not allowed on custom resources
    async with aiohttp.ClientSession() as http, http.patch(
            f"{api.configuration.host}/apis/ray.io/v1/namespaces/default/rayclusters/sm",
            data="{}", headers={"Content-Type": "application/strategic-merge-patch+json"}) as r:
        assert r.status == 415 and (await r.json())["reason"] == "UnsupportedMediaType"


async def test_crd_created_through_api_is_served(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    await ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.acme.io"},
        "spec": {"group": "acme.io", "scope": "Cluster",
                 "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]}})
    co = client.CustomObjectsApi(api)
    g = await co.create_cluster_custom_object("acme.io", "v1", "gadgets", {
        "apiVersion": "acme.io/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"n": 1}})
    assert g["metadata"]["generation"] == 1 and "namespace" not in g["metadata"]
    g = await co.patch_cluster_custom_object_status("acme.io", "v1", "gadgets", "g1", {"status": {"ok": True}}, **MERGE)
    assert g["status"] == {"ok": True}
    # deleting the CRD waits for its objects (and their finalizers), then the CRD and its API go away
    await co.patch_cluster_custom_object("acme.io", "v1", "gadgets", "g1", {"metadata": {"finalizers": ["x/y"]}},
                                         **MERGE)
    crd = await ext.read_custom_resource_definition("gadgets.acme.io")
    assert crd.metadata.finalizers == ["customresourcecleanup.apiextensions.k8s.io"]
    await ext.delete_custom_resource_definition("gadgets.acme.io")

    async def g1_deleting() -> bool:
        g = await co.get_cluster_custom_object("acme.io", "v1", "gadgets", "g1")
        return bool(g["metadata"].get("deletionTimestamp"))

    await eventually(g1_deleting)
    assert (await ext.read_custom_resource_definition("gadgets.acme.io")).metadata.deletion_timestamp
    await co.patch_cluster_custom_object("acme.io", "v1", "gadgets", "g1", {"metadata": {"finalizers": None}},
                                         **MERGE)

    async def crd_gone() -> bool:
        try:
            await ext.read_custom_resource_definition("gadgets.acme.io")
            return False
        except ApiException as exc:
            return exc.status == 404

    await eventually(crd_gone)
    with pytest.raises(ApiException) as exc:
        await co.get_cluster_custom_object("acme.io", "v1", "gadgets", "g1")
    assert exc.value.status == 404


async def test_crd_schema_prunes_defaults_and_validates(server: RunningApiServer, api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "port": {"x-kubernetes-int-or-string": True},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}
    await ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.acme.io"},
        "spec": {"group": "acme.io", "scope": "Namespaced", "names": {"kind": "Thing", "plural": "things"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": schema}}]}})
    co = client.CustomObjectsApi(api)
    args = {"group": "acme.io", "version": "v1", "namespace": "default", "plural": "things"}

    def thing(name: str, spec: dict) -> dict:
        return {"apiVersion": "acme.io/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec}

    t = await co.create_namespaced_custom_object(**args, body=thing("t", {"size": 2, "port": "http", "bogus": 1,
                                                                           "free": {"any": {"thing": 1}}}))
    assert t["spec"] == {"size": 2, "mode": "a", "port": "http", "free": {"any": {"thing": 1}}}  # pruned + defaulted
    t = await co.patch_namespaced_custom_object_status(**args, name="t", body={"status": {"phase": "Up", "junk": 1}},
                                                       **MERGE)
    assert t["status"] == {"phase": "Up"}
    with pytest.raises(ApiException) as exc:
        await co.create_namespaced_custom_object(**args, body=thing("bad", {"size": "big", "mode": "c"}))
    body = status_of(exc.value)
    assert exc.value.status == 422 and {c["field"] for c in body["details"]["causes"]} == {"spec.size", "spec.mode"}
    assert 'spec.size in body must be of type integer: "string"' in body["message"]  # the JSON type, as upstream
    with pytest.raises(ApiException) as exc:
        await co.create_namespaced_custom_object(**args, body=thing("bad", {"mode": "b"}))
    assert exc.value.status == 422 and 'spec.size: Required value' in status_of(exc.value)["message"]
    import aiohttp

    # kubectl's fieldValidation=Strict: unknown fields are a 400
    async with aiohttp.ClientSession() as http, http.post(
            f"{server.url}/apis/acme.io/v1/namespaces/default/things?fieldValidation=Strict",
            json=thing("s", {"size": 1, "bogus": 1})) as r:
        assert r.status == 400
        assert 'strict decoding error: unknown field "spec.bogus"' in (await r.json())["message"]


async def test_events_api_groups_share_storage(api: client.ApiClient) -> None:
    core, ev = client.CoreV1Api(api), client.EventsV1Api(api)
    await ev.create_namespaced_event("default", {
        "metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Created",
        "type": "Normal", "action": "Create", "note": "made it", "reportingController": "raybus",
        "reportingInstance": "raybus-1", "regarding": {"kind": "RayCluster", "name": "rc", "namespace": "default"}})
    got = await core.read_namespaced_event("e1", "default")
    assert (got.message, got.involved_object.name, got.reporting_component) == ("made it", "rc", "raybus")
    # (eventTime is required by the client's events.k8s.io model; core events without it break
    # EventsV1Api lists against real clusters too)
    # (with eventTime set, core/v1 Events need reportingComponent/Instance and action too, as upstream)
    await core.create_namespaced_event("default", {"metadata": {"name": "e2"}, "message": "from core",
                                                   "eventTime": "2026-01-01T00:00:01.000000Z",
                                                   "reportingComponent": "raybus", "reportingInstance": "raybus-1",
                                                   "action": "Create",
                                                   "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "X"})
    items = {e.metadata.name: e for e in (await ev.list_namespaced_event("default")).items}
    assert items["e2"].note == "from core" and items["e2"].regarding.name == "p" and items["e1"].note == "made it"
    listed = await core.list_namespaced_event("default", field_selector="involvedObject.name=rc")
    assert [e.metadata.name for e in listed.items] == ["e1"]


async def test_metadata_validation_matches_upstream(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "l", "labels": {"k": "v" * 64}}})
    assert exc.value.status == 422 and "must be no more than 63 characters" in status_of(exc.value)["message"]
    with pytest.raises(ApiException) as exc:  # services are DNS-1035 labels: no leading digit
        await core.create_namespaced_service("default", {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 1}]}})
    assert exc.value.status == 422 and "DNS-1035" in status_of(exc.value)["message"]
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_service("default", {"metadata": {"name": "two"}, "spec": {
            "ports": [{"port": 1}, {"port": 2}]}})
    assert exc.value.status == 422 and status_of(exc.value)["details"]["causes"][0]["field"] == "spec.ports[0].name"
    cm = await core.create_namespaced_config_map("default", {"metadata": {"generateName": "x" * 70}})
    assert len(cm.metadata.name) == 63
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "rv", "resourceVersion": "5"}})
    assert exc.value.status == 500 and "resourceVersion should not be set" in status_of(exc.value)["message"]
    # CRs without a status subresource: status is ordinary content and bumps generation
    co = client.CustomObjectsApi(api)
    w = {"group": "example.com", "version": "v1", "namespace": "default", "plural": "widgets"}
    await co.create_namespaced_custom_object(**w, body={"apiVersion": "example.com/v1", "kind": "Widget",
                                                        "metadata": {"name": "w"}, "status": {"a": 1}})
    got = await co.patch_namespaced_custom_object(**w, name="w", body={"status": {"a": 2}}, **MERGE)
    assert got["status"] == {"a": 2} and got["metadata"]["generation"] == 2

    # immutable ConfigMaps reject data changes; oversized annotations are rejected
    await core.create_namespaced_config_map("default", {"metadata": {"name": "frozen"}, "immutable": True,
                                                        "data": {"a": "1"}})
    with pytest.raises(ApiException) as exc:
        await core.patch_namespaced_config_map("frozen", "default", {"data": {"a": "2"}})
    assert exc.value.status == 422 and "field is immutable when `immutable` is set" in status_of(exc.value)["message"]
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "big", "annotations": {
            "a": "x" * 262145}}})
    assert exc.value.status == 422
    # jobs need restartPolicy OnFailure/Never; configmap keys are restricted; one controller ref at most
    batch = client.BatchV1Api(api)
    with pytest.raises(ApiException) as exc:
        await batch.create_namespaced_job("default", {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}]}}}})
    assert exc.value.status == 422 and status_of(exc.value)["message"] == (
        'Job.batch "j" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"')
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "k"}, "data": {"bad key": "v"}})
    assert exc.value.status == 422
    two = [{"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": n, "controller": True} for n in ("a", "b")]
    with pytest.raises(ApiException) as exc:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "k", "ownerReferences": two}})
    assert exc.value.status == 422 and "Only one reference can have Controller set to true" in exc.value.body
