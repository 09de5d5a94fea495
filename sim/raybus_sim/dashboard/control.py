"""Control API for tests and demos: JSON under ``/sim/dashboards``.

=========================================================  ============================================
``GET    /sim/dashboards``                                  clusters with head state, job/app counts
``GET    /sim/dashboards/requests``                         request counters of every cluster
``DELETE /sim/dashboards/requests``                         reset all counters
``POST   /sim/dashboards/{ns}/{c}/head``                    ``{"up": bool, "keep_state": bool}``
``GET    /sim/dashboards/{ns}/{c}/requests``                ``{"total": n, "GET /api/jobs/{id}": n, ...}``
``DELETE /sim/dashboards/{ns}/{c}/requests``                reset that cluster's counters
``PUT    /sim/dashboards/{ns}/{c}/settings``                ClusterSettings fields, e.g. ``{"job_pending_s": 0.1}``
``POST   /sim/dashboards/{ns}/{c}/faults``                  ``{"kind": timeout|invalid_json|html_502|html_200|reset,
                                                            "count": N, "sleep_s": 3, "path_contains": "/api/jobs"}``
``DELETE /sim/dashboards/{ns}/{c}/faults``                  clear faults
``PUT    /sim/dashboards/{ns}/{c}/jobs/{id}/plan``          ``{"outcome": SUCCEEDED|FAILED, "exit_code", "pending_s",
                                                            "running_s" (null = hang), "finish_now": bool}``; for an
                                                            id not yet submitted the plan applies at submission
``PUT    /sim/dashboards/{ns}/scripts``                     ``{"<path>": plan, ...}``: a submission whose entrypoint
                                                            names the path starts with that plan (any cluster of ns)
``POST   /sim/dashboards/{ns}/{c}/drivers``                 add a DRIVER job ``{"entrypoint", "running_s"}`` (200_*)
``PUT    /sim/dashboards/{ns}/{c}/serve/apps/{app}/plan``   next deploy: ``{"deploy_s", "fail": import|ctor, "deployments": [names]}``
``PUT    /sim/dashboards/{ns}/{c}/serve/apps/{app}/status`` ``{"status": "UNHEALTHY"|..|null, "message": str|null}``
``PUT    /sim/dashboards/{ns}/{c}/serve/proxy``             ``{"healthy": bool}`` (proxy ``/-/healthz`` 200 or 503)
=========================================================  ============================================

Control requests are never counted and never hit by faults.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from raybus_sim.dashboard.jobs import JobPlan, SimJob
from raybus_sim.dashboard.registry import FAULT_KINDS, ClusterState, DashboardRegistry, Fault
from raybus_sim.dashboard.serve import APP_STATUSES, AppPlan


def _bad(message: str) -> web.Response:
    return web.json_response({"error": message}, status=400)


async def _body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    data = await request.json()
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text="control API bodies are JSON objects")
    return data


def _counts(state: ClusterState) -> dict[str, int]:
    return dict(state.requests)


def add_control_routes(app: web.Application, registry: DashboardRegistry) -> None:
    routes = web.RouteTableDef()
    base = "/sim/dashboards/{ns}/{cluster}"

    def state_of(request: web.Request) -> ClusterState:
        return registry.cluster(request.match_info["ns"], request.match_info["cluster"])

    @routes.get("/sim/dashboards")
    async def overview(request: web.Request) -> web.Response:
        now = registry.clock()
        return web.json_response(
            {
                "clusters": [
                    {
                        "namespace": s.namespace,
                        "name": s.name,
                        "up": s.up,
                        "session": s.session,
                        "jobs": len(s.jobs.listing(now)),
                        "apps": len(s.serve.apps),
                    }
                    for s in registry.clusters()
                ]
            }
        )

    @routes.get("/sim/dashboards/requests")
    async def all_requests(request: web.Request) -> web.Response:
        return web.json_response({f"{s.namespace}/{s.name}": _counts(s) for s in registry.clusters()})

    @routes.delete("/sim/dashboards/requests")
    async def reset_all(request: web.Request) -> web.Response:
        for s in registry.clusters():
            s.requests.clear()
        return web.json_response({"reset": True})

    @routes.post(base + "/head")
    async def head(request: web.Request) -> web.Response:
        body = await _body(request)
        ns, name = request.match_info["ns"], request.match_info["cluster"]
        if body.get("up", True):
            registry.head_up(ns, name, keep_state=bool(body.get("keep_state", False)))
        else:
            registry.head_down(ns, name)
        return web.json_response({"up": registry.is_up(ns, name)})

    @routes.get(base + "/requests")
    async def requests(request: web.Request) -> web.Response:
        return web.json_response(_counts(state_of(request)))

    @routes.delete(base + "/requests")
    async def reset(request: web.Request) -> web.Response:
        state_of(request).requests.clear()
        return web.json_response({"reset": True})

    @routes.put(base + "/settings")
    async def settings(request: web.Request) -> web.Response:
        state = state_of(request)
        try:
            state.settings.update(await _body(request))
        except (ValueError, TypeError) as exc:
            return _bad(str(exc))
        return web.json_response(vars(state.settings))

    @routes.post(base + "/faults")
    async def add_fault(request: web.Request) -> web.Response:
        body = await _body(request)
        if body.get("kind") not in FAULT_KINDS:
            return _bad(f"kind must be one of {FAULT_KINDS}")
        sleep = body.get("sleep_s")
        fault = Fault(
            kind=str(body["kind"]),
            count=int(body.get("count", 1)),
            sleep_s=None if sleep is None else float(sleep),
            path_contains=str(body.get("path_contains", "")),
        )
        state_of(request).faults.append(fault)
        return web.json_response({"queued": len(state_of(request).faults)})

    @routes.delete(base + "/faults")
    async def clear_faults(request: web.Request) -> web.Response:
        state_of(request).faults.clear()
        return web.json_response({"queued": 0})

    @routes.put(base + "/jobs/{job}/plan")
    async def job_plan(request: web.Request) -> web.Response:
        state, body, now = state_of(request), await _body(request), registry.clock()
        job = state.jobs.find(request.match_info["job"], now)
        if job is None:
            state.job_plans[request.match_info["job"]] = body
            return web.json_response({"applies": "at submission"})
        if job.is_terminal(now):
            return web.json_response({"error": "job already terminal"}, status=409)
        state.apply_job_plan(job.plan, body)
        if body.get("finish_now"):
            elapsed = now - job.submitted_at
            job.plan.pending_s = min(job.plan.pending_s, elapsed)
            job.plan.running_s = elapsed - job.plan.pending_s
        return web.json_response(job.details(now))

    @routes.put("/sim/dashboards/{ns}/scripts")
    async def scripts(request: web.Request) -> web.Response:
        body = await _body(request)
        if not all(isinstance(v, dict) for v in body.values()):
            return _bad("each script's plan is a JSON object")
        plans = registry.script_plans.setdefault(request.match_info["ns"], {})
        plans.clear()
        plans.update(body)
        return web.json_response({"scripts": sorted(plans)})

    @routes.post(base + "/drivers")
    async def driver(request: web.Request) -> web.Response:
        state, body, now = state_of(request), await _body(request), registry.clock()
        run = body.get("running_s", 6.0)
        job_id = state.jobs.new_ray_job_id()
        state.jobs.jobs[job_id] = SimJob(
            submission_id=None,
            entrypoint=str(body.get("entrypoint", "python driver.py")),
            submitted_at=now,
            plan=JobPlan(pending_s=0.0, running_s=None if run is None else float(run)),
            metadata={},
            runtime_env={},
            ray_job_id=job_id,
            job_type="DRIVER",
        )
        return web.json_response({"job_id": job_id})

    @routes.put(base + "/serve/apps/{app}/plan")
    async def app_plan(request: web.Request) -> web.Response:
        body = await _body(request)
        if body.get("fail") not in (None, "import", "ctor"):
            return _bad("fail must be import, ctor or null")
        deploy = body.get("deploy_s")
        state_of(request).serve.plans[request.match_info["app"]] = AppPlan(
            deploy_s=None if deploy is None else float(deploy),
            fail=body.get("fail"),
            deployments=body.get("deployments"),
        )
        return web.json_response({"applies": "next PUT containing the app"})

    @routes.put(base + "/serve/apps/{app}/status")
    async def app_status(request: web.Request) -> web.Response:
        body = await _body(request)
        app = state_of(request).serve.apps.get(request.match_info["app"])
        if app is None:
            return web.json_response({"error": "no such app"}, status=404)
        status = body.get("status")
        if status is not None and status not in APP_STATUSES:
            return _bad(f"status must be one of {APP_STATUSES}")
        app.status_override, app.message_override = status, body.get("message")
        return web.json_response({"status": status})

    @routes.put(base + "/serve/proxy")
    async def proxy_health(request: web.Request) -> web.Response:
        state = state_of(request)
        state.serve.proxy_healthy = bool((await _body(request)).get("healthy", True))
        return web.json_response({"healthy": state.serve.proxy_healthy})

    app.router.add_routes(routes)
