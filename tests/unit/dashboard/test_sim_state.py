"""Pure state logic of the simulated dashboards, driven by an explicit clock."""

from __future__ import annotations

import pytest

from raybus_sim.dashboard.jobs import JobTable, SimJob, plan_from_entrypoint
from raybus_sim.dashboard.registry import ClusterSettings, DashboardRegistry
from raybus_sim.dashboard.serve import ServeRejected, ServeState

T0 = 1_800_000_000.0


@pytest.mark.parametrize(
    ("entrypoint", "running_s", "exit_code", "ray_init"),
    [
        ('python -c "print(1)"', 0.1, 0, False),
        ('python -c "import sys; sys.exit(3)"', 0.1, 3, False),
        ("sleep 60", 60.0, 0, False),
        ('python -c "import time; time.sleep(2.5)"', 2.5, 0, False),
        ("bash -c 'exit 2'", 0.1, 2, False),
        ("python -c 'import ray; ray.init()'", 0.1, 0, True),
        ("python job.py RAYBUS_SIM_FAIL", 0.1, 1, False),
        ("python job.py RAYBUS_SIM_HANG", None, 0, False),
    ],
)
def test_entrypoint_conventions(
    entrypoint: str, running_s: float | None, exit_code: int, ray_init: bool
) -> None:
    plan = plan_from_entrypoint(entrypoint, pending_s=0.5, running_s=0.1)
    assert (plan.running_s, plan.exit_code, plan.calls_ray_init) == (running_s, exit_code, ray_init)


def _job(entrypoint: str = "sleep 1", **kwargs: object) -> SimJob:
    plan = plan_from_entrypoint(entrypoint, pending_s=0.5, running_s=0.1)
    return SimJob(submission_id="j", entrypoint=entrypoint, submitted_at=T0, plan=plan, **kwargs)


def test_timeline_and_details() -> None:
    job = _job()
    assert job.status_at(T0) == ("PENDING", None)
    assert job.status_at(T0 + 0.6) == ("RUNNING", None)
    assert job.status_at(T0 + 1.6) == ("SUCCEEDED", T0 + 1.5)
    details = job.details(T0 + 2)
    assert list(details) == [
        "type",
        "job_id",
        "submission_id",
        "driver_info",
        "status",
        "entrypoint",
        "message",
        "error_type",
        "start_time",
        "end_time",
        "metadata",
        "runtime_env",
        "driver_agent_http_address",
        "driver_node_id",
        "driver_exit_code",
    ]  # README §3: exact key order
    assert details["start_time"] == int(T0 * 1000) and details["end_time"] == int((T0 + 1.5) * 1000)


def test_stop_wins_only_before_natural_end() -> None:
    job = _job()
    job.stop_at = T0 + 0.8
    assert job.status_at(T0 + 0.7)[0] == "RUNNING"
    assert job.status_at(T0 + 0.9) == ("STOPPED", T0 + 0.8)
    late = _job()
    late.stop_at = T0 + 5
    assert late.status_at(T0 + 6)[0] == "SUCCEEDED"


@pytest.mark.parametrize(
    ("delete_after_end", "ghost"), [(0.1, True), (2.4, True), (2.6, False), (5.0, False)]
)
def test_ghost_only_inside_window(delete_after_end: float, ghost: bool) -> None:
    table = JobTable()
    job = _job()
    table.jobs["j"] = job
    end = T0 + 1.5
    table.delete(job, end + delete_after_end, ghost_window_s=2.5, ghost_delay_s=1.2)
    assert table.find("j", end + delete_after_end + 1.1) is None  # 404 until the supervisor dies
    found = table.find("j", end + delete_after_end + 1.3)
    assert (found is not None) is ghost
    if found is not None:
        assert found.details(end + 10)["error_type"] == "JOB_SUPERVISOR_ACTOR_DIED"


def _serve() -> ServeState:
    return ServeState(session="s")


def _app(name: str, route: str = "/", import_path: str = "hello:app") -> dict[str, object]:
    return {"name": name, "route_prefix": route, "import_path": import_path}


def put(serve: ServeState, apps: list[dict[str, object]], now: float) -> None:
    serve.put({"applications": apps}, now, deploy_s=1.0, blip_s=0.1, delete_s=(0.5, 0.05))


def test_serve_deploy_blip_and_delete() -> None:
    serve = _serve()
    put(serve, [_app("a"), _app("b", "/b")], T0)
    assert {n: serve.app_status(a, T0 + 0.5) for n, a in serve.apps.items()} == {
        "a": "DEPLOYING",
        "b": "DEPLOYING",
    }
    assert (
        serve.details(T0 + 0.2, imperative=False, browser=False)["applications"]["a"]["route_prefix"] is None
    )
    assert serve.routes(T0 + 1.1) == {"/": "a", "/b": "b"}
    put(serve, [_app("a")], T0 + 2)  # a unchanged, b removed
    assert serve.app_status(serve.apps["a"], T0 + 2.05) == "DEPLOYING"  # README §4 blip
    assert serve.app_status(serve.apps["a"], T0 + 2.2) == "RUNNING"
    assert serve.app_status(serve.apps["b"], T0 + 2.2) == "DELETING"
    assert set(serve.details(T0 + 2.6, imperative=False, browser=False)["applications"]) == {"a"}


def test_serve_update_keeps_route_and_shows_deploying() -> None:
    serve = _serve()
    put(serve, [_app("a")], T0)
    changed = dict(_app("a"), deployments=[{"name": "App", "num_replicas": 2}])
    put(serve, [changed], T0 + 2)
    app = serve.details(T0 + 2.1, imperative=False, browser=False)["applications"]["a"]
    assert app["status"] == "DEPLOYING" and app["route_prefix"] == "/"
    assert app["deployments"]["App"]["status"] == "UPDATING"
    assert serve.routes(T0 + 2.1) == {"/": "a"}


@pytest.mark.parametrize(
    ("apps", "needle"),
    [
        ([_app("x", "/x"), _app("x", "/y")], 'Found multiple configs for application "x"'),
        ([_app("x", "/x"), _app("y", "/x")], 'Found duplicate applications for route prefix "/x"'),
        ([_app("x", "/x", "no_colon_or_dot")], 'Got invalid import path "no_colon_or_dot"'),
        ([{"name": "x"}], "applications.0.import_path\n  Field required"),
    ],
)
def test_serve_validation_texts(apps: list[dict[str, object]], needle: str) -> None:
    with pytest.raises(ServeRejected) as rejected:
        put(_serve(), apps, T0)
    assert rejected.value.status == 400 and needle in rejected.value.text


def test_registry_restart_semantics() -> None:
    now = [T0]
    registry = DashboardRegistry(clock=lambda: now[0], defaults=ClusterSettings(job_pending_s=0.2))
    assert not registry.is_up("ns", "c")
    registry.head_up("ns", "c")
    state = registry.cluster("ns", "c")
    state.jobs.jobs["j"] = _job()
    state.requests["total"] += 5
    registry.head_up("ns", "c")  # already up: nothing lost
    assert "j" in state.jobs.jobs
    registry.head_down("ns", "c")
    registry.head_up("ns", "c", keep_state=True)  # GCS FT
    assert "j" in state.jobs.jobs
    registry.head_down("ns", "c")
    session = state.session
    now[0] += 60
    registry.head_up("ns", "c")  # plain restart: fresh head, new session, counters kept
    assert state.jobs.jobs == {} and state.requests["total"] == 5 and state.session != session
    assert state.settings.job_pending_s == 0.2
