"""Replay every captured exchange against the simulator and compare with the real Ray 2.60 head.

The captures were taken in one session against one head; replaying them in `captured_at` order
against one simulated head, with the simulator's clock set to the capture's time offset, has to
give the same status code, the same media type and the same JSON key sets (nested, see
`shape_diff`). Values such as times, ids and actor names may differ. Ids the head generated
(auto submission ids, hex Ray job ids) are mapped from the capture to the simulator's as they
appear. The replay runs once over real HTTP; each exchange is then its own test case.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from aiohttp import web

from raybus_sim.dashboard import ClusterSettings, DashboardRegistry, create_dashboard_app
from tests.conftest import DASHBOARD_CAPTURES

pytestmark = pytest.mark.integration

# Not modelled by the simulator (KubeRay never calls them); listed so nothing is skipped silently.
NOT_MODELLED = {"00_dashboard_cluster_status", "00_dashboard_nodes_summary"}
# Timings of the real head (README §3/§4) so that timing-dependent answers line up.
REAL_TIMINGS = ClusterSettings(
    job_pending_s=0.59,
    job_running_s=0.1,
    stop_delay_s=1.1,
    ghost_window_s=2.5,
    ghost_delay_s=1.2,
    serve_deploy_s=4.0,
    serve_unchanged_blip_s=0.03,
    serve_delete_s=1.0,
)


def _plan(
    app: str, deploy_s: float, *, deployments: list[str] | None = None
) -> tuple[str, str, dict[str, Any]]:
    return ("PUT", f"/serve/apps/{app}/plan", {"deploy_s": deploy_s, "deployments": deployments})


# Control-API calls made just before an exchange, scripting the per-app timings of the real head
# (README §4 "observed sequences"), so app statuses line up with every poll.
HOOKS: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "90_wd_c_file_uri_zip_PUT": [_plan("wd-test", 4.5)],
    "90_wd_d_env_PYTHONPATH_PUT": [_plan("wd-test", 3.0)],
    "90_wd_e_local_uri_dir_PUT": [_plan("wd-test", 4.5)],
    "110_serve_v1_PUT_cold_start": [_plan("app1", 5.4), _plan("app2", 2.95)],
    "130_serve_v2_PUT_num_replicas_2": [_plan("app1", 4.4)],
    "140_serve_v3_PUT_user_config": [_plan("app1", 0.4)],
    "150_serve_v4_PUT_runtime_env_change": [_plan("app1", 11.0)],
    "160_serve_v5_PUT_broken_apps": [
        _plan("app-badimport", 8.9),
        _plan("app-badattr", 8.9),
        _plan("app-badctor", 6.8, deployments=["Broken"]),
    ],
    "190_serve_v7_PUT_flaky_ok": [_plan("app1", 0.1), _plan("app-flaky", 1.5)],
    "192_serve_v8_PUT_flaky_fail": [_plan("app-flaky", 0.4)],
    # v8: the health check starts failing ~3 s after RUNNING: UNHEALTHY, never DEPLOY_FAILED.
    "193_serve_v8_poll_04": [("PUT", "/serve/apps/app-flaky/status", {"status": "UNHEALTHY"})],
    # A plain `ray.init(address="auto")` script running for 6 s (200_*-202_*).
    "200_jobs_list_with_DRIVER_entry_running": [("POST", "/drivers", {"running_s": 6.0})],
}
# Values that differ on purpose: on the real head `python` lacked the ray module (README §3 "which
# python an entrypoint gets"), the simulator runs ray.init() entrypoints successfully.
VALUE_EXCEPTIONS = {"61_FAILED_ModuleNotFound_job_rayinit_get_FAILED_jobidNull_driverinfoNull"}
# Keys whose values are free-form (echoed user input) or maps keyed by names: only the keys
# present on both sides are compared (maps) or nothing (free-form).
FREE_FORM = {
    "metadata",
    "runtime_env",
    "deployed_app_config",
    "user_config",
    "ray_actor_options",
    "required_resources",
    "env_vars",
    "driver_info",
}
NAMED_MAPS = {"applications", "deployments", "proxies", "nodes"}


@dataclass(kw_only=True)
class Outcome:
    name: str
    captured_status: int
    sim_status: int
    captured_type: str
    sim_type: str
    captured_body: Any
    sim_body: Any
    is_json: bool


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _media(headers: Any) -> str:
    return str(headers.get("content-type") or "").split(";")[0].strip()


def _exchanges() -> list[tuple[datetime, str, dict[str, Any]]]:
    out = []
    for path in DASHBOARD_CAPTURES.glob("*.exchange.json"):
        name = path.name[: -len(".exchange.json")]
        if name in NOT_MODELLED:
            continue
        data = json.loads(path.read_text())
        out.append((datetime.fromisoformat(data["captured_at"]), name, data))
    return sorted(out, key=lambda row: row[0])


def _sim_path(url: str, ids: dict[str, str]) -> str:
    parts = urlsplit(url)
    segments = [ids.get(s, s) for s in parts.path.split("/")]
    prefix = {8265: "", 8000: "/serve", 52365: "/agent"}[parts.port or 0]
    query = f"?{parts.query}" if parts.query else ""
    return "/ns/rc" + prefix + "/".join(segments) + query


def _learn_ids(captured: Any, sim: Any, *, ids: dict[str, str]) -> None:
    """Map ids the real head generated to the ones the simulator generated (single objects only:
    list order is not stable, README §3)."""
    if not isinstance(captured, dict) or not isinstance(sim, dict):
        return
    for key in ("submission_id", "job_id"):
        if isinstance(captured.get(key), str) and isinstance(sim.get(key), str) and captured[key] != sim[key]:
            ids.setdefault(captured[key], sim[key])


async def _replay() -> dict[str, Outcome]:
    clock = FakeClock()
    registry = DashboardRegistry(clock=clock, defaults=REAL_TIMINGS)
    registry.head_up("ns", "rc")
    runner = web.AppRunner(create_dashboard_app(registry))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    root = f"http://127.0.0.1:{runner.addresses[0][1]}"
    rows = _exchanges()
    start, base = rows[0][0], clock.now
    ids: dict[str, str] = {}
    outcomes: dict[str, Outcome] = {}
    async with httpx.AsyncClient(timeout=5) as http:
        for at, name, data in rows:
            clock.now = base + (at - start).total_seconds()
            for method, path, payload in HOOKS.get(name, []):
                control = await http.request(method, f"{root}/sim/dashboards/ns/rc{path}", json=payload)
                assert control.status_code == 200, control.text
                if path == "/drivers":
                    ids["04000000"] = control.json()["job_id"]
            request, response = data["request"], data["response"]
            body = request["body"]
            content = (
                body.encode()
                if isinstance(body, str)
                else None
                if body is None
                else json.dumps(body).encode()
            )
            sim = await http.request(
                request["method"],
                root + _sim_path(request["url"], ids),
                content=content,
                headers=request["headers"],
            )
            is_json = bool(response["body_is_json"])
            sim_body = (
                sim.json()
                if is_json and sim.headers.get("content-type", "").startswith("application/json")
                else sim.text
            )
            if is_json:
                _learn_ids(response["body"], sim_body, ids=ids)
            outcomes[name] = Outcome(
                name=name,
                captured_status=response["status_code"],
                sim_status=sim.status_code,
                captured_type=_media(response["headers"]),
                sim_type=_media(sim.headers),
                captured_body=response["body"],
                sim_body=sim_body,
                is_json=is_json,
            )
    await runner.cleanup()
    return outcomes


def shape_diff(captured: Any, sim: Any, *, path: str = "$") -> list[str]:
    """Differences in key sets between two JSON values (values themselves are not compared)."""
    if isinstance(captured, dict) and isinstance(sim, dict):
        name = path.rsplit(".", 1)[-1]
        if name in FREE_FORM:
            return []
        if name in NAMED_MAPS:
            shared = captured.keys() & sim.keys()
            return [d for k in sorted(shared) for d in shape_diff(captured[k], sim[k], path=f"{path}.{k}")]
        diffs = (
            [f"{path}: keys {sorted(captured.keys() ^ sim.keys())} differ"]
            if captured.keys() != sim.keys()
            else []
        )
        return diffs + [
            d
            for k in sorted(captured.keys() & sim.keys())
            for d in shape_diff(captured[k], sim[k], path=f"{path}.{k}")
        ]
    if isinstance(captured, list) and isinstance(sim, list) and captured and sim:
        return shape_diff(captured[0], sim[0], path=f"{path}[0]")
    if captured is not None and sim is not None and type(captured) is not type(sim):
        numbers = {int, float}
        if {type(captured), type(sim)} <= numbers:
            return []
        return [f"{path}: {type(captured).__name__} vs {type(sim).__name__}"]
    return []


NAMES = [name for _, name, _ in _exchanges()]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    return asyncio.run(_replay())


def test_every_capture_is_replayed(outcomes: dict[str, Outcome]) -> None:
    captured = {p.name[: -len(".exchange.json")] for p in Path(DASHBOARD_CAPTURES).glob("*.exchange.json")}
    assert set(outcomes) == captured - NOT_MODELLED
    assert len(outcomes) >= 190


@pytest.mark.parametrize("name", NAMES)
def test_sim_matches_capture(outcomes: dict[str, Outcome], name: str) -> None:
    got = outcomes[name]
    assert got.sim_status == got.captured_status, (got.sim_status, str(got.sim_body)[:300])
    assert got.sim_type == got.captured_type
    if got.is_json:
        assert shape_diff(got.captured_body, got.sim_body) == []
        if isinstance(got.captured_body, list) and name.startswith(
            ("37_", "39c_", "62_", "67_", "200_", "202_")
        ):
            assert len(got.sim_body) == len(got.captured_body)  # the same records, incl. the ghost


def _statuses(body: Any) -> Any:
    """The values that must match: job status, stop/delete answers, app and proxy statuses."""
    if not isinstance(body, dict):
        return None
    if "applications" in body:
        apps = {n: a["status"] for n, a in body["applications"].items()}
        return apps, [p["status"] for p in body.get("proxies", {}).values()]
    keys = ("status", "error_type", "driver_exit_code", "stopped", "deleted", "type")
    return {k: body[k] for k in keys if k in body}


@pytest.mark.parametrize("name", [n for n in NAMES if n not in VALUE_EXCEPTIONS])
def test_sim_states_match_capture(outcomes: dict[str, Outcome], name: str) -> None:
    got = outcomes[name]
    if got.is_json:
        assert _statuses(got.sim_body) == _statuses(got.captured_body)
    elif got.captured_type == "text/plain" and got.captured_status >= 400:
        # Error bodies: clients match on the final line of the traceback (README §3).
        assert got.sim_body.strip().splitlines()[-1] == got.captured_body.strip().splitlines()[-1]
