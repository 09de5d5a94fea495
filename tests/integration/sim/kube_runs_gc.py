"""Requests of the README's section 5-deletion that involve ownerReferences and the garbage collector."""

from __future__ import annotations

import asyncio

from .kube_http import ABSENT, Answer, Api, _lookup, case
from .kube_runs_cr import rc
from .kube_runs_pods import pod
from .kube_runs_writes import S5, _gone, cm, owner_ref, until

FOREGROUND_DIFFERS = (
    "ambiguous row: the README does not say what dep_after_4s's boolean is. Read as 'the dependent has a "
    "deletionTimestamp', the real garbage collector had not yet deleted the blocking dependent 4 s after the "
    "owner's foreground delete; the local one deletes it at once, as upstream's GC eventually does "
    "(processDeletingDependentsItem -> attemptToDelete). Everything else in the row matches.")


@case(S5, "Foreground deletion of RayCluster with blocking dependent", differs=FOREGROUND_DIFFERS)
async def _foreground(api: Api) -> Answer:
    owner = await api.ok("rayclusters", rc("fg"))
    await api.ok("configmaps", cm("fg-dep", finalizers=["example.com/hold"],
                                  ownerReferences=[owner_ref(owner, blockOwnerDeletion=True)]))
    r = await api.delete("rayclusters", "fg", {"propagationPolicy": "Foreground"})
    out = r.answer(kind=r.body.get("kind"), has_dts=bool(_lookup(r.answer(), "metadata.deletionTimestamp")))
    await asyncio.sleep(1.0)  # the real run waited 4 s; the local GC acts within milliseconds
    dep = await api.get("configmaps", "fg-dep")
    own = await api.get("rayclusters", "fg")
    out["dep_after_4s"] = [dep.code, bool(dep.body["metadata"].get("deletionTimestamp"))]
    out["owner_after_4s"] = [own.code, own.body["metadata"].get("finalizers")]
    await api.patch("configmaps", "fg-dep", {"metadata": {"finalizers": None, "ownerReferences": [
        owner_ref(owner, blockOwnerDeletion=False)]}})
    out["owner_gone_after_release"] = await until(lambda: _gone(api, "rayclusters", "fg")) == 404
    return out


@case(S5, "Background GC: pod owned by deleted RayCluster")
async def _background(api: Api) -> Answer:
    owner = await api.ok("rayclusters", rc("bg"))
    body = pod("bg-pod")
    body["metadata"]["ownerReferences"] = [owner_ref(owner, controller=True, blockOwnerDeletion=True)]
    created = await api.create("pods", body)
    deleted = await api.delete("rayclusters", "bg")
    return {"create": created.code, "delete": deleted.code,
            "pod_gone": await until(lambda: _gone(api, "pods", "bg-pod")) == 404}


@case(S5, "Orphan deletion keeps dependent, strips ownerRef")
async def _orphan(api: Api) -> Answer:
    owner = await api.ok("configmaps", cm("orph"))
    await api.ok("configmaps", cm("orph-dep", ownerReferences=[owner_ref(owner)]))
    r = await api.delete("configmaps", "orph", {"propagationPolicy": "Orphan"})
    out = r.answer()
    out["owner_gone"] = await until(lambda: _gone(api, "configmaps", "orph")) == 404

    async def stripped() -> list[object] | None:
        dep = await api.get("configmaps", "orph-dep")
        refs = _lookup({"_obj": dep.body}, "metadata.ownerReferences")
        return [dep.code, "<absent>"] if refs is ABSENT else None
    out["dep"] = await until(stripped)
    return out


@case(S5, "dependent with dangling owner uid is collected")
async def _dangling(api: Api) -> Answer:
    created = await api.create("configmaps", cm("dangling", ownerReferences=[{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-00000000dead"}]))
    return {"create": created.code, "gone": await until(lambda: _gone(api, "configmaps", "dangling")) == 404}


@case(S5, "two controller ownerRefs")
async def _two_controllers(api: Api) -> Answer:
    a = await api.ok("rayclusters", rc("a"))
    b = await api.ok("rayclusters", rc("b"))
    refs = [{k: v for k, v in owner_ref(o, controller=True).items()} for o in (a, b)]
    return (await api.create("configmaps", cm("twoctl", ownerReferences=refs))).answer()
