"""Requests of the README's sections 8-rbac (ServiceAccount "limited" in apidiff) and 10-events."""

from __future__ import annotations

import datetime as dt
from typing import Any

from .kube_http import Answer, Api, Json, case
from .kube_runs_pods import pod

S8, S10 = "8-rbac", "10-events"
RESIZE_RULE = {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}


def role(name: str, *rules: Json) -> Json:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
            "rules": list(rules)}


async def sa_token(api: Api, name: str) -> str:
    """A ServiceAccount and a token for it from the TokenRequest API (subject to RBAC)."""
    await api.ok("serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    r = await api.req("POST", f"/api/v1/namespaces/apidiff/serviceaccounts/{name}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    assert r.code == 201, r.text
    return str(r.body["status"]["token"])


@case(S8, "SA without perms creates Role granting pods/resize patch")
async def _no_perms_role(api: Api) -> Answer:
    limited = api.as_token(await sa_token(api, "limited"))
    return (await limited.create("roles", role("resizer", RESIZE_RULE))).answer()


@case(S8, "SA allowed to create roles (not pods/resize) -> escalation")
async def _escalation(api: Api) -> Answer:
    limited = api.as_token(await sa_token(api, "limited"))
    await api.ok("roles", role("role-creator", {"apiGroups": ["rbac.authorization.k8s.io"],
                                                "resources": ["roles"], "verbs": ["create", "get", "list"]}))
    await api.ok("rolebindings", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                  "metadata": {"name": "role-creator"},
                                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                              "name": "role-creator"},
                                  "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": "apidiff"}]})
    return (await limited.create("roles", role("resizer2", RESIZE_RULE))).answer()


@case(S8, "SA lists pods without perms")
async def _list_pods(api: Api) -> Answer:
    limited = api.as_token(await sa_token(api, "limited"))
    return (await limited.req("GET", "/api/v1/namespaces/apidiff/pods")).answer()


@case(S8, "garbage token")
async def _garbage(api: Api) -> Answer:
    return (await api.as_token("not-a-token").req("GET", "/api/v1/namespaces/apidiff/pods")).answer()


@case(S8, "admin creates Role with pods/resize patch")
async def _admin_role(api: Api) -> Answer:
    r = await api.create("roles", role("resizer", RESIZE_RULE))
    return r.answer(rules=r.body.get("rules"))


@case(S8, "Role with empty verbs")
async def _empty_verbs(api: Api) -> Answer:
    return (await api.create("roles", role("badrole", {"apiGroups": [""], "resources": ["pods"], "verbs": []}))).answer()


@case(S8, "PATCH pods/resize subresource")
async def _resize(api: Api) -> Answer:
    await api.ok("pods", pod("st"))  # no resources: BestEffort
    patch = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}
    return (await api.patch("pods", "st", patch, kind="strategic", sub="resize")).answer()


# --- 10 ------------------------------------------------------------------------------------------------
NOW = dt.datetime.now(dt.UTC)
STAMP = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
MICRO = NOW.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
REF = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "gen", "namespace": "apidiff", "uid": "u-1"}


def core_event(name: str, **over: Any) -> Json:
    """What client-go's (core/v1) recorder posts."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "apidiff"},
            "involvedObject": dict(REF), "reason": "Created", "message": "Created pod x", "type": "Normal",
            "source": {"component": "raybus"}, "firstTimestamp": STAMP, "lastTimestamp": STAMP, "count": 1,
            "eventTime": None, "reportingComponent": "raybus", "reportingInstance": "raybus-1", **over}


def new_event(name: str, **over: Any) -> Json:
    """What the events.k8s.io/v1 recorder posts."""
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": "apidiff"},
            "eventTime": MICRO, "reportingController": "raybus.io/operator", "reportingInstance": "raybus-1",
            "action": "Create", "reason": "Created", "regarding": dict(REF), "note": "Created pod",
            "type": "Normal", **over}
    return {k: v for k, v in body.items() if v is not None}


@case(S10, "core/v1 Event as client-go recorder sends")
async def _core_event(api: Api) -> Answer:
    r = await api.create("events", core_event("gen.17a"))
    out = r.answer()
    out["as_v1"] = (await api.get("newevents", "gen.17a")).answer()
    out["count_patch"] = (await api.patch("events", "gen.17a", {"count": 2})).answer()
    return out


@case(S10, "events.k8s.io/v1 Event as new recorder sends")
async def _new_event(api: Api) -> Answer:
    out = (await api.create("newevents", new_event("gen.17b"))).answer()
    out["as_core"] = (await api.get("events", "gen.17b")).answer()
    return out


def _event_case(title: str, resource: str, body: Json) -> None:
    async def run(api: Api) -> Answer:
        return (await api.create(resource, body)).answer()
    case(S10, title)(run)


_event_case("events.k8s.io/v1 missing eventTime", "newevents", new_event("gen.17c", eventTime=None))
_event_case("events.k8s.io/v1 with series", "newevents", new_event("gen.17d", series={
    "count": 2, "lastObservedTime": MICRO}))
_event_case("events.k8s.io/v1 invalid type / missing reportingController", "newevents",
            new_event("gen.17e", type="Bogus", reportingController=None))
_event_case("core/v1 Event namespace mismatch with involvedObject", "events",
            core_event("gen.17f", involvedObject={**REF, "namespace": "other"}))
