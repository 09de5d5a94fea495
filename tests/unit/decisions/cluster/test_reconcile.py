"""rayClusterReconcile orchestration: skip rules, validation events, owned objects in KubeRay's order,
requeue cadence, and multi-round convergence against an in-memory world."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api.raycluster import IngressOptions, ScaleStrategy
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.commands import CreateObject, RecordEvent
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    SETTINGS,
    apply,
    creates,
    deletes,
    head_service,
    later,
    make_cluster,
    patches,
    worker_group,
)


def decide(snapshot: ClusterSnapshot, *, seconds: float = 0, entropy: str = "e"):  # type: ignore[no-untyped-def]
    return reconcile_cluster(snapshot, settings=SETTINGS, now=later(seconds), entropy=entropy)


def kinds(d: Any) -> list[str]:
    return [
        f"{c.object['kind']}/{c.object['metadata']['name']}"
        for c in d.commands
        if isinstance(c, CreateObject)
    ]


def test_managed_by_external_controller_is_skipped() -> None:
    d = decide(ClusterSnapshot(cluster=make_cluster(managedBy="kueue.x-k8s.io/multikueue")))
    assert d.commands == [] and d.status is None and d.requeue_after is None
    d = decide(ClusterSnapshot(cluster=make_cluster(managedBy="ray.io/kuberay-operator")))
    assert creates(d)


@pytest.mark.parametrize(
    ("cluster_kw", "event_reason", "requeue"),
    [
        ({"name": "x" * 60}, "InvalidRayClusterMetadata", None),
        ({"groups": [worker_group(template={"spec": {"containers": []}})]}, "InvalidRayClusterSpec", None),
        ({"upgradeStrategy": {"type": "Sometimes"}}, "InvalidRayClusterSpec", None),
        (
            {
                "status": {
                    "conditions": [
                        {"type": "RayClusterSuspending", "status": "True", "reason": "a", "message": ""},
                        {"type": "RayClusterSuspended", "status": "True", "reason": "a", "message": ""},
                    ]
                }
            },
            "InvalidRayClusterStatus",
            2.0,
        ),
    ],
)
def test_validation_failure_records_warning_only(
    cluster_kw: dict[str, Any], event_reason: str, requeue: float | None
) -> None:
    d = decide(ClusterSnapshot(cluster=make_cluster(**cluster_kw)))
    assert [type(c) for c in d.commands] == [RecordEvent]
    event = d.commands[0]
    assert isinstance(event, RecordEvent)
    assert (event.type, event.event_reason) == ("Warning", event_reason)
    assert d.status is None and d.requeue_after == requeue


def test_deleting_cluster_does_nothing() -> None:
    cluster = make_cluster()
    cluster.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    d = decide(ClusterSnapshot(cluster=cluster))
    assert d.commands == [] and d.requeue_after is None


def test_fresh_cluster_creates_objects_in_kuberay_order() -> None:
    cluster = make_cluster(
        groups=[worker_group(replicas=1), worker_group("tpu", numOfHosts=2, replicas=1)],
        annotations={"ray.io/enable-serve-service": "true"},
        enableInTreeAutoscaling=True,
        headGroupSpec={
            "enableIngress": True,
            "rayStartParams": {},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-head",
                            "image": "rayproject/ray:2.46.0",
                            "ports": [{"name": "serve", "containerPort": 8000}],
                        }
                    ]
                }
            },
        },
    )
    d = decide(ClusterSnapshot(cluster=cluster))
    order = [k.split("/")[0] for k in kinds(d)]
    assert order == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Ingress",
        "Service",  # head
        "Service",  # headless workers
        "Service",  # serve
        "Pod",  # head
        "Pod",  # small
        "Pod",  # tpu host 0
        "Pod",  # tpu host 1
    ]
    names = kinds(d)
    assert names[4] == "Service/demo-head-svc" and names[5] == "Service/demo-headless"
    assert names[6] == "Service/demo-serve-svc"
    serve = next(c for c in creates(d, "Service") if c.object["metadata"]["name"] == "demo-serve-svc")
    assert serve.event_reason is None  # reconcileServeService uses a plain Create


def test_existing_owned_objects_are_not_recreated() -> None:
    snap = ClusterSnapshot(cluster=make_cluster(enableInTreeAutoscaling=True))
    first = decide(snap)
    world = apply(snap, first)
    second = decide(world)
    assert not [c for c in second.commands if isinstance(c, CreateObject)]


def test_user_managed_service_account_missing_stops_before_pods() -> None:
    cluster = make_cluster(enableInTreeAutoscaling=True)
    cluster.spec.head_group_spec.template["spec"]["serviceAccountName"] = "my-sa"
    d = decide(ClusterSnapshot(cluster=cluster))
    assert [c.event_reason for c in d.commands if isinstance(c, RecordEvent)] == [
        "AutoscalerServiceAccountNotFound"
    ]
    assert not creates(d) and d.error is not None


def test_duplicate_head_services_stop_before_pods() -> None:
    snap = ClusterSnapshot(cluster=make_cluster(), services=[head_service("a"), head_service("b")])
    d = decide(snap)
    assert not creates(d) and d.error is not None and d.status is None


def test_converges_to_ready_and_goes_quiet() -> None:
    snap = ClusterSnapshot(
        cluster=make_cluster(groups=[worker_group(replicas=3), worker_group("b", replicas=1)])
    )
    for _ in range(5):
        d = decide(snap)
        snap = apply(snap, d)
    d = decide(snap, seconds=60)
    assert d.commands == [] and d.status is None
    assert d.requeue_after == SETTINGS.raycluster_default_requeue_seconds
    assert snap.cluster.status is not None and snap.cluster.status.state == "ready"
    assert snap.cluster.status.desired_worker_replicas == 4
    conds = {c.type: c.status for c in snap.cluster.status.conditions or []}
    assert conds["RayClusterProvisioned"] == "True" and conds["HeadPodReady"] == "True"


def test_autoscaler_scale_down_round_trip() -> None:
    groups = [worker_group(replicas=3)]
    snap = ClusterSnapshot(cluster=make_cluster(groups=groups, enableInTreeAutoscaling=True))
    for _ in range(3):
        snap = apply(snap, decide(snap))
    workers = sorted(
        p["metadata"]["name"] for p in snap.pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
    )
    victim = workers[1]
    # The autoscaler patches replicas 3 -> 2 and names the victim.
    cluster = snap.cluster.model_copy(deep=True)
    cluster.spec.worker_group_specs[0].replicas = 2
    cluster.spec.worker_group_specs[0].scale_strategy = ScaleStrategy(workers_to_delete=[victim])
    snap = snap.model_copy(update={"cluster": cluster})
    d = decide(snap)
    assert [c.target.name for c in deletes(d)] == [victim]
    assert not creates(d) and len(patches(d)) == 1
    snap = apply(snap, d)
    assert not (snap.cluster.spec.worker_group_specs[0].scale_strategy.workers_to_delete or [])  # type: ignore[index,union-attr]
    d = decide(snap)
    assert not deletes(d) and not creates(d)
    remaining = sorted(
        p["metadata"]["name"] for p in snap.pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
    )
    assert remaining == [w for w in workers if w != victim]


def test_pods_terminating_are_waited_for() -> None:
    snap = ClusterSnapshot(cluster=make_cluster(groups=[worker_group(replicas=1)]))
    snap = apply(snap, decide(snap))
    snap = apply(snap, decide(snap))
    # Someone kills the worker: it is terminating, KubeRay counts it and waits.
    worker = next(p for p in snap.pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker")
    worker["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not creates(decide(snap))
    gone = snap.model_copy(update={"pods": [p for p in snap.pods if p is not worker]})
    assert len(creates(decide(gone))) == 1


def test_requeue_two_seconds_while_working() -> None:
    d = decide(ClusterSnapshot(cluster=make_cluster()))
    assert d.requeue_after == 2.0
    # The 2 s is for the status write; had the status been unchanged, KubeRay's default requeue.
    assert d.status is not None and d.requeue_unchanged == float(SETTINGS.raycluster_default_requeue_seconds)


def _ingress_cluster(host: str, annotations: dict[str, str] | None = None) -> Any:
    cluster = make_cluster(annotations=annotations)
    cluster.spec.head_group_spec.enable_ingress = True
    cluster.spec.head_group_spec.ingress_options = IngressOptions(host=host)
    return cluster


def test_ingress_created_then_kept_in_line() -> None:
    snap = ClusterSnapshot(cluster=_ingress_cluster("a.example.com", {"team": "x"}))
    world = apply(snap, decide(snap))
    assert len(world.ingresses) == 1
    assert not patches(decide(world), "Ingress")  # no drift
    moved = world.model_copy(update={"cluster": _ingress_cluster("b.example.com")})
    (patch,) = patches(decide(moved), "Ingress")
    assert patch.target.name == "demo-head-ingress"
    assert patch.merge_patch["metadata"]["annotations"] == {"team": None}
    assert patch.merge_patch["spec"]["rules"][0]["host"] == "b.example.com"


def _group(name: str, restart_policy: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    return worker_group(name, template={"spec": spec})


@pytest.mark.parametrize(("version", "policies", "warned"), [
    # v1.7: autoscaler v1 + a worker restartPolicy other than Never -> a Warning, the reconcile goes on
    ("v1", {"a": "Always", "b": None, "c": "OnFailure"}, "[a, c]"),
    ("v1", {"a": "Never", "b": None}, None),
    ("v2", {"a": "Always"}, None),
    (None, {"a": "Always"}, None),
])
def test_autoscaler_v1_restart_policy_warning(version: str | None, policies: dict[str, str | None],
                                              warned: str | None) -> None:
    options = {"version": version} if version else None
    cluster = make_cluster(groups=[_group(n, p) for n, p in policies.items()], enableInTreeAutoscaling=True,
                           **({"autoscalerOptions": options} if options else {}))
    d = decide(ClusterSnapshot(cluster=cluster))
    warnings = [c for c in d.commands if isinstance(c, RecordEvent) and c.message.startswith("RayCluster spec warning")]
    if warned is None:
        assert warnings == []
    else:
        expected = (f"RayCluster spec warning ns/demo: restartPolicy for worker groups {warned} should be Never "
                    "or unset when using autoscaler V1")
        assert [(w.event_reason, w.message) for w in warnings] == [("InvalidRayClusterSpec", expected)]
    if version != "v2":  # (v2 rejects such a group in ValidateRayClusterSpec instead)
        assert creates(d)  # not a blocking validation error
