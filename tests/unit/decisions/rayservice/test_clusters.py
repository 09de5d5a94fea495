"""Cluster-spec hashing, shouldPrepareNewCluster, shouldUpdateCluster, isZeroDowntimeUpgradeEnabled,
constructRayClusterForRayService and pending names (mirrors rayservice_controller_unit_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.api.settings import FeatureGates
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.clusters import (
    apply_modification,
    construct_ray_cluster,
    generate_ray_cluster_name,
    is_cluster_spec_hash_equal,
    is_zero_downtime_upgrade_enabled,
    merge_patch,
    modify_ray_cluster_patch,
    should_prepare_new_cluster,
    should_update_cluster,
    spec_hash,
)
from tests.unit.decisions.rayservice.world import make_service, merge

GATES = FeatureGates()
VERSION = "v1.7.0"


def service(**spec: Any) -> RayService:
    return RayService.model_validate(make_service(spec=spec or None))


def cluster_for(svc: RayService, name: str = "c1", *, annotations: dict[str, str] | None = None) -> RayCluster:
    raw = construct_ray_cluster(svc, name, status={}, gates=GATES, kuberay_version=VERSION)
    if annotations is not None:
        raw["metadata"]["annotations"] = annotations
    return RayCluster.model_validate(raw)


def with_cluster_config(svc: RayService, **changes: Any) -> RayService:
    raw = svc.to_manifest()
    raw["spec"]["rayClusterConfig"] = merge(raw["spec"]["rayClusterConfig"], changes)
    return RayService.model_validate(raw)


def add_group(svc: RayService, name: str = "new-worker-group", **extra: Any) -> RayService:
    raw = svc.to_manifest()
    groups = raw["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    groups.append({"groupName": name, "replicas": 1, "rayStartParams": {},
                   "template": {"spec": {"containers": [{"name": "w", "image": "img"}]}}, **extra})
    return RayService.model_validate(raw)


def set_replicas(svc: RayService, replicas: int, *, workers_to_delete: list[str] | None = None) -> RayService:
    raw = svc.to_manifest()
    group = raw["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    group["replicas"] = replicas
    group["minReplicas"] = min(replicas, group.get("minReplicas", 0))
    group["maxReplicas"] = max(replicas, group.get("maxReplicas", 0))
    if workers_to_delete is not None:
        group["scaleStrategy"] = {"workersToDelete": workers_to_delete}
    return RayService.model_validate(raw)


# --- TestGenerateHashWithoutReplicasAndWorkersToDelete ---------------------------------------------------
def test_hash_ignores_replicas_but_not_ray_version() -> None:
    base = service()
    h1 = spec_hash(base.spec.ray_cluster_config)
    assert spec_hash(set_replicas(base, 4).spec.ray_cluster_config) == h1
    assert spec_hash(set_replicas(base, 0, workers_to_delete=["w-1"]).spec.ray_cluster_config) == h1
    assert spec_hash(with_cluster_config(base, rayVersion="2.100.0").spec.ray_cluster_config) != h1


# --- TestIsClusterSpecHashEqual ----------------------------------------------------------------------------
@pytest.mark.parametrize(("partial", "diff_replicas", "add_group_", "update_spec", "expected"), [
    (False, True, False, False, True),    # [full] diff replicas
    (False, False, False, False, True),   # [full] completely identical
    (False, False, False, True, False),   # [full] update cluster spec
    (True, False, True, False, True),     # [partial] new worker group
    (True, True, True, False, True),      # [partial] diff replicas + new worker group
    (True, True, False, False, True),     # [partial] diff replicas
    (True, False, False, True, False),    # [partial] update cluster spec
    (False, False, True, False, False),   # [full] new worker group is a difference
])
def test_is_cluster_spec_hash_equal(partial: bool, diff_replicas: bool, add_group_: bool, update_spec: bool,
                                    expected: bool) -> None:
    base = service()
    cluster = cluster_for(base)
    goal = base
    if diff_replicas:
        goal = set_replicas(goal, 3)
    if add_group_:
        goal = add_group(goal)
    if update_spec:
        goal = with_cluster_config(goal, rayVersion="new-version")
    assert is_cluster_spec_hash_equal(goal, cluster, partial=partial) is expected


def test_partial_hash_missing_annotation_counts_as_equal() -> None:
    """KubeRay quirk: strconv.Atoi error -> true (clusters without annotations are updated in place)."""
    base = service()
    cluster = cluster_for(base, annotations={})
    assert not is_cluster_spec_hash_equal(base, cluster, partial=False)
    assert is_cluster_spec_hash_equal(base, cluster, partial=True)


def test_partial_hash_removed_group_is_not_equal() -> None:
    base = add_group(service())
    cluster = cluster_for(base)
    fewer = service()
    assert not is_cluster_spec_hash_equal(fewer, cluster, partial=True)


# --- isZeroDowntimeUpgradeEnabled (TestIsZeroDowntimeUpgradeEnabled + the gate) -------------------------------
@pytest.mark.parametrize(("strategy", "env", "gate", "expected"), [
    (None, True, True, True),
    (None, False, True, False),
    ("NewCluster", True, True, True),
    ("NewCluster", False, True, True),
    ("None", True, True, False),
    ("None", False, True, False),
    ("NewClusterWithIncrementalUpgrade", False, True, True),
    ("NewClusterWithIncrementalUpgrade", True, False, False),  # gate off: only NewCluster counts
    ("NewCluster", False, False, True),
])
def test_zero_downtime(strategy: str | None, env: bool, gate: bool, expected: bool) -> None:
    svc = service(upgradeStrategy={"type": strategy}) if strategy else service()
    gates = FeatureGates(ray_service_incremental_upgrade=gate)
    assert is_zero_downtime_upgrade_enabled(svc, gates=gates, enable_zero_downtime=env) is expected


# --- shouldPrepareNewCluster ---------------------------------------------------------------------------------
def prepare(svc: RayService, active: RayCluster | None, pending: RayCluster | None, serving: bool = False, *,
            env: bool = True) -> bool:
    return bool(should_prepare_new_cluster(svc, active, pending, is_pending_cluster_serving=serving, gates=GATES,
                                           enable_zero_downtime=env))


def test_prepare_when_no_cluster_at_all() -> None:
    assert prepare(service(), None, None)


def test_prepare_for_zero_downtime_upgrade() -> None:
    old = with_cluster_config(service(), rayVersion="old-version")
    active = cluster_for(old)
    new = with_cluster_config(old, rayVersion="new-version")
    assert prepare(new, active, None)
    assert not prepare(new, active, None, env=False)
    assert not prepare(service(upgradeStrategy={"type": "None"}), cluster_for(old), None)


def test_pending_cluster_is_overridden_unless_it_serves() -> None:
    old = with_cluster_config(service(), rayVersion="old-version")
    pending = cluster_for(old, "pending-cluster")
    new = with_cluster_config(old, rayVersion="new-version")
    assert prepare(new, None, pending, serving=False)
    assert not prepare(new, None, pending, serving=True)


@pytest.mark.parametrize("change", ["replicas", "workers_to_delete", "serve_config", "append_group", "identical"])
def test_changes_that_never_prepare_a_cluster(change: str) -> None:
    base = service()
    active = cluster_for(base)
    goal = {
        "replicas": lambda: set_replicas(base, 5),
        "workers_to_delete": lambda: set_replicas(base, 0, workers_to_delete=["pod-a", "pod-b"]),
        "serve_config": lambda: RayService.model_validate(make_service(serve_config="applications: []\n")),
        "append_group": lambda: add_group(base),
        "identical": lambda: base,
    }[change]()
    assert not prepare(goal, active, None)


def test_comparison_is_against_the_pending_cluster_first() -> None:
    a = with_cluster_config(service(), rayVersion="a")
    b = with_cluster_config(service(), rayVersion="b")
    assert not prepare(b, cluster_for(a, "active"), cluster_for(b, "pending"))
    assert prepare(a, cluster_for(a, "active"), cluster_for(b, "pending"))  # back to A: yet another cluster


# --- shouldUpdateCluster (TestReconcileRayCluster_UpdateActiveCluster / UpdatePendingCluster) --------------------
def upgrade_status(in_progress: bool) -> dict[str, Any]:
    return {"conditions": [{"type": c.UPGRADE_IN_PROGRESS, "status": "True" if in_progress else "False"}]}


@pytest.mark.parametrize(("case", "is_active", "in_progress", "expected"), [
    ("kuberay-version", True, False, True),
    ("kuberay-version", True, True, False),      # active frozen during an upgrade
    ("kuberay-version", False, False, False),    # only the active cluster's version is refreshed
    ("new-group", True, False, True),
    ("new-group", False, False, True),
    ("new-group", True, True, False),
    ("identical", True, False, False),
    ("replicas", True, False, False),
    ("incompatible", True, False, False),        # handled by a new cluster (or not at all with None)
    ("incompatible", False, False, False),
])
def test_should_update_cluster(case: str, is_active: bool, in_progress: bool, expected: bool) -> None:
    base = service()
    cluster = cluster_for(base)
    goal = base
    if case == "kuberay-version":
        ann = dict(cluster.metadata.annotations or {})
        ann[c.KUBERAY_VERSION_KEY] = "new-version"
        cluster = cluster_for(base, annotations=ann)
    elif case == "new-group":
        goal = add_group(base)
    elif case == "replicas":
        goal = set_replicas(base, 4)
    elif case == "incompatible":
        goal = with_cluster_config(base, rayVersion="9.9.9")
    assert should_update_cluster(goal, upgrade_status(in_progress), cluster, is_active=is_active,
                                 kuberay_version=VERSION) is expected


def test_should_update_nil_cluster() -> None:
    assert not should_update_cluster(service(), {}, None, is_active=True, kuberay_version=VERSION)


# --- constructRayClusterForRayService (TestConstructRayClusterForRayService) ---------------------------------
@pytest.mark.parametrize("meta", [{}, {"labels": {"label-1": "value-1"}}, {"annotations": {"annotation-1": "v"}}])
@pytest.mark.parametrize("groups", [0, 1, 2])
def test_construct_ray_cluster(meta: dict[str, Any], groups: int) -> None:
    raw = make_service()
    raw["metadata"].update(copy.deepcopy(meta))
    raw["spec"]["rayClusterConfig"]["workerGroupSpecs"] = [
        {"groupName": f"g{i}", "template": {"spec": {"containers": [{"name": "w"}]}}} for i in range(groups)]
    svc = RayService.model_validate(raw)
    out = construct_ray_cluster(svc, "test-cluster", status={}, gates=GATES, kuberay_version=VERSION)
    m = out["metadata"]
    assert (m["name"], m["namespace"]) == ("test-cluster", "default")
    assert m["labels"]["ray.io/originated-from-cr-name"] == svc.name
    assert m["labels"]["ray.io/originated-from-crd"] == "RayService"
    assert m["annotations"][c.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY] == spec_hash(svc.spec.ray_cluster_config)
    assert m["annotations"][c.NUM_WORKER_GROUPS_KEY] == str(groups)
    assert m["annotations"][c.KUBERAY_VERSION_KEY] == VERSION
    for key, value in (meta.get("labels") or {}).items():
        assert m["labels"][key] == value
    for key, value in (meta.get("annotations") or {}).items():
        assert m["annotations"][key] == value
    owner = m["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("RayService", svc.name, svc.metadata.uid, True)
    assert out["spec"] == svc.spec.ray_cluster_config.to_dict()


def test_incremental_upgrade_cluster_starts_without_replicas() -> None:
    svc = service(upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade"})
    first = construct_ray_cluster(svc, "c1", status={}, gates=GATES, kuberay_version=VERSION)
    assert first["spec"]["workerGroupSpecs"][0]["replicas"] == 1
    upgrade = construct_ray_cluster(svc, "c2", status={"activeServiceStatus": {"rayClusterName": "c1"}},
                                    gates=GATES, kuberay_version=VERSION)
    assert "replicas" not in upgrade["spec"]["workerGroupSpecs"][0]


# --- names -----------------------------------------------------------------------------------------------
def test_pending_name_is_deterministic_and_kuberay_shaped() -> None:
    svc = service()
    h = spec_hash(svc.spec.ray_cluster_config)
    name = generate_ray_cluster_name(svc, goal_hash=h, taken=[])
    assert name == generate_ray_cluster_name(svc, goal_hash=h, taken=[])
    assert name.startswith(f"{svc.name}-") and len(name) == len(svc.name) + 6
    other = generate_ray_cluster_name(svc, goal_hash="another-hash", taken=[])
    assert other != name
    assert generate_ray_cluster_name(svc, goal_hash=h, taken=[name]) not in (name,)


def test_pending_name_depends_on_uid() -> None:
    a = RayService.model_validate(make_service())
    raw = make_service()
    raw["metadata"]["uid"] = "another-uid"
    b = RayService.model_validate(raw)
    assert generate_ray_cluster_name(a, goal_hash="h", taken=[]) != generate_ray_cluster_name(b, goal_hash="h", taken=[])


# --- modifyRayCluster as a merge patch ----------------------------------------------------------------------
@pytest.mark.parametrize(("current", "goal"), [
    ({"a": 1, "b": {"c": 2, "d": 3}}, {"a": 1, "b": {"c": 5}}),
    ({"a": [1, 2]}, {"a": [2]}),
    ({}, {"x": {"y": 1}}),
    ({"x": {"y": 1}}, {}),
    ({"x": {"y": 1}}, {"x": 3}),
])
def test_merge_patch_turns_current_into_goal(current: dict[str, Any], goal: dict[str, Any]) -> None:
    assert merge(current, merge_patch(current, goal)) == goal


def test_modify_patch_turns_current_into_goal() -> None:
    svc = service()
    current = construct_ray_cluster(svc, "c1", status={}, gates=GATES, kuberay_version="v1.6.0")
    current["metadata"]["uid"] = "u1"
    current["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    current["spec"]["workerGroupSpecs"][0]["replicas"] = 3  # the autoscaler's
    current["status"] = {"state": "ready"}
    goal = construct_ray_cluster(add_group(svc), "c1", status={}, gates=GATES, kuberay_version=VERSION)
    patched = merge(current, modify_ray_cluster_patch(current, goal))
    assert patched["spec"] == goal["spec"]
    assert patched["metadata"]["annotations"] == goal["metadata"]["annotations"]
    assert patched["metadata"]["uid"] == "u1" and patched["status"] == {"state": "ready"}
    assert apply_modification(current, goal)["spec"] == goal["spec"]


def test_modify_patch_applies_only_to_the_version_it_was_computed_on() -> None:
    """r.Update's optimistic concurrency: the API server answers 409 if the cluster moved on."""
    svc = service()
    current = construct_ray_cluster(svc, "c1", status={}, gates=GATES, kuberay_version="v1.6.0")
    current["metadata"]["resourceVersion"] = "41"
    goal = construct_ray_cluster(add_group(svc), "c1", status={}, gates=GATES, kuberay_version=VERSION)
    assert modify_ray_cluster_patch(current, goal)["metadata"]["resourceVersion"] == "41"
    assert modify_ray_cluster_patch(current, current) == {}  # nothing to change: no patch at all


