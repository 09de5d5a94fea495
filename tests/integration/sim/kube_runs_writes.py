"""Requests of the README's sections 4-concurrency and 5-deletion."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .kube_http import Answer, Api, Json, _lookup, case
from .kube_runs_cr import rc
from .kube_runs_pods import ctr, pod

S4, S5 = "4-concurrency", "5-deletion"


def cm(name: str, **meta: Any) -> Json:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"k": "v"}}


async def until(probe: Callable[[], Awaitable[Any]], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await probe()
        if got or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.02)


async def _occ(api: Api) -> tuple[Json, Json]:
    """The ConfigMap "occ" and a newer version of it (the first one is stale)."""
    first = await api.ok("configmaps", cm("occ"))
    newer = await api.patch("configmaps", "occ", {"data": {"k": "v2"}})
    assert newer.code == 200
    return first, newer.body


@case(S4, "PUT with stale resourceVersion")
async def _put_stale(api: Api) -> Answer:
    stale, _ = await _occ(api)
    return (await api.put("configmaps", "occ", dict(stale, data={"k": "v3"}))).answer()


@case(S4, "PUT without resourceVersion (unconditional) on configmap")
async def _put_unconditional(api: Api) -> Answer:
    stale, _ = await _occ(api)
    stale["metadata"].pop("resourceVersion")
    return (await api.put("configmaps", "occ", dict(stale, data={"k": "v3"}))).answer()


@case(S4, "PUT with wrong metadata.uid")
async def _put_wrong_uid(api: Api) -> Answer:
    _, cur = await _occ(api)
    cur["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    return (await api.put("configmaps", "occ", cur)).answer()


@case(S4, "merge PATCH with stale resourceVersion")
async def _patch_stale(api: Api) -> Answer:
    stale, _ = await _occ(api)
    body = {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}, "data": {"k": "v3"}}
    return (await api.patch("configmaps", "occ", body)).answer()


@case(S4, "merge PATCH with wrong uid")
async def _patch_wrong_uid(api: Api) -> Answer:
    await _occ(api)
    body = {"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}, "data": {"k": "v3"}}
    return (await api.patch("configmaps", "occ", body)).answer()


@case(S4, "PUT no-op keeps resourceVersion")
async def _put_noop(api: Api) -> Answer:
    _, cur = await _occ(api)
    r = await api.put("configmaps", "occ", cur)
    return r.answer(rv_same=r.body["metadata"]["resourceVersion"] == cur["metadata"]["resourceVersion"])


def _deployment() -> Json:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dep"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "dep"}}, "template": {
            "metadata": {"labels": {"app": "dep"}},
            "spec": {"containers": [ctr("a", "busybox:1", env=[{"name": "E1", "value": "1"}]),
                                    ctr("b", "busybox:1")]}}}}


def _containers(r: Any) -> Answer:
    if r.code != 200:
        return r.answer()  # type: ignore[no-any-return]
    return {"code": 200, "generation": r.body["metadata"].get("generation"), "containers": [
        [c["name"], c["image"], [e["name"] for e in c.get("env") or []], c.get("imagePullPolicy")]
        for c in r.body["spec"]["template"]["spec"]["containers"]], "_obj": r.body}


def _deployment_patch(title: str, body: Any, kind: str) -> None:
    async def run(api: Api) -> Answer:
        await api.ok("deployments", _deployment())
        r = await api.patch("deployments", "dep", body, kind=kind)
        return r.answer() if r.code != 200 else _containers(r)
    case(S4, title)(run)


_TEMPLATE = ("spec", "template", "spec", "containers")
_deployment_patch("strategic patch on deployment containers", {"spec": {"template": {"spec": {"containers": [
    {"name": "a", "image": "busybox:2", "env": [{"name": "E2", "value": "2"}]}]}}}}, "strategic")
_deployment_patch("merge patch on deployment containers", {"spec": {"template": {"spec": {"containers": [
    {"name": "a", "image": "busybox:2"}]}}}}, "merge")
_deployment_patch("json patch on deployment containers", [
    {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "busybox:2"},
    {"op": "add", "path": "/spec/template/spec/containers/-", "value": ctr("c", "busybox:3")}], "json")
_deployment_patch("strategic-delete patch on deployment containers", {"spec": {"template": {"spec": {
    "containers": [{"name": "b", "$patch": "delete"}]}}}}, "strategic")
_deployment_patch("json-test-fail patch on deployment containers",
                  [{"op": "test", "path": "/spec/replicas", "value": 99}], "json")


@case(S4, "strategic patch on RayCluster (CR)")
async def _strategic_cr(api: Api) -> Answer:
    await api.ok("rayclusters", rc("gen"))
    return (await api.patch("rayclusters", "gen", {"metadata": {"labels": {"a": "b"}}}, kind="strategic")).answer()


@case(S4, "apply-patch without fieldManager")
async def _apply_no_manager(api: Api) -> Answer:
    return (await api.patch("configmaps", "ssa", cm("ssa"), kind="apply")).answer()


@case(S4, "RayCluster generation: create/spec/label/status changes")
async def _rc_generation(api: Api) -> Answer:
    created = await api.create("rayclusters", rc("gen"))
    out: Answer = {"create": [created.code, _lookup(created.answer(), "metadata.generation"),
                              _lookup(created.answer(), "status")]}
    r = await api.patch("rayclusters", "gen", {"spec": {"rayVersion": "2.46.0"}})
    out["spec"] = [r.code, r.body["metadata"]["generation"]]
    r = await api.patch("rayclusters", "gen", {"metadata": {"labels": {"touched": "yes"}}})
    out["meta"] = [r.code, r.body["metadata"]["generation"]]
    cur = r.body
    no_rv = dict(cur, metadata={k: v for k, v in cur["metadata"].items() if k != "resourceVersion"})
    out["put-no-rv"] = (await api.put("rayclusters", "gen", no_rv)).answer()
    r = await api.patch("rayclusters", "gen", {"status": {"state": "ready"}}, sub="status")
    out["status"] = [r.code, r.body["metadata"]["generation"], r.body["status"]["state"]]
    r = await api.patch("rayclusters", "gen", {"status": {"state": "failed"}})
    out["status-via-main"] = [r.code, r.body["metadata"]["generation"], r.body["status"]["state"]]
    r = await api.patch("rayclusters", "gen", {"spec": {"suspend": True}, "status": {"state": "suspended"}},
                        sub="status")
    out["spec-via-status"] = [r.code, r.body["metadata"]["generation"], _lookup({"_obj": r.body}, "spec.suspend"),
                              r.body["status"]["state"]]
    return out


@case(S4, "RayCluster observedGeneration-like status PUT with stale rv")
async def _rc_status_stale(api: Api) -> Answer:
    stale = await api.ok("rayclusters", rc("gen"))
    assert (await api.patch("rayclusters", "gen", {"metadata": {"labels": {"x": "y"}}})).code == 200
    return (await api.put("rayclusters", "gen", dict(stale, status={"state": "ready"}), sub="status")).answer()


@case(S4, "pod status update ignores spec; pod update ignores status")
async def _pod_status_split(api: Api) -> Answer:
    created = await api.ok("pods", pod("st"))
    body = dict(created, spec=dict(created["spec"], activeDeadlineSeconds=30),
                status=dict(created["status"], phase="Running"))
    r = await api.put("pods", "st", body, sub="status")
    out: Answer = {"status": [r.code, r.body["status"]["phase"],
                              _lookup({"_obj": r.body}, "spec.activeDeadlineSeconds")]}
    r = await api.put("pods", "st", dict(r.body, status=dict(r.body["status"], phase="Failed")))
    out["main"] = [r.code, r.body["status"]["phase"]]
    out["generation"] = r.body["metadata"].get("generation")
    return out


# --- 5 -------------------------------------------------------------------------------------------------
def _deleted(r: Any) -> Answer:
    return r.answer(kind=r.body.get("kind"))  # type: ignore[no-any-return]


@case(S5, "DELETE object with finalizer")
async def _delete_with_finalizer(api: Api) -> Answer:
    await api.ok("configmaps", cm("fin", finalizers=["example.com/x"]))
    first = await api.delete("configmaps", "fin")
    out = _deleted(first)
    out["get"] = (await api.get("configmaps", "fin")).code
    out["add-finalizer-while-deleting"] = (await api.patch("configmaps", "fin", {"metadata": {
        "finalizers": ["example.com/x", "example.com/y"]}})).answer()
    out["second-delete"] = _deleted(await api.delete("configmaps", "fin"))
    out["remove-finalizer"] = _deleted(await api.patch("configmaps", "fin", {"metadata": {"finalizers": None}}))
    out["after"] = await until(lambda: _gone(api, "configmaps", "fin"))
    return out


async def _gone(api: Api, resource: str, name: str) -> int | None:
    code = (await api.get(resource, name)).code
    return code if code == 404 else None


@case(S5, "DELETE configmap (no finalizer) response kind")
async def _delete_cm(api: Api) -> Answer:
    await api.ok("configmaps", cm("plain"))
    return (await api.delete("configmaps", "plain")).answer()


@case(S5, "DELETE RayCluster (no finalizer) response kind")
async def _delete_rc(api: Api) -> Answer:
    await api.ok("rayclusters", rc("del"))
    return (await api.delete("rayclusters", "del")).answer()


@case(S5, "DELETE pod (unbound) response")
async def _delete_pod(api: Api) -> Answer:
    await api.ok("pods", pod("del"))
    out = _deleted(await api.delete("pods", "del"))
    out["after"] = (await api.get("pods", "del")).code
    return out


@case(S5, "DELETE pod with finalizer: grace period")
async def _delete_pod_finalizer(api: Api) -> Answer:
    body = pod("delf")
    body["metadata"]["finalizers"] = ["example.com/x"]
    await api.ok("pods", body)
    return _deleted(await api.delete("pods", "delf"))


def _precondition_case(title: str, pre: Callable[[Json], Json], relaxed: dict[str, Any] | None = None) -> None:
    async def run(api: Api) -> Answer:
        created = await api.ok("configmaps", cm("pre"))
        return (await api.delete("configmaps", "pre", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                        "preconditions": pre(created)})).answer()
    case(S5, title, relaxed=relaxed)(run)


_precondition_case("DELETE with wrong uid precondition", lambda _: {"uid": "00000000-0000-0000-0000-000000000000"})
# The record's resourceVersion was 454 on the real run; any server has its own.
_precondition_case("DELETE with wrong resourceVersion precondition", lambda _: {"resourceVersion": "1"}, {
    "msg": 'Operation cannot be fulfilled on ConfigMap "pre": the ResourceVersion in the precondition (1) does not '
           "match the ResourceVersion in record (<rv>). The object might have been modified"})
_precondition_case("DELETE with matching preconditions", lambda o: {
    "uid": o["metadata"]["uid"], "resourceVersion": o["metadata"]["resourceVersion"]})


@case(S5, "DELETE nonexistent")
async def _delete_missing(api: Api) -> Answer:
    return (await api.delete("configmaps", "nonexistent")).answer()


@case(S5, "DELETE invalid propagationPolicy")
async def _delete_bad_policy(api: Api) -> Answer:
    await api.ok("configmaps", cm("badprop"))
    return (await api.delete("configmaps", "badprop", {"propagationPolicy": "Sometimes"})).answer()


def owner_ref(owner: Json, **kw: Any) -> Json:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], **kw}
