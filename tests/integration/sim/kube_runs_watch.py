"""Requests of the README's section 6-watch (ConfigMaps w1..w3 labelled grp=w, pod "st")."""

from __future__ import annotations

from .kube_http import Answer, Api, case, start_watch_then
from .kube_runs_pods import pod
from .kube_runs_writes import cm

S6 = "6-watch"
SEL = {"labelSelector": "grp=w"}


async def _three(api: Api) -> str:
    for name in ("w1", "w2", "w3"):
        await api.ok("configmaps", cm(name, labels={"grp": "w"}))
    r = await api.req("GET", "/api/v1/namespaces/apidiff/configmaps", query=SEL)
    return str(r.body["metadata"]["resourceVersion"])


@case(S6, "watch rv=0 (initial state then live)")
async def _rv0(api: Api) -> Answer:
    await _three(api)
    return await api.watch("configmaps", {**SEL, "resourceVersion": "0", "timeoutSeconds": "2"})


@case(S6, "watch rv unset (initial state then live)")
async def _rv_unset(api: Api) -> Answer:
    await _three(api)

    async def touch() -> None:
        await api.patch("configmaps", "w1", {"data": {"k": "v2"}})
    return await start_watch_then(api, "configmaps", {**SEL, "timeoutSeconds": "2"}, touch, expect_initial=3)


@case(S6, "watch from list rv (no initial events)")
async def _from_list_rv(api: Api) -> Answer:
    rv = await _three(api)

    async def remove() -> None:
        await api.delete("configmaps", "w3")
    return await start_watch_then(api, "configmaps", {**SEL, "resourceVersion": rv, "timeoutSeconds": "2"}, remove)


@case(S6, "watch too-old rv=1")
async def _too_old(api: Api) -> Answer:
    await _three(api)
    return await api.watch("configmaps", {**SEL, "resourceVersion": "1", "timeoutSeconds": "2"})


@case(S6, "watch rv far in future")
async def _future(api: Api) -> Answer:
    rv = await _three(api)
    return await api.watch("configmaps", {**SEL, "resourceVersion": str(int(rv) + 1_000_000),
                                          "timeoutSeconds": "2"})


@case(S6, "watch label selector transitions (in->out->in)")
async def _transitions(api: Api) -> Answer:
    await api.ok("configmaps", cm("lt", labels={"sel": "yes"}))

    async def flip() -> None:
        for value in ("no", "yes"):
            await api.patch("configmaps", "lt", {"metadata": {"labels": {"sel": value}}})
        await api.delete("configmaps", "lt")
    return await start_watch_then(api, "configmaps", {"labelSelector": "sel=yes", "timeoutSeconds": "3"}, flip,
                                  expect_initial=1)


@case(S6, "watch allowWatchBookmarks timeoutSeconds=5")
async def _bookmarks(api: Api) -> Answer:
    rv = await _three(api)
    return await api.watch("configmaps", {**SEL, "resourceVersion": rv, "allowWatchBookmarks": "true",
                                          "timeoutSeconds": "5"})


@case(S6, "watch sendInitialEvents=true + bookmarks")
async def _initial_events_bookmarks(api: Api) -> Answer:
    await _three(api)
    return await api.watch("configmaps", {**SEL, "sendInitialEvents": "true", "allowWatchBookmarks": "true",
                                          "resourceVersionMatch": "NotOlderThan", "timeoutSeconds": "2"})


@case(S6, "watch sendInitialEvents=true without bookmarks")
async def _initial_events(api: Api) -> Answer:
    await _three(api)
    return await api.watch("configmaps", {**SEL, "sendInitialEvents": "true",
                                          "resourceVersionMatch": "NotOlderThan", "timeoutSeconds": "2"})


@case(S6, "watch timeoutSeconds=2 duration")
async def _timeout(api: Api) -> Answer:
    rv = await _three(api)
    return await api.watch("configmaps", {**SEL, "resourceVersion": rv, "timeoutSeconds": "2"})


@case(S6, "watch pods fieldSelector metadata.name")
async def _pod_by_name(api: Api) -> Answer:
    await api.ok("pods", pod("st"))
    await api.ok("pods", pod("other"))
    return await api.watch("pods", {"fieldSelector": "metadata.name=st", "timeoutSeconds": "2"})
