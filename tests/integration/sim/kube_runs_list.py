"""Requests of the README's section 7-list.

ConfigMaps pg-0..pg-4 labelled grp=pg with env a, b (+tier), c, -, a. Rows listing a whole namespace
first recreate what the real run's earlier rows had left in it (their names are in the real answers).
"""

from __future__ import annotations

import base64

from .kube_http import Answer, Api, case
from .kube_runs_cr import rc
from .kube_runs_pods import ctr, pod
from .kube_runs_writes import cm

S7 = "7-list"
PG = {"pg-0": {"env": "a"}, "pg-1": {"env": "b", "tier": "x"}, "pg-2": {"env": "c"}, "pg-3": {}, "pg-4": {"env": "a"}}
# ConfigMaps / pods of earlier rows that were still in the real run's namespace at this point.
EARLIER_CONFIGMAPS = ("badprop", "occ", "orph-dep", "w1", "w2")
EARLIER_PODS = ("a" * 64, "defaults", "v-imm", "st")


async def _pg(api: Api) -> None:
    for name, labels in PG.items():
        await api.ok("configmaps", cm(name, labels={"grp": "pg", **labels}))


async def _earlier(api: Api) -> None:
    for name in EARLIER_CONFIGMAPS:
        await api.ok("configmaps", cm(name))
    for name in EARLIER_PODS:
        created = await api.ok("pods", pod(name, ctr()))
        if name == "st":  # the row "pod status update ignores spec" made it Running
            r = await api.put("pods", "st", dict(created, status=dict(created["status"], phase="Running")),
                              sub="status")
            assert r.code == 200


@case(S7, "pagination limit=2")
async def _pages(api: Api) -> Answer:
    await _pg(api)
    pages, token = [], None
    while True:
        query = {"labelSelector": "grp=pg", "limit": "2", **({"continue": token} if token else {})}
        r = await api.req("GET", "/api/v1/namespaces/apidiff/configmaps", query=query)
        meta = r.body["metadata"]
        token = meta.get("continue")
        pages.append([r.code, [i["metadata"]["name"] for i in r.body["items"]], meta.get("remainingItemCount"),
                      bool(token)])
        if not token or len(pages) > 5:
            return {"pages": pages}


@case(S7, "continue token with a different labelSelector")
async def _continue_other_selector(api: Api) -> Answer:
    await _pg(api)
    first = await api.req("GET", "/api/v1/namespaces/apidiff/configmaps", query={"labelSelector": "grp=pg",
                                                                                 "limit": "2"})
    return await api.list_names("configmaps", {"labelSelector": "grp=pg,env", "limit": "2",
                                               "continue": first.body["metadata"]["continue"]})


@case(S7, "garbage continue token")
async def _garbage_continue(api: Api) -> Answer:
    token = base64.urlsafe_b64encode(b"\x81garbage").decode().rstrip("=")
    return await api.list_names("configmaps", {"limit": "2", "continue": token})


@case(S7, "list items carry kind/apiVersion?")
async def _item_kinds(api: Api) -> Answer:
    await _pg(api)
    await api.ok("rayclusters", rc("gen"))
    cms = (await api.req("GET", "/api/v1/namespaces/apidiff/configmaps")).body
    rcs = (await api.req("GET", "/apis/ray.io/v1/namespaces/apidiff/rayclusters")).body
    return {"cm_item_kind": cms["items"][0].get("kind", "<absent>"), "list_apiVersion": cms["apiVersion"],
            "list_kind": cms["kind"], "rc_item_kind": rcs["items"][0].get("kind", "<absent>"),
            "rc_list_kind": rcs["kind"]}


def _selector_case(title: str, resource: str, query: dict[str, str], *, earlier: bool = False) -> None:
    async def run(api: Api) -> Answer:
        await _pg(api)
        if earlier:
            await _earlier(api)
        if resource == "rayclusters":
            await api.ok("rayclusters", rc("gen"))
            await api.ok("rayclusters", rc("other"))
        return await api.list_names(resource, query)
    case(S7, title)(run)


for _sel in ("grp=pg,env in (a,b)", "grp=pg,env notin (a)", "grp=pg,!env", "grp=pg,tier", "grp=pg,env!=a",
             "env in (a", "grp=PG!", "grp==pg,env=a"):
    _selector_case(f"labelSelector '{_sel}'", "configmaps", {"labelSelector": _sel})
_selector_case("fieldSelector 'metadata.name=pg-1' on configmaps", "configmaps",
               {"fieldSelector": "metadata.name=pg-1"})
_selector_case("fieldSelector 'metadata.name!=pg-1,metadata.namespace=apidiff' on configmaps", "configmaps",
               {"fieldSelector": "metadata.name!=pg-1,metadata.namespace=apidiff"}, earlier=True)
for _sel in ("status.phase=Pending", "status.phase!=Pending", "spec.foo=bar", "spec.nodeName=",
             "metadata.name in (st)"):
    _selector_case(f"fieldSelector '{_sel}' on pods", "pods", {"fieldSelector": _sel}, earlier=True)
_selector_case("fieldSelector 'data.k=v' on configmaps", "configmaps", {"fieldSelector": "data.k=v"})
_selector_case("fieldSelector 'involvedObject.kind=Pod' on events", "events",
               {"fieldSelector": "involvedObject.kind=Pod"})
_selector_case("fieldSelector 'metadata.name=gen' on rayclusters", "rayclusters",
               {"fieldSelector": "metadata.name=gen"})
_selector_case("fieldSelector 'spec.suspend=true' on rayclusters", "rayclusters",
               {"fieldSelector": "spec.suspend=true"})


@case(S7, "list resourceVersion=0 / resourceVersionMatch=Exact without rv")
async def _rv_match(api: Api) -> Answer:
    await _pg(api)
    rv0 = await api.list_names("configmaps", {"labelSelector": "grp=pg", "resourceVersion": "0"})
    exact = await api.req("GET", "/api/v1/namespaces/apidiff/configmaps", query={"resourceVersionMatch": "Exact"})
    return {"rv0": [rv0["code"], len(rv0.get("names") or [])], "exact_no_rv": exact.answer()}


@case(S7, "get with resourceVersion=1 (old)")
async def _get_old_rv(api: Api) -> Answer:
    await _pg(api)
    return (await api.get("configmaps", "pg-0", query={"resourceVersion": "1"})).answer()
