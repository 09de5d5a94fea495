"""Hypothesis properties of reconcile_cluster over arbitrary snapshots."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raybus.api import with_defaults
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.expectations import (
    HEAD_GROUP,
    ExpectedPod,
    ScaleAction,
    ScaleExpectations,
    check_satisfied,
)
from raybus.decisions.cluster.pods import find_suspend_status
from raybus.decisions.cluster.reconcile import ClusterDecision, ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.replicas import worker_group_desired_pods
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject, DeleteObject
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    T0,
    apply,
    head_service,
    make_cluster,
    pod,
    worker_group,
)

GROUP_NAMES = ["small", "big", "tpu"]
PHASES = ["Running", "Running", "Running", "Pending", "Failed", "Succeeded"]


@st.composite
def pods_for(draw: st.DrawFn, group: str, node_type: str, count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        phase = draw(st.sampled_from(PHASES))
        out.append(
            pod(
                f"demo-{group}-{node_type}-{i:05d}",
                node_type=node_type,
                group=group,
                phase=phase,
                ready=draw(st.booleans()),
                terminated=draw(st.booleans()) if phase == "Running" else False,
                restart_policy=draw(st.sampled_from([None, "Always", "Never"])),
                deleting=draw(st.integers(0, 9)) == 0,
            )
        )
    return out


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[ClusterSnapshot, OperatorSettings]:
    groups: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = draw(pods_for("head", "head", draw(st.integers(0, 2))))
    for name in draw(st.lists(st.sampled_from(GROUP_NAMES), max_size=3, unique=True)):
        hosts = draw(st.sampled_from([1, 1, 2]))
        existing = draw(pods_for(name, "worker", draw(st.integers(0, 5))))
        pods += existing
        to_delete = draw(
            st.lists(st.sampled_from([p["metadata"]["name"] for p in existing] + ["ghost"]), max_size=2)
        )
        groups.append(
            worker_group(
                name,
                replicas=draw(st.one_of(st.none(), st.integers(0, 5))),
                minReplicas=draw(st.integers(0, 3)),
                maxReplicas=draw(st.integers(0, 6)),
                numOfHosts=hosts,
                scaleStrategy={"workersToDelete": to_delete} if to_delete else {},
            )
        )
    suspend_cond = draw(st.sampled_from([None, "RayClusterSuspending", "RayClusterSuspended"]))
    status = (
        {"conditions": [{"type": suspend_cond, "status": "True", "reason": suspend_cond, "message": ""}]}
        if suspend_cond
        else None
    )
    cluster = make_cluster(
        groups=groups,
        status=status,
        suspend=draw(st.booleans()) and draw(st.booleans()),
        enableInTreeAutoscaling=draw(st.booleans()),
    )
    names = [p["metadata"]["name"] for p in pods] + ["never-created-1", "never-created-2"]
    exp_groups: dict[str, tuple[ExpectedPod, ...]] = {}
    for group in draw(st.lists(st.sampled_from([HEAD_GROUP, *GROUP_NAMES]), max_size=3, unique=True)):
        exp_groups[group] = tuple(
            ExpectedPod(
                name=draw(st.sampled_from(names)),
                action=draw(st.sampled_from(list(ScaleAction))),
                recorded_at=T0 - timedelta(seconds=draw(st.integers(0, 60))),
            )
            for _ in range(draw(st.integers(1, 2)))
        )
    services = [head_service()] if draw(st.booleans()) else []
    cfg = OperatorSettings(enable_random_pod_delete=draw(st.booleans()))
    snap = ClusterSnapshot(
        cluster=cluster, pods=pods, services=services, expectations=ScaleExpectations(groups=exp_groups)
    )
    return snap, cfg


def decide(snap: ClusterSnapshot, cfg: OperatorSettings, entropy: str = "e") -> ClusterDecision:
    return reconcile_cluster(snap, settings=cfg, now=T0, entropy=entropy)


def pod_creates(d: ClusterDecision) -> list[dict[str, Any]]:
    return [c.object for c in d.commands if isinstance(c, CreateObject) and c.object.get("kind") == "Pod"]


PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(snapshots(), st.text(min_size=1, max_size=8))
def test_never_raises_and_is_deterministic(
    case: tuple[ClusterSnapshot, OperatorSettings], entropy: str
) -> None:
    snap, cfg = case
    first = decide(snap, cfg, entropy)
    assert decide(snap, cfg, entropy) == first
    assert first.requeue_after in (None, 2.0, float(cfg.raycluster_default_requeue_seconds))


@PROPS
@given(snapshots())
def test_never_a_second_head(case: tuple[ClusterSnapshot, OperatorSettings]) -> None:
    snap, cfg = case
    d = decide(snap, cfg)
    heads = [o for o in pod_creates(d) if o["metadata"]["labels"]["ray.io/node-type"] == "head"]
    assert len(heads) <= 1
    if podutil.head_pods(snap.pods):
        assert not heads


@PROPS
@given(snapshots())
def test_worker_creates_bounded_by_missing_pods(case: tuple[ClusterSnapshot, OperatorSettings]) -> None:
    snap, cfg = case
    d = decide(snap, cfg)
    cluster = with_defaults(snap.cluster)
    deleted = {c.target.name for c in d.commands if isinstance(c, DeleteObject)}
    for group in cluster.spec.worker_group_specs or []:
        # Pods this decision deletes (e.g. workersToDelete) no longer count, exactly as KubeRay's
        # runningPods excludes deletedWorkers; everything else (Pending, terminating) counts.
        existing = len(
            [p for p in podutil.group_pods(snap.pods, group.group_name) if podutil.name(p) not in deleted]
        )
        made = [o for o in pod_creates(d) if o["metadata"]["labels"].get("ray.io/group") == group.group_name]
        assert len(made) <= max(0, worker_group_desired_pods(group) - existing)


@PROPS
@given(snapshots())
def test_unsatisfied_group_issues_no_pod_commands(case: tuple[ClusterSnapshot, OperatorSettings]) -> None:
    snap, cfg = case
    cluster = with_defaults(snap.cluster)
    if find_suspend_status(cluster) == "RayClusterSuspending" or snap.cluster.spec.upgrade_strategy:
        return  # deleteAllPods ignores expectations, as in KubeRay
    d = decide(snap, cfg)
    names = [p["metadata"]["name"] for p in snap.pods]
    for group in [HEAD_GROUP, *(g.group_name for g in cluster.spec.worker_group_specs or [])]:
        ok, _ = check_satisfied(snap.expectations, group=group, existing_pod_names=names, now=T0)
        if ok:
            continue
        label = "headgroup" if group == HEAD_GROUP else group
        assert not [o for o in pod_creates(d) if o["metadata"]["labels"]["ray.io/group"] == label]
        own = {podutil.name(p) for p in snap.pods if podutil.labels(p).get("ray.io/group") == label}
        assert not [c for c in d.commands if isinstance(c, DeleteObject) and c.target.name in own]


@PROPS
@given(snapshots())
def test_every_pod_command_is_expected(case: tuple[ClusterSnapshot, OperatorSettings]) -> None:
    snap, cfg = case
    d = decide(snap, cfg)
    expected = {(p.name, p.action) for items in d.expectations.groups.values() for p in items}
    for created in pod_creates(d):
        assert (created["metadata"]["name"], ScaleAction.CREATE) in expected
    existing = {p["metadata"]["name"] for p in snap.pods}
    created_names = [o["metadata"]["name"] for o in pod_creates(d)]
    assert len(created_names) == len(set(created_names))
    assert not set(created_names) & existing
    for cmd in d.commands:
        if (
            isinstance(cmd, DeleteObject) and cmd.event_reason != "DeletedPod"
        ):  # deleteAllPods: no expectation
            assert (cmd.target.name, ScaleAction.DELETE) in expected


@PROPS
@given(snapshots())
def test_rerun_after_applying_creates_issues_no_more_creates(
    case: tuple[ClusterSnapshot, OperatorSettings],
) -> None:
    snap, cfg = case
    d = decide(snap, cfg)
    if any(isinstance(c, DeleteObject) for c in d.commands) or not pod_creates(d):
        return
    again = decide(apply(snap, d), cfg)
    assert not pod_creates(again)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 2), st.sampled_from([1, 1, 2])), min_size=1, max_size=3
    ),
    st.text(min_size=1, max_size=6),
)
def test_fresh_cluster_converges_to_desired(shape: list[tuple[int, int, int]], entropy: str) -> None:
    groups = [
        worker_group(GROUP_NAMES[i], replicas=r, minReplicas=lo, maxReplicas=5, numOfHosts=h)
        for i, (r, lo, h) in enumerate(shape)
    ]
    snap = ClusterSnapshot(cluster=make_cluster(groups=groups))
    cfg = OperatorSettings()
    for _ in range(6):
        snap = apply(snap, decide(snap, cfg, entropy))
    final = decide(snap, cfg, entropy)
    assert not final.commands
    cluster = with_defaults(snap.cluster)
    for group in cluster.spec.worker_group_specs or []:
        assert len(podutil.group_pods(snap.pods, group.group_name)) == worker_group_desired_pods(group)
    assert snap.cluster.status is not None and snap.cluster.status.state == "ready"


JUNK_POD = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["a", "b", "demo-head-x", ""]),
                "labels": st.dictionaries(
                    st.sampled_from(["ray.io/node-type", "ray.io/group", "ray.io/worker-group-replica-name"]),
                    st.sampled_from(["head", "worker", "small", "tpu", "r1", ""]),
                ),
                "deletionTimestamp": st.just("2026-01-01T00:00:00Z"),
            },
        ),
        "spec": st.fixed_dictionaries({}, optional={"containers": st.just([{"name": "ray"}])}),
        "status": st.fixed_dictionaries(
            {},
            optional={
                "phase": st.sampled_from(["Running", "Failed", "", "Unknown"]),
                "conditions": st.just([{"type": "Ready"}]),
                "containerStatuses": st.just([{"name": "ray", "state": {"terminated": {}}}]),
            },
        ),
    },
)


@PROPS
@given(st.lists(JUNK_POD, max_size=6), st.booleans())
def test_malformed_pods_never_crash(pods: list[dict[str, Any]], autoscaling: bool) -> None:
    groups = [worker_group("small", replicas=1), worker_group("tpu", replicas=1, numOfHosts=2)]
    snap = ClusterSnapshot(
        cluster=make_cluster(groups=groups, enableInTreeAutoscaling=autoscaling),
        pods=pods,
        services=[head_service()],
    )
    decide(snap, OperatorSettings())
