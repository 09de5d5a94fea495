"""Fault-injection HTTP API under /sim/ (JSON in, JSON out). Routes are documented in apiserver/README.md."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aiohttp import web

from raybus.adapters.kube import KubeError
from raybus_sim.apiserver.errors import ApiError, bad_request, page_not_found

if TYPE_CHECKING:
    from .kubelet import Kubelet

_DELAY_FIELDS = {"schedule", "pull", "start", "ready", "restart", "terminate"}


def _ok(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise bad_request(f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad_request("body must be a JSON object")
    return data


async def handle(kubelet: Kubelet, request: web.Request, segs: list[str]) -> web.StreamResponse:
    try:
        return await _route(kubelet, request, segs)
    except ApiError as err:
        return _ok(err.status(), err.code)
    except KubeError as err:  # the API server's answer to a fault's own API call (evict)
        return _ok({"kind": "Status", "status": "Failure", "reason": err.reason, "message": str(err),
                    "code": err.code or 502}, err.code or 502)


async def _route(kubelet: Kubelet, request: web.Request, segs: list[str]) -> web.StreamResponse:
    method = request.method
    body = await _body(request) if method in ("POST", "PUT") else {}
    # /sim/pods/{ns}/{name}/{fail|succeed|evict}
    if len(segs) == 4 and segs[0] == "pods" and method == "POST":
        ns, name, action = segs[1], segs[2], segs[3]
        if action == "fail":
            await kubelet.fail_pod(ns, name, reason=body.get("reason"), message=body.get("message"))
        elif action == "succeed":
            await kubelet.terminate_container(ns, name, "*", exit_code=0, reason="Completed")
        elif action == "evict":
            grace = body.get("gracePeriodSeconds")
            await kubelet.api.delete_pod(ns, name, grace_s=int(grace) if grace is not None else None)
        else:
            raise page_not_found()
        return _ok({"status": "ok"})
    # /sim/pods/{ns}/{name}/containers/{container}/terminate  {"exitCode": 137, "reason": "OOMKilled"}
    if len(segs) == 6 and segs[0] == "pods" and segs[3] == "containers" and segs[5] == "terminate":
        if method != "POST":
            raise page_not_found()
        await kubelet.terminate_container(segs[1], segs[2], segs[4], exit_code=int(body.get("exitCode", 1)),
                                          reason=body.get("reason"))
        return _ok({"status": "ok"})
    # /sim/readiness-holds  POST {"namespace"?, "labelSelector"} -> {"id"}; GET; DELETE /sim/readiness-holds/{id}
    if segs and segs[0] == "readiness-holds":
        if len(segs) == 1 and method == "POST":
            hold_id = await kubelet.add_hold(body.get("namespace"), body.get("labelSelector", ""))
            return _ok({"id": hold_id}, 201)
        if len(segs) == 1 and method == "GET":
            return _ok({"items": [{"id": i, "namespace": h.namespace, "labelSelector": h.selector}
                                  for i, h in kubelet.holds.items()]})
        if len(segs) == 2 and method == "DELETE":
            await kubelet.remove_hold(int(segs[1]))
            return _ok({"status": "ok"})
    # /sim/image-pull-failures  POST {"image": "repo/img:tag" or "prefix*"} -> {"id"}; GET; DELETE .../{id}
    if segs and segs[0] == "image-pull-failures":
        if len(segs) == 1 and method == "POST":
            if not body.get("image"):
                raise bad_request("image is required")
            kubelet._hold_seq += 1
            kubelet.pull_failures[kubelet._hold_seq] = str(body["image"])
            return _ok({"id": kubelet._hold_seq}, 201)
        if len(segs) == 1 and method == "GET":
            return _ok({"items": [{"id": i, "image": img} for i, img in kubelet.pull_failures.items()]})
        if len(segs) == 2 and method == "DELETE":
            if kubelet.pull_failures.pop(int(segs[1]), None) is None:
                raise ApiError(404, "NotFound", f"image pull failure {segs[1]} not found")
            return _ok({"status": "ok"})
    # /sim/delays  GET; PUT {"namespace"?, "schedule"?, "pull"?, "start"?, "ready"?, "restart"?, "terminate"?}
    if segs == ["delays"]:
        if method == "PUT":
            unknown = set(body) - _DELAY_FIELDS - {"namespace"}
            if unknown:
                raise bad_request(f"unknown delay fields: {sorted(unknown)}")
            values = {k: float(v) for k, v in body.items() if k in _DELAY_FIELDS}
            return _ok(asdict(kubelet.set_delays(body.get("namespace"), **values)))
        if method == "GET":
            return _ok({"default": asdict(kubelet.config.delays),
                        "namespaces": {k: asdict(v) for k, v in kubelet.config.namespace_delays.items()}})
    raise page_not_found()
