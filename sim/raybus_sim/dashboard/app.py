"""aiohttp application hosting every simulated head on one port.

Routing (the dashboard client's base-URL template points here, e.g.
``http://127.0.0.1:PORT/{namespace}/{cluster}``):

* ``/{namespace}/{cluster}/api/...``         dashboard, port 8265 on a real head
* ``/{namespace}/{cluster}/serve/-/healthz`` Serve proxy (port 8000), also ``-/routes`` and app traffic
* ``/{namespace}/{cluster}/agent/api/...``   dashboard agent (port 52365): local_raylet_healthz, healthz
* ``/sim/dashboards/...``                    control API (control.py); registered first, so a
  Kubernetes namespace literally named "sim" with a cluster named "dashboards" is not reachable

"Unreachable" is modelled as a refused connection: when the registry says the head is not running
(or the cluster is unknown, like a Service without endpoints) the sim closes the TCP connection
without sending a response. httpx raises ``RemoteProtocolError`` (a ``TransportError``), which the
client maps to ``DashboardUnreachable`` exactly like a real connection refusal. The Serve proxy
refuses the same way until Serve has been started (README §4: after shutdown port 8000 refuses).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

from aiohttp import WSCloseCode, web

from raybus_sim.dashboard import handlers as h
from raybus_sim.dashboard import texts
from raybus_sim.dashboard.control import add_control_routes
from raybus_sim.dashboard.events import start_pusher
from raybus_sim.dashboard.registry import ClusterState, DashboardRegistry, Fault

REGISTRY_KEY = web.AppKey("dashboard_registry", DashboardRegistry)

Handler = Callable[[h.Call], Awaitable[web.StreamResponse]]

_ID = r"(?P<id>[^/]+)"
# (method, tail regex, endpoint name used for request counting, handler)
ROUTES: list[tuple[str, re.Pattern[str], str, Handler]] = [
    ("GET", re.compile(r"api/version"), "/api/version", h.version),
    ("GET", re.compile(r"api/gcs_healthz"), "/api/gcs_healthz", h.gcs_healthz),
    ("GET", re.compile(r"api/jobs/?"), "/api/jobs/", h.list_jobs),
    ("POST", re.compile(r"api/jobs/?"), "/api/jobs/", h.submit_job),
    ("GET", re.compile(rf"api/jobs/{_ID}/logs"), "/api/jobs/{id}/logs", h.job_logs),
    # A WebSocket held open until the job ends: counted once, when it is opened.
    ("GET", re.compile(rf"api/jobs/{_ID}/logs/tail"), "/api/jobs/{id}/logs/tail", h.tail_job_logs),
    ("POST", re.compile(rf"api/jobs/{_ID}/stop"), "/api/jobs/{id}/stop", h.stop_job),
    ("GET", re.compile(rf"api/jobs/{_ID}"), "/api/jobs/{id}", h.get_job),
    ("DELETE", re.compile(rf"api/jobs/{_ID}"), "/api/jobs/{id}", h.delete_job),
    ("GET", re.compile(r"api/serve/applications/?"), "/api/serve/applications/", h.get_serve),
    ("PUT", re.compile(r"api/serve/applications/?"), "/api/serve/applications/", h.put_serve),
    ("DELETE", re.compile(r"api/serve/applications/?"), "/api/serve/applications/", h.delete_serve),
]

_HTML_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


def _refuse(request: web.Request) -> web.Response:
    """Close the connection without a response: the client sees it like a refused connection."""
    if request.transport is not None:
        request.transport.close()
    raise asyncio.CancelledError


def _truncated() -> web.Response:
    return web.Response(
        status=200, body=b'{"type": "SUBMISSION", "status": "RUNN', content_type="application/json"
    )


async def _apply_fault(fault: Fault, *, state: ClusterState, request: web.Request) -> web.Response | None:
    """Returns a garbage response, refuses, or (for "timeout") sleeps and lets the request proceed."""
    if fault.kind == "timeout":
        await asyncio.sleep(fault.sleep_s if fault.sleep_s is not None else state.settings.timeout_sleep_s)
        return None
    if fault.kind == "invalid_json":
        return _truncated()
    if fault.kind == "html_502":
        return h.text(502, _HTML_502, content_type="text/html")
    if fault.kind == "html_200":
        return h.text(200, "<!doctype html><html><body>Ray Dashboard</body></html>", content_type="text/html")
    return _refuse(request)  # "reset"


def _endpoint(method: str, tail: str) -> tuple[str, Handler | None, dict[str, str]]:
    path_known = False
    for route_method, pattern, name, handler in ROUTES:
        match = pattern.fullmatch(tail)
        if match is None:
            continue
        path_known = True
        if route_method == method:
            return name, handler, match.groupdict()
    if path_known:
        return "/" + tail, None, {"method_not_allowed": "1"}
    return "/" + tail, None, {}


async def _dispatch(request: web.Request) -> web.StreamResponse:
    registry = request.app[REGISTRY_KEY]
    namespace, cluster, tail = (
        request.match_info["ns"],
        request.match_info["cluster"],
        request.match_info["tail"],
    )
    state = registry.get(namespace, cluster)
    method = request.method
    match: dict[str, str]
    handler: Handler | None
    if tail.startswith("serve/"):
        name, handler, match = "/serve/" + tail[6:], None, {}
    elif tail.startswith("agent/"):
        name, handler, match = "/agent/" + tail[6:], None, {}
    else:
        name, handler, match = _endpoint(method, tail)
    if state is None or not state.up:
        if state is not None:
            state.requests["refused"] += 1
        return _refuse(request)
    state.requests[f"{method} {name}"] += 1
    state.requests["total"] += 1
    fault = state.take_fault("/" + tail)
    # A body cut short in a 200 means the head handled the request: a write (job submit, serve
    # PUT) takes effect and only its answer is garbage. That is why a caller that, like KubeRay's
    # UpdateDeployments, trusts the status code alone is still right to cache what it sent.
    applied_then_cut = fault is not None and fault.kind == "invalid_json" and method != "GET"
    if fault is not None and not applied_then_cut:
        faulty = await _apply_fault(fault, state=state, request=request)
        if faulty is not None:
            return faulty
    response = await _answer(request, state=state, tail=tail, handler=handler, match=match)
    return _truncated() if applied_then_cut else response


async def _answer(request: web.Request, *, state: ClusterState, tail: str,
                  handler: Handler | None, match: dict[str, str]) -> web.StreamResponse:
    registry = request.app[REGISTRY_KEY]
    method = request.method
    now = registry.clock()
    if tail.startswith("serve/"):
        response = h.proxy(state, tail=tail[6:], now=now)
        return _refuse(request) if response is None else response
    if tail.startswith("agent/"):
        return h.agent(tail[6:])
    # 183_*, 184_*: a browser User-Agent may not POST/PUT (405), GETs are allowed.
    if method in ("POST", "PUT") and request.headers.get("User-Agent", "").startswith("Mozilla"):
        return h.text(405, texts.browser_rejected(method))
    if handler is None:
        if match.get("method_not_allowed"):
            return h.text(405, "405: Method Not Allowed")
        return h.text(404, texts.NOT_FOUND)  # 00_dashboard_healthz, 00_dashboard_local_raylet_healthz_404
    return await handler(h.Call(state=state, request=request, match=match, now=now, clock=registry.clock))


async def _close_tails(app: web.Application) -> None:
    for ws in list(app.get(h.OPEN_TAILS) or ()):
        await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")


def create_dashboard_app(registry: DashboardRegistry) -> web.Application:
    """One aiohttp app serving every head in `registry` plus the control API."""
    app = web.Application()
    app[REGISTRY_KEY] = registry
    app[h.OPEN_TAILS] = set()
    app.on_shutdown.append(_close_tails)

    async def _pusher(app: web.Application) -> None:
        await start_pusher(app, registry)  # heads whose Pod carries an export address push events

    app.on_startup.append(_pusher)
    add_control_routes(app, registry)
    app.router.add_route("*", "/{ns}/{cluster}/{tail:.*}", _dispatch)
    return app
