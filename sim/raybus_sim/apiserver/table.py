"""meta.k8s.io/v1 Table rendering for `kubectl get` (server-side printing), incl. CRD printer columns."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

from .errors import ApiError
from .resources import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, str, int, Callable[[Obj], Any]]  # name, type, format, priority, getter


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if h < 24 * 365 * 2:
        return f"{d}d"
    y = d // 365
    return f"{y}y{d % 365}d" if h < 24 * 365 * 8 and d % 365 else f"{y}y"


def age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    try:
        t = dt.datetime.fromisoformat(ts)
    except ValueError:
        return "<invalid>"
    return human_duration((dt.datetime.now(dt.UTC) - t).total_seconds())


_TOKEN = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([\w.]+)\s*==\s*[\"']([^\"']*)[\"']\)\]|\[\*\]")


def jsonpath(obj: Any, path: str) -> Any:
    """The JSONPath subset CRD printer columns use: .a.b, [n], [*] (first), [?(@.k=="v")]."""
    path = path.strip().lstrip("{").rstrip("}")
    path = path.removeprefix("$")
    cur: Any = obj
    for m in _TOKEN.finditer(path):
        if cur is None:
            return None
        field, idx, fkey, fval = m.groups()
        if field is not None:
            cur = cur.get(field) if isinstance(cur, dict) else None
        elif idx is not None:
            cur = cur[int(idx)] if isinstance(cur, list) and int(idx) < len(cur) else None
        elif fkey is not None:
            hit = None
            for item in cur if isinstance(cur, list) else []:
                if str(jsonpath(item, "." + fkey)) == fval:
                    hit = item
                    break
            cur = hit
        else:
            cur = cur[0] if isinstance(cur, list) and cur else None
    return cur


def _pod_status(o: Obj) -> str:
    st = o.get("status") or {}
    if o["metadata"].get("deletionTimestamp"):
        return "Terminating"
    reason = st.get("reason") or st.get("phase") or "Unknown"
    for cs in st.get("initContainerStatuses") or []:
        state = cs.get("state") or {}
        if "terminated" in state and state["terminated"].get("exitCode", 0) != 0:
            return "Init:" + (state["terminated"].get("reason") or "Error")
        if "waiting" in state or "running" in state:
            return f"Init:{state.get('waiting', {}).get('reason', 'Running')}" if "waiting" in state else "Init:0/1"
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state and state["terminated"].get("reason") and reason == "Running":
            reason = state["terminated"]["reason"]
    return reason


def _pod_ready(o: Obj) -> str:
    cs = (o.get("status") or {}).get("containerStatuses") or []
    total = len((o.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for c in cs if c.get('ready'))}/{total}"


def _ports(o: Obj) -> str:
    ports = (o.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _name(o: Obj) -> str:
    return str(o["metadata"]["name"])


def _age(o: Obj) -> str:
    return age(o["metadata"].get("creationTimestamp"))


NAME: Column = ("Name", "string", "name", 0, _name)
AGE: Column = ("Age", "string", "", 0, _age)
BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "pods": [NAME, ("Ready", "string", "", 0, _pod_ready), ("Status", "string", "", 0, _pod_status),
             ("Restarts", "string", "", 0, lambda o: str(sum(c.get("restartCount", 0) for c in (
                 o.get("status") or {}).get("containerStatuses") or []))), AGE,
             ("IP", "string", "", 1, lambda o: (o.get("status") or {}).get("podIP") or "<none>"),
             ("Node", "string", "", 1, lambda o: (o.get("spec") or {}).get("nodeName") or "<none>")],
    "services": [NAME, ("Type", "string", "", 0, lambda o: o["spec"].get("type")),
                 ("Cluster-IP", "string", "", 0, lambda o: o["spec"].get("clusterIP") or "<none>"),
                 ("External-IP", "string", "", 0, lambda o: "<none>"), ("Port(s)", "string", "", 0, _ports), AGE],
    "nodes": [NAME, ("Status", "string", "", 0, lambda o: "Ready" if any(
                  c.get("type") == "Ready" and c.get("status") == "True"
                  for c in (o.get("status") or {}).get("conditions") or []) else "NotReady"),
              ("Roles", "string", "", 0, lambda o: ",".join(
                  k.split("/", 1)[1] for k in o["metadata"].get("labels") or {}
                  if k.startswith("node-role.kubernetes.io/")) or "<none>"), AGE,
              ("Version", "string", "", 0, lambda o: ((o.get("status") or {}).get("nodeInfo") or {}).get(
                  "kubeletVersion"))],
    "namespaces": [NAME, ("Status", "string", "", 0, lambda o: (o.get("status") or {}).get("phase")), AGE],
    "configmaps": [NAME, ("Data", "integer", "", 0, lambda o: len(o.get("data") or {})
                          + len(o.get("binaryData") or {})), AGE],
    "secrets": [NAME, ("Type", "string", "", 0, lambda o: o.get("type")),
                ("Data", "integer", "", 0, lambda o: len(o.get("data") or {})), AGE],
    "jobs.batch": [NAME, ("Completions", "string", "", 0, lambda o: f"{(o.get('status') or {}).get('succeeded', 0)}"
                          f"/{(o.get('spec') or {}).get('completions', 1)}"), AGE],
    "events": [("Last Seen", "string", "", 0, lambda o: age(o.get("lastTimestamp") or o.get("deprecatedLastTimestamp")
                                                           or o["metadata"].get("creationTimestamp"))),
               ("Type", "string", "", 0, lambda o: o.get("type")),
               ("Reason", "string", "", 0, lambda o: o.get("reason")),
               ("Object", "string", "", 0, lambda o: "{}/{}".format(
                   str((o.get("involvedObject") or o.get("regarding") or {}).get("kind", "")).lower(),
                   (o.get("involvedObject") or o.get("regarding") or {}).get("name", ""))),
               ("Message", "string", "", 0, lambda o: o.get("message") or o.get("note"))],
    "customresourcedefinitions.apiextensions.k8s.io": [
        NAME, ("Created At", "date", "", 0, lambda o: o["metadata"].get("creationTimestamp"))],
}


def _getter(path: str, ctype: str) -> Callable[[Obj], Any]:
    def get(obj: Obj) -> Any:
        value = jsonpath(obj, path)
        if ctype == "date":  # the server renders dates as ages, as upstream's table convertor does
            return age(value) if isinstance(value, str) else None
        return value

    return get


def columns_for(rt: ResourceType) -> list[Column]:
    if rt.custom and rt.printer_columns:
        cols: list[Column] = [NAME]
        for c in rt.printer_columns:
            path, ctype = c["jsonPath"], c.get("type", "string")
            cols.append((c["name"], ctype, c.get("format", ""), c.get("priority", 0), _getter(path, ctype)))
        return cols
    return BUILTIN_COLUMNS.get(rt.gr, [NAME, AGE])


def to_table(rt: ResourceType, objs: list[Obj], rv: str, *, with_defs: bool = True) -> Obj:
    cols = columns_for(rt)
    rows = [{
        "cells": [getter(o) for *_, getter in cols],
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]},
    } for o in objs]
    table: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
                  "columnDefinitions": [], "rows": rows}
    if with_defs:
        table["columnDefinitions"] = [
            {"name": n, "type": t, "format": f, "description": n, "priority": p} for n, t, f, p, _ in cols]
    return table


# --- meta.k8s.io/v1 PartialObjectMetadata: client-go's metadata client (`as=` in Accept) ---------------
def wants_metadata(accept: str, *, collection: bool) -> bool:
    """Whether the Accept header asks for metadata only. A list must ask for
    PartialObjectMetadataList and a get or watch for PartialObjectMetadata; the other form is 406."""
    if "as=PartialObjectMetadata" not in accept:
        return False
    listed = "as=PartialObjectMetadataList" in accept
    if listed != collection or "g=meta.k8s.io" not in accept or "v=v1" not in accept:
        raise ApiError(406, "NotAcceptable", "only the following media types are accepted: application/json, "
                       "application/yaml, application/vnd.kubernetes.protobuf")
    return True


def partial_metadata(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def partial_metadata_list(items: list[Obj], meta: Obj) -> Obj:
    return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "items": [partial_metadata(o) for o in items]}