# --- rayClusterSpecForHashing (v1.7): spec.rayClusterConfig.suspend and Kueue's injections are muted ---------
TOLERATION = [{"key": "kueue", "operator": "Exists"}]


@pytest.mark.parametrize(("name", "change"), [
    ("suspend true", {"suspend": True}),
    ("suspend false", {"suspend": False}),
    ("head tolerations (kuberay#4569)", {"headGroupSpec": {"template": {"spec": {"tolerations": TOLERATION}}}}),
    ("head schedulingGates (kuberay#4569)",
     {"headGroupSpec": {"template": {"spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}}}),
])
def test_muted_changes_neither_prepare_nor_update(name: str, change: dict[str, Any]) -> None:
    base = service()
    active = cluster_for(base)
    goal = with_cluster_config(base, **change)
    assert is_cluster_spec_hash_equal(goal, active, partial=False), name
    assert not prepare(goal, active, None), name


def test_created_cluster_takes_suspend_but_its_hash_does_not() -> None:
    svc = with_cluster_config(service(), suspend=True)
    out = construct_ray_cluster(svc, "c1", status={}, gates=GATES, kuberay_version=VERSION)
    assert out["spec"]["suspend"] is True
    assert out["metadata"]["annotations"][c.HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY] == \
        spec_hash(service().spec.ray_cluster_config)


@pytest.mark.parametrize(("existing", "goal_suspend"), [(True, False), (False, True), (None, True), (True, None)])
def test_update_keeps_the_existing_clusters_suspend(existing: bool | None, goal_suspend: bool | None) -> None:
    """updateRayClusterInstance: after creation suspend belongs to Kueue, not to the RayService."""
    current = construct_ray_cluster(service(), "c1", status={}, gates=GATES, kuberay_version=VERSION)
    if existing is not None:
        current["spec"]["suspend"] = existing
    svc = add_group(service() if goal_suspend is None else with_cluster_config(service(), suspend=goal_suspend))
    goal = construct_ray_cluster(svc, "c1", status={}, gates=GATES, kuberay_version=VERSION)
    patched = merge(current, modify_ray_cluster_patch(current, goal))
    assert patched["spec"].get("suspend") == existing
    assert len(patched["spec"]["workerGroupSpecs"]) == 2
    assert apply_modification(current, goal)["spec"].get("suspend") == existing
