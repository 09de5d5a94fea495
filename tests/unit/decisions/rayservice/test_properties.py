"""Properties over random histories (user edits, head restarts, proxy flaps, dashboard faults, failed
commands, time passing), checked after every decision:
- never two pending clusters;
- the serve Service only ever selects a cluster whose Serve applications were all RUNNING when it
  was switched to, and that cluster is the active (or, mid-switch, the pending) one;
- a deletion deadline, once set, is never moved by a later reconcile;
- a cluster is deleted only once its deadline has passed;
- serveConfigV2-only and replicas/workersToDelete-only changes never create a pending cluster;
- deprecated serviceStatus is Running iff Ready=True.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.model import CommandFailure, ServiceDecision, ServiceSnapshot
from tests.unit.decisions.rayservice.world import World, head_template, make_service

SERVE_SVC = "rayservice-sample-serve-svc"

ACTIONS = st.sampled_from([
    "step", "step", "step", "step", "heads", "heads", "advance", "advance_long", "serve_config", "replicas",
    "head_env", "restart_head", "proxy_flap", "dashboard_down", "dashboard_up", "unreachable", "fail_command",
])


def check(snapshot: ServiceSnapshot, decision: ServiceDecision, w: World) -> None:
    # Deadlines only ever added, never moved.
    for name, deadline in decision.deletion_deadlines.items():
        if deadline is not None:
            assert name not in snapshot.deletion_deadlines, f"deadline of {name} reset"
    # Deleted only after its deadline.
    for cmd in decision.commands:
        if isinstance(cmd, DeleteObject) and cmd.target.kind == "RayCluster":
            deadline = snapshot.deletion_deadlines.get(cmd.target.name)
            assert deadline is not None and w.now >= deadline
    # At most one cluster created per round, and only the pending one named in the status.
    creates = [x for x in decision.commands if isinstance(x, CreateObject) and x.object["kind"] == "RayCluster"]
    assert len(creates) <= 1
    status = snapshot.service.status.to_dict() if snapshot.service.status else {}
    if creates:
        assert creates[0].object["metadata"]["name"] == (status.get("pendingServiceStatus") or {}).get("rayClusterName")
    # The serve Service is only (re)pointed at a cluster whose apps were all RUNNING.
    for cmd in decision.commands:
        target = None
        if isinstance(cmd, CreateObject) and cmd.object["metadata"]["name"] == SERVE_SVC:
            target = cmd.object["spec"]["selector"]["ray.io/cluster"]
        if isinstance(cmd, PatchObject) and cmd.target.name == SERVE_SVC:
            target = cmd.merge_patch["spec"]["selector"]["ray.io/cluster"]
        if target is not None:
            obs = snapshot.observations[target].observation
            assert obs.serve_apps and all(app.status == "RUNNING" for app in obs.serve_apps.values())


def invariants(w: World) -> None:
    st_ = w.status
    active, pending = w.name("active"), w.name("pending")
    # Never two pending clusters: at most one live cluster is neither active nor scheduled for deletion.
    undecided = [n for n in w.clusters if n != active and n not in w.deadlines]
    assert len(undecided) <= 1, (undecided, active, pending)
    if pending:
        assert pending != active
    selected = w.selector_cluster(SERVE_SVC)
    if selected is not None and st_.get("conditions"):
        assert selected in (active, pending)
    ready = next((x for x in st_.get("conditions") or [] if x["type"] == c.READY), None)
    assert (st_.get("serviceStatus") == "Running") == (ready is not None and ready["status"] == "True")


def act(w: World, action: str, value: int) -> None:
    if action == "heads":
        w.start_heads()
    elif action == "advance":
        w.advance(value % 20)
    elif action == "advance_long":
        w.advance(30 + value % 60)
    elif action == "serve_config":
        w.update_spec(serveConfigV2=f"applications:\n  - name: app{value % 3}\n    import_path: m.v{value}\n")
    elif action == "replicas":
        group = w.service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
        w.update_spec(rayClusterConfig={"workerGroupSpecs": [
            {**group, "replicas": value % 5, "minReplicas": 0, "maxReplicas": 5,
             "scaleStrategy": {"workersToDelete": [f"w-{value}"] if value % 2 else []}}]})
    elif action == "head_env":
        w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template(env=[{"name": "V", "value": str(value % 4)}])}})
    elif action == "restart_head":
        name = w.name("active") or w.name("pending")
        if name in w.clusters:
            w.restart_head(name)
    elif action == "proxy_flap":
        for pod in w.proxy:
            w.proxy[pod] = bool(value % 2)
    elif action == "dashboard_down":
        w.dashboard_fails = True
    elif action == "dashboard_up":
        w.dashboard_fails = False
    elif action == "unreachable":
        for name in w.reachable:
            w.reachable[name] = bool(value % 3)
    elif action == "fail_command":
        w.failures = [CommandFailure(reason="CreatedRayCluster", message="injected")]


def step_checked(w: World) -> ServiceDecision:
    snapshot = w.snapshot()
    decision = w.step()
    check(snapshot, decision, w)
    invariants(w)
    return decision


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(ACTIONS, st.integers(0, 1000)), min_size=5, max_size=60))
def test_random_histories_keep_the_invariants(history: list[tuple[str, int]]) -> None:
    w = World(make_service())
    for action, value in history:
        if action == "step":
            step_checked(w)
        else:
            act(w, action, value)
    # Whatever happened, healing the world converges to exactly one serving cluster.
    w.dashboard_fails = False
    for name in w.reachable:
        w.reachable[name] = True
    for pod in w.proxy:
        w.proxy[pod] = True
    for _ in range(25):
        w.start_heads()
        decision = step_checked(w)
        if decision.requeue_after:
            w.advance(decision.requeue_after)
    assert w.condition(c.READY)["status"] == "True"
    assert w.name("pending") == "" and set(w.clusters) == {w.name("active")}
    assert w.selector_cluster(SERVE_SVC) == w.name("active")


EDITS = st.lists(st.tuples(st.sampled_from(["serve_config", "replicas", "step", "heads", "restart_head",
                                            "proxy_flap", "advance"]), st.integers(0, 1000)), max_size=40)


@settings(max_examples=40, deadline=None)
@given(EDITS)
def test_serve_config_and_replica_changes_never_create_a_pending_cluster(history: list[tuple[str, int]]) -> None:
    w = World(make_service())
    w.settle()
    active = w.name("active")
    for action, value in history:
        if action == "step":
            decision = step_checked(w)
            assert not any(isinstance(x, CreateObject) and x.object["kind"] == "RayCluster" for x in decision.commands)
        else:
            act(w, action, value)
        assert w.name("pending") == "" and w.name("active") == active and set(w.clusters) == {active}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=1, max_size=12), st.integers(0, 120))
def test_deadline_is_set_once_and_honoured(gaps: list[int], delay: int) -> None:
    """Whatever the reconcile timing, the old cluster goes exactly at promotion-time + delay."""
    w = World(make_service(spec={"rayClusterDeletionDelaySeconds": delay}))
    w.settle()
    old = w.name("active")
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template(env=[{"name": "X", "value": "1"}])}})
    while old not in w.deadlines:
        w.start_heads()
        step_checked(w)
    deadline = w.deadlines[old]
    for gap in gaps:
        w.advance(gap / 10)
        step_checked(w)
        if old in w.clusters:
            assert w.now < deadline or w.history[-1].error is not None
    w.now = max(w.now, deadline)
    step_checked(w)
    assert old not in w.clusters
    assert next(t for n, t in w.deleted_clusters if n == old) >= deadline


