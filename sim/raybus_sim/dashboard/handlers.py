"""Request handlers of one simulated head: dashboard (:8265), Serve proxy (:8000) and agent (:52365).

Status codes, content types and bodies follow the captures in /work/shared/ray-dashboard (names
cited per handler). Every dashboard handler takes one `Call` (cluster state, request, path match, clock reading).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from raybus_sim.dashboard import texts
from raybus_sim.dashboard.jobs import TERMINAL, SimJob, plan_from_entrypoint
from raybus_sim.dashboard.journal import config_hash
from raybus_sim.dashboard.registry import ClusterState
from raybus_sim.dashboard.serve import ServeRejected

SUBMIT_FIELDS = frozenset(
    {
        "entrypoint",
        "submission_id",
        "job_id",
        "runtime_env",
        "metadata",
        "entrypoint_num_cpus",
        "entrypoint_num_gpus",
        "entrypoint_memory",
        "entrypoint_resources",
        "entrypoint_label_selector",
    }
)
RESOURCE_FIELDS = ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources")


@dataclass(frozen=True, kw_only=True)
class Call:
    state: ClusterState
    request: web.Request
    match: dict[str, str]
    now: float
    clock: Callable[[], float] = time.time  # the registry's clock: "now" again after a latency

    @property
    def job_id(self) -> str:
        return self.match["id"]


def json_ok(data: Any) -> web.Response:
    return web.json_response(data)  # application/json; charset=utf-8 like every success body


def text(status: int, body: str, *, content_type: str = "text/plain") -> web.Response:
    return web.Response(status=status, text=body, content_type=content_type)


async def version(call: Call) -> web.Response:
    """00_dashboard_version."""
    return json_ok(
        {
            "version": "4",
            "ray_version": texts.RAY_VERSION,
            "ray_commit": texts.RAY_COMMIT,
            "session_name": call.state.session,
        }
    )


async def gcs_healthz(call: Call) -> web.Response:
    return text(200, "success", content_type="application/text")  # 00_dashboard_gcs_healthz


async def list_jobs(call: Call) -> web.Response:
    return json_ok(call.state.jobs.listing(call.now))  # 37_*, 39c_*: insertion order (real order is unstable)


def _auto_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "raysubmit_" + "".join(secrets.choice(alphabet) for _ in range(16))  # 50_job_auto_id_*


async def submit_job(call: Call) -> web.Response:
    raw = await call.request.text()  # the body arrives before the head does the work
    await _latency(call.state.settings.job_write_s)
    try:
        body = json.loads(raw)
    except ValueError:
        return text(500, texts.SERVER_TROUBLE)  # 42_err_POST_malformed_json / empty_body
    return submit_body(call.state, body, now=call.clock())


def submit_body(state: ClusterState, body: Any, *, now: float, via: str = "http") -> web.Response:
    """POST /api/jobs/ once the JSON is decoded; also how the simulated kubelet's submitter
    containers (`ray job submit`) reach the head without a socket."""
    response = _submit(state, body, now=now)
    sid = body.get("submission_id") or body.get("job_id") if isinstance(body, dict) else None
    if response.status == 200:
        sid = json.loads(response.text or "{}")["submission_id"]  # an auto id too
    # With a dict body and an id, the only 500 is "already exists" (a resubmission).
    state.record("submit", id=sid, status=response.status, via=via,
                 duplicate=response.status == 500 and sid is not None)
    return response


def _submit(state: ClusterState, body: Any, *, now: float) -> web.Response:
    if not isinstance(body, dict):
        return text(500, texts.SERVER_TROUBLE)  # 42_err_POST_json_array_body
    unknown = [k for k in body if k not in SUBMIT_FIELDS]
    if unknown:
        return text(400, texts.unknown_submit_field(unknown[0]))  # 42_err_POST_unknown_field
    if "entrypoint" not in body:
        return text(400, texts.MISSING_ENTRYPOINT)  # 42_err_POST_missing_entrypoint
    for name in ("runtime_env", "metadata"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            return text(400, texts.submit_wrong_type(name, "dict"))  # 42_err_POST_wrong_type_runtime_env
    sid = str(body.get("submission_id") or body.get("job_id") or _auto_id())
    state.jobs.settle(now)
    if sid in state.jobs.jobs:
        return text(500, texts.duplicate_submission(sid))  # 41_*: 500, not 400/409
    entrypoint = str(body["entrypoint"])
    plan = plan_from_entrypoint(
        entrypoint, pending_s=state.settings.job_pending_s, running_s=state.settings.job_running_s
    )
    for path, script_plan in state.script_plans.items():
        if path in entrypoint:
            state.apply_job_plan(plan, script_plan)
    state.apply_job_plan(plan, state.job_plans.pop(sid, {}))
    job = SimJob(
        submission_id=sid,
        entrypoint=entrypoint,
        submitted_at=now,
        plan=plan,
        metadata=body.get("metadata"),
        runtime_env=body.get("runtime_env"),
        wants_resources=any(body.get(k) is not None for k in RESOURCE_FIELDS),
        driver_pid=13000 + len(state.jobs.jobs),
    )
    if plan.calls_ray_init:
        job.ray_job_id = state.jobs.new_ray_job_id()
    state.jobs.jobs[sid] = job
    return json_ok({"job_id": sid, "submission_id": sid})  # 10_*: job_id is the submission id


def _missing(job_id: str) -> web.Response:
    return text(404, texts.job_not_found(job_id))  # 40_err_*


async def get_job(call: Call) -> web.Response:
    job = call.state.jobs.find(call.job_id, call.now)
    return _missing(call.job_id) if job is None else json_ok(job.details(call.now))


async def job_logs(call: Call) -> web.Response:
    job = call.state.jobs.find(call.job_id, call.now)
    return _missing(call.job_id) if job is None else json_ok({"logs": job.logs(call.now)})  # 12_*, 32_*


TAIL_CLOSED = (web.WSMsgType.CLOSE, web.WSMsgType.CLOSING, web.WSMsgType.CLOSED, web.WSMsgType.ERROR)
# Open log tails of the app, closed at shutdown (aiohttp's graceful shutdown waits for handlers).
OPEN_TAILS: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("open_log_tails")


async def tail_job_logs(call: Call) -> web.StreamResponse:
    """GET /api/jobs/<id>/logs/tail, as Ray's job_head.py `tail_job_logs` (what `ray job logs
    --follow` and a waiting `ray job submit` hold open): plain 404 for an unknown job, 400 for a
    DRIVER job; else a WebSocket that sends the log text as it grows and that the head closes
    (close frame, 1000) once the job is terminal, looked at every `log_tail_interval_s`
    (JobManager.LOG_TAIL_SLEEP_S), `log_tail_close_lag_s` after the job's end_time (the real
    head's lag). A deleted job ends it the same way (the head relays its agent's
    end as a close). The head going down or restarting drops the connection with no close frame.
    Not modelled: real Ray drops the connection when a job ends before its supervisor started."""
    state, job_id = call.state, call.job_id
    job = state.jobs.find(job_id, call.now)
    if job is None:
        return _missing(job_id)
    if job.job_type != "SUBMISSION":
        return text(400, texts.TAIL_NOT_SUBMISSION)
    ws = web.WebSocketResponse()
    await ws.prepare(call.request)
    tails = call.request.app.get(OPEN_TAILS, set())
    tails.add(ws)
    try:
        return await _tail(call, ws, job_id)
    finally:
        tails.discard(ws)


async def _tail(call: Call, ws: web.WebSocketResponse, job_id: str) -> web.WebSocketResponse:
    state = call.state
    session, sent = state.session, ""
    while True:
        now = call.clock()
        if not state.up or state.session != session:
            if call.request.transport is not None:
                call.request.transport.close()
            return ws
        current = state.jobs.find(job_id, now)
        if current is None:
            await ws.close()
            return ws
        logs = current.logs(now)
        if len(logs) > len(sent) and logs.startswith(sent):
            await ws.send_str(logs[len(sent):])
            sent = logs
        wait = state.settings.log_tail_interval_s
        status, end = current.status_at(now)
        if status in TERMINAL:
            close_at = (end if end is not None else now) + state.settings.log_tail_close_lag_s
            if now >= close_at:
                await ws.close()
                return ws
            wait = min(wait, close_at - now)
        try:
            msg = await ws.receive(timeout=wait)
        except TimeoutError:
            continue
        if msg.type in TAIL_CLOSED:  # the client went away
            return ws


async def stop_job(call: Call) -> web.Response:
    """34_*: running -> stopped true; 36_*: terminal -> stopped false; 82_*: PENDING -> true."""
    await _latency(call.state.settings.job_write_s)
    state, job_id, now = call.state, call.job_id, call.clock()
    job = state.jobs.find(job_id, now)
    if job is None:
        return _missing(job_id)
    if job.is_terminal(now):
        return json_ok({"stopped": False})
    if job.stop_at is None:
        job.stop_at = now + state.settings.stop_delay_s
    return json_ok({"stopped": True})


async def delete_job(call: Call) -> web.Response:
    """38_*: terminal -> deleted true; 33_*/81_*: non-terminal -> 500 traceback."""
    await _latency(call.state.settings.job_write_s)
    state, job_id, now = call.state, call.job_id, call.clock()
    job = state.jobs.find(job_id, now)
    if job is None:
        return _missing(job_id)
    status, _ = job.status_at(now)
    if not job.is_terminal(now):
        return text(500, texts.delete_non_terminal(job.submission_id or job_id, status))
    state.jobs.delete(
        job, now, ghost_window_s=state.settings.ghost_window_s, ghost_delay_s=state.settings.ghost_delay_s
    )
    return json_ok({"deleted": True})


async def get_serve(call: Call) -> web.Response:
    """01_*, 111_*, 112_* (imperative / bogus), 185_* (browser redaction)."""
    state, request, now = call.state, call.request, call.now
    api_type = request.query.get("api_type")
    if api_type not in (None, "declarative", "imperative"):
        return text(400, texts.bad_api_type(api_type))
    browser = request.headers.get("User-Agent", "").startswith("Mozilla")
    details = state.serve.details(
        now,
        imperative=api_type == "imperative",
        browser=browser,
        proxy_starting_s=state.settings.proxy_starting_s,
    )
    return json_ok(details)


async def put_serve(call: Call) -> web.Response:
    """110_* (200, empty body, no content type), 180_* (500), 181_*/90_* (400).

    README §8: the first PUT starts the Serve controller and proxy before it answers (3.4-9 s on a
    loaded head; `serve_first_put_s`), later PUTs take `serve_put_s`. Schema errors answer at once.
    The config is applied when the latency has passed, even if the client gave up meanwhile (the
    dashboard's handler is not cancelled by a client disconnect)."""
    state = call.state
    raw = await call.request.text()
    try:
        body = json.loads(raw)
    except ValueError as exc:
        return text(500, texts.serve_put_bad_json(str(exc)))
    s = state.settings
    try:
        state.serve.validate(body)
    except ServeRejected as rejected:
        return text(rejected.status, rejected.text)
    await _latency(s.serve_first_put_s if state.serve.started_at is None else s.serve_put_s)
    try:
        state.serve.put(
            body,
            call.clock(),
            deploy_s=s.serve_deploy_s,
            blip_s=s.serve_unchanged_blip_s,
            delete_s=(s.serve_delete_s, s.serve_delete_unserved_s),
            importable=s.importable(),
        )
    except ServeRejected as rejected:
        state.record("serve_put", config=config_hash(body), status=rejected.status)
        return text(rejected.status, rejected.text)
    state.record("serve_put", config=config_hash(body), status=200,
                 apps=sorted(str(a.get("name", "default")) for a in body.get("applications") or []))
    return web.Response(status=200)


async def delete_serve(call: Call) -> web.Response:
    """100_*: 200, empty body. README §8: a synchronous serve.shutdown() that blocks 2.4-3 s while
    apps run (`serve_delete_running_s`), ~0.8 s when none does (`serve_delete_idle_s`)."""
    state = call.state
    if state.serve.started_at is not None:
        running = state.serve.serving(call.now)
        await _latency(state.settings.serve_delete_running_s if running else state.settings.serve_delete_idle_s)
    state.serve.shutdown()
    state.record("serve_delete", status=200)
    return web.Response(status=200)


async def _latency(seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)


def proxy(state: ClusterState, *, tail: str, now: float) -> web.Response | None:
    """Serve proxy (120_*, 121_*, 162_*). None means "port closed" (Serve not running)."""
    serve = state.serve
    if serve.started_at is None:
        return None
    if tail in ("-/healthz", "-/routes") and not serve.populated(now):
        return text(503, texts.ROUTE_TABLE_NOT_POPULATED)  # README §8: e.g. its only app failed at import
    if tail == "-/healthz":  # stays "success" with DEPLOY_FAILED/UNHEALTHY apps (162_*, 194_*)
        return text(200, "success") if serve.proxy_healthy else text(503, "This node is being drained.")
    routes = serve.routes(now)
    if tail == "-/routes":
        return web.Response(body=json.dumps(routes).encode(), content_type="application/json")
    path = "/" + tail.split("?", 1)[0]
    prefix = max(
        (p for p in routes if path == p or path.startswith(p.rstrip("/") + "/")), key=len, default=None
    )
    if prefix is None:
        return text(404, f"Path '{path}' not found.")
    app = serve.apps[routes[prefix]]
    # A failed first deploy has no replicas; an update whose constructor raises ends with none either
    # (real Ray 2.60: "failed to start 3 times in a row during a rolling update", then this 503,
    # tests/integration/realray); only an update that failed at import keeps the old replicas.
    if serve.app_status(app, now) == "DEPLOY_FAILED" and (not app.served_before or app.fail == "ctor"):
        dep = app.deployment_names()[0]
        return text(
            503, f"Deployment(name='{dep}', app='{app.name}') is unavailable because it failed to deploy."
        )
    return text(200, f"{app.name} ok")


def agent(tail: str) -> web.Response:
    if tail == "api/local_raylet_healthz":
        return text(200, "success", content_type="application/text")  # 00_agent_local_raylet_healthz
    if tail == "api/healthz":
        return text(200, "raylet: success\ngcs: success", content_type="application/text")  # 00_agent_healthz
    return text(404, texts.NOT_FOUND)
