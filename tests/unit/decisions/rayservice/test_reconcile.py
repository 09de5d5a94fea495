"""reconcile_rayservice round by round against the test world: first deploy, in-place serve update,
blue/green upgrade and its promotion/deletion timing, aborted upgrade, head restart, terminal states."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject, RecordEvent
from raybus.decisions.rayservice import constants as c
from raybus.decisions.rayservice.model import CommandFailure, ServiceSettings
from tests.unit.decisions.rayservice.world import World, head_template, make_service

SERVE_SVC = "rayservice-sample-serve-svc"
HEAD_SVC = "rayservice-sample-head-svc"
NEW_HEAD = {"headGroupSpec": {"template": head_template(env=[{"name": "A", "value": "1"}])}}


def deployed(**kw: Any) -> World:
    w = World(make_service(**kw))
    w.settle()
    assert w.condition(c.READY)["status"] == "True", w.status
    return w


def run(w: World, rounds: int = 12) -> None:
    for _ in range(rounds):
        w.start_heads()
        w.step()


def test_first_deploy_becomes_ready() -> None:
    w = World(make_service())
    first = w.step()
    assert first.commands == [] and first.status is not None
    pending = w.name("pending")
    assert pending.startswith("rayservice-sample-") and len(pending) == len("rayservice-sample-") + 5
    assert (w.condition(c.READY)["reason"], w.condition(c.UPGRADE_IN_PROGRESS)["reason"]) == (c.INITIALIZING, c.INITIALIZING)
    create = w.step()
    assert [type(x) for x in create.commands] == [CreateObject] and create.error == f"found 0 head. cluster name {pending}, namespace default"
    assert create.commands[0].object["metadata"]["name"] == pending
    w.settle()
    st = w.status
    assert st["serviceStatus"] == "Running" and st["numServeEndpoints"] == 1
    assert w.name("active") == pending and w.name("pending") == ""
    assert set(st["activeServiceStatus"]["applicationStatuses"]) == {"fruit_app", "math_app"}
    assert w.selector_cluster(SERVE_SVC) == w.selector_cluster(HEAD_SVC) == pending
    assert w.pods[w.head_of(pending) or ""]["metadata"]["labels"][c.SERVE_LABEL] == "true"
    assert (w.condition(c.UPGRADE_IN_PROGRESS)["status"], w.condition(c.UPGRADE_IN_PROGRESS)["reason"]) == ("False", c.NO_PENDING_CLUSTER)
    assert len(w.puts) == 1
    assert c.CREATED_RAY_CLUSTER in w.events and c.CREATED_SERVICE in w.events


def test_steady_state_writes_nothing_and_needs_no_timer() -> None:
    w = deployed()
    for _ in range(3):
        d = w.step()
        assert (d.commands, d.dashboard_commands, d.status, d.requeue_after, d.error) == ([], [], None, None, None)
    interest = w.step().interest
    assert interest is not None and len(interest) == 1
    assert interest[0].cluster == w.name("active") and interest[0].serve and not interest[0].expect_change
    assert list(interest[0].proxy_pods) == [w.head_of(w.name("active"))]


def test_serve_config_only_change_updates_the_active_cluster_in_place() -> None:
    w = deployed()
    active = w.name("active")
    w.update_spec(serveConfigV2="applications:\n  - name: fruit_app\n    import_path: fruit.v2\n")
    d = w.step()
    assert [x.cluster for x in d.dashboard_commands] == [active] and not d.commands
    w.settle()
    assert w.name("active") == active and w.name("pending") == "" and set(w.clusters) == {active}
    assert list(w.status["activeServiceStatus"]["applicationStatuses"]) == ["fruit_app"]
    assert w.status["observedGeneration"] == 2


def test_blue_green_upgrade_promotes_switches_and_deletes_after_the_delay() -> None:
    w = deployed()
    old = w.name("active")
    w.update_spec(rayClusterConfig=NEW_HEAD)
    w.step()
    new = w.name("pending")
    assert new and new != old
    assert (w.condition(c.UPGRADE_IN_PROGRESS)["status"], w.condition(c.UPGRADE_IN_PROGRESS)["reason"]) == \
        ("True", c.BOTH_ACTIVE_PENDING_CLUSTERS_EXIST)
    assert "applicationStatuses" not in w.status["activeServiceStatus"]  # KubeRay stops polling the old cluster
    run(w, 4)
    assert w.name("active") == new and w.name("pending") == ""
    assert w.selector_cluster(SERVE_SVC) == w.selector_cluster(HEAD_SVC) == new
    assert w.condition(c.READY)["status"] == "True" and old in w.clusters
    deadline = w.deadlines[old]
    assert deadline == w.now + timedelta(seconds=60)
    w.advance(59)
    d = w.step()
    assert old in w.clusters and d.requeue_after == pytest.approx(1.0)
    w.advance(1)
    d = w.step()
    assert [x.target.name for x in d.commands if isinstance(x, DeleteObject)] == [old]
    assert d.commands[0].propagation == "Background"
    assert old not in w.clusters and c.DELETED_RAY_CLUSTER in w.events
    w.step()
    assert old not in w.deadlines and old not in w.cache


def test_custom_deletion_delay() -> None:
    w = deployed(spec={"rayClusterDeletionDelaySeconds": 5})
    old = w.name("active")
    w.update_spec(rayClusterConfig=NEW_HEAD)
    run(w, 5)
    assert w.deadlines[old] - w.now == timedelta(seconds=5)


def test_restart_between_promotion_and_deletion_keeps_the_deadline() -> None:
    """Deadlines come from Redis: a new process decides the same (neither early nor never)."""
    w = deployed()
    old = w.name("active")
    w.update_spec(rayClusterConfig=NEW_HEAD)
    run(w, 5)
    deadline = w.deadlines[old]
    w.advance(30)
    fresh = World(w.service, now=w.now, clusters=w.clusters, pods=w.pods, services=w.services, apps=w.apps,
                  proxy=w.proxy, cache=dict(w.cache), deadlines=dict(w.deadlines), observed_at=w.observed_at)
    d = fresh.step()
    assert not any(isinstance(x, DeleteObject) for x in d.commands)
    assert d.requeue_after == pytest.approx(30.0) and fresh.deadlines[old] == deadline
    fresh.advance(30)
    assert any(isinstance(x, DeleteObject) and x.target.name == old for x in fresh.step().commands)


def test_upgrade_aborted_by_a_second_spec_change() -> None:
    w = deployed()
    old = w.name("active")
    w.update_spec(rayClusterConfig=NEW_HEAD)
    w.step()
    w.step()  # creates the first pending cluster
    first = w.name("pending")
    assert first in w.clusters
    w.update_spec(rayClusterConfig={"headGroupSpec": {"template": head_template(env=[{"name": "A", "value": "2"}])}})
    run(w, 6)
    assert w.name("active") not in (old, first) and w.name("pending") == ""
    assert first in w.deadlines and old in w.deadlines
    w.advance(60)
    w.step()
    assert first not in w.clusters and old not in w.clusters


def test_going_back_to_the_active_spec_prepares_yet_another_cluster() -> None:
    """KubeRay compares with the pending cluster first; the new name never collides with a live one."""
    w = deployed()
    old = w.name("active")
    original_head = w.service["spec"]["rayClusterConfig"]["headGroupSpec"]
    w.update_spec(rayClusterConfig=NEW_HEAD)
    w.step()
    w.step()
    first = w.name("pending")
    w.update_spec(rayClusterConfig={"headGroupSpec": original_head})
    w.start_heads()  # KubeRay's reconcile stops at the pending cluster's missing head Pod until then
    w.step()
    assert w.name("pending") not in (old, first, "")
    assert w.name("active") == old


def test_head_restart_resubmits_the_config_once() -> None:
    w = deployed()
    active = w.name("active")
    puts = len(w.puts)
    w.advance(600)
    w.restart_head(active)
    w.settle()
    assert len(w.puts) == puts + 1 and w.puts[-1].cluster == active
    assert w.condition(c.READY)["status"] == "True"


def test_replicas_and_workers_to_delete_changes_do_nothing() -> None:
    w = deployed()
    groups = w.service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    w.update_spec(rayClusterConfig={"workerGroupSpecs": [{**groups[0], "replicas": 3,
                                                          "scaleStrategy": {"workersToDelete": ["x"]}}]})
    d = w.step()
    assert d.commands == [] and w.name("pending") == ""


def test_appended_worker_group_updates_the_active_cluster_in_place() -> None:
    w = deployed()
    active = w.name("active")
    groups = list(w.service["spec"]["rayClusterConfig"]["workerGroupSpecs"])
    groups.append({"groupName": "gpu", "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "w"}]}}})
    w.update_spec(rayClusterConfig={"workerGroupSpecs": groups})
    d = w.step()
    patch = next(x for x in d.commands if isinstance(x, PatchObject) and x.target.kind == "RayCluster")
    assert patch.target.name == active and patch.event_reason == c.UPDATED_RAY_CLUSTER
    assert [g["groupName"] for g in w.clusters[active]["spec"]["workerGroupSpecs"]] == ["small-group", "gpu"]
    assert w.clusters[active]["metadata"]["annotations"][c.NUM_WORKER_GROUPS_KEY] == "2"
    assert w.name("pending") == ""
    assert w.step().commands == []


def test_new_kuberay_version_refreshes_the_active_cluster() -> None:
    w = deployed()
    active = w.name("active")
    w.settings = ServiceSettings(operator=w.settings.operator.model_copy(update={"kuberay_version": "v1.8.0"}))
    d = w.step()
    assert any(isinstance(x, PatchObject) and x.target.name == active for x in d.commands)
    assert w.clusters[active]["metadata"]["annotations"][c.KUBERAY_VERSION_KEY] == "v1.8.0"
    assert w.name("pending") == ""


def test_upgrade_strategy_none_ignores_cluster_changes() -> None:
    w = deployed(spec={"upgradeStrategy": {"type": "None"}})
    w.update_spec(rayClusterConfig=NEW_HEAD)
    d = w.step()
    assert w.name("pending") == "" and not any(isinstance(x, (CreateObject, PatchObject)) for x in d.commands)


def test_failed_command_is_kuberays_error_and_nothing_else() -> None:
    w = deployed()
    w.failures = [CommandFailure(reason="CreatedRayCluster", message="admission webhook denied")]
    d = w.decide()
    assert d.error == "admission webhook denied" and d.commands == [] and d.status is None
    assert d.interest is None and d.requeue_after is None


def test_dashboard_failure_warns_errors_and_retries() -> None:
    w = World(make_service())
    w.dashboard_fails = True
    for _ in range(4):
        w.start_heads()
        d = w.step()
    assert d.error is not None and "fail to create / update Serve applications" in d.error
    assert any(isinstance(e, RecordEvent) and e.event_reason == c.FAILED_TO_UPDATE_SERVE_APPLICATIONS for e in w.events)
    assert w.cache == {}
    w.dashboard_fails = False
    w.settle()
    assert w.condition(c.READY)["status"] == "True"


def test_dashboard_not_answering_ends_the_round_without_a_status_write() -> None:
    w = deployed()
    w.reachable[w.name("active")] = False
    w.update_spec(serveConfigV2="applications: []\n")
    d = w.step()
    assert d.status is None and d.error is None and d.dashboard_commands == []
    assert d.interest and d.interest[0].serve


def test_initializing_timeout_is_terminal_and_cleans_up() -> None:
    w = World(make_service(annotations={c.INITIALIZING_TIMEOUT_ANNOTATION: "30s"}))
    d = w.step()
    assert d.requeue_after == pytest.approx(30.0)
    w.step()  # creates the cluster; its head never comes up
    w.advance(30)
    d = w.step()
    assert d.error is not None and "found 0 head" in d.error  # KubeRay stops at updateHeadPodServeLabel...
    w.start_heads()
    w.apps.clear()
    w.reachable.clear()
    for name in list(w.clusters):
        w.clusters[name]["status"] = {"conditions": [{"type": "HeadPodReady", "status": "False"}]}
    d = w.step()  # ...until the head Pod exists; then the timeout fires in calculateConditions
    ready = w.condition(c.READY)
    assert (ready["status"], ready["reason"]) == ("False", c.INITIALIZING_TIMEOUT)
    assert any(isinstance(e, RecordEvent) and e.event_reason == c.RAY_SERVICE_INITIALIZING_TIMEOUT_EVENT
               for e in d.commands)
    assert w.name("active") == w.name("pending") == ""
    d = w.step()
    assert d.interest == [] and d.requeue_after == pytest.approx(60.0) and d.status is None
    w.advance(60)
    w.step()
    assert w.clusters == {}
    d = w.step()
    assert (d.commands, d.requeue_after, d.status) == ([], None, None)


def test_validation_failure() -> None:
    w = World(make_service(spec={"rayClusterDeletionDelaySeconds": -1}))
    d = w.step()
    ready = w.condition(c.READY)
    assert (ready["status"], ready["reason"]) == ("False", c.VALIDATION_FAILED)
    assert [x.event_reason for x in d.commands if isinstance(x, RecordEvent)] == ["InvalidRayServiceSpec"]
    assert d.interest == [] and d.requeue_after is None
    again = w.step()
    assert again.commands == [] and again.status is None


def test_managed_by_external_controller_is_skipped() -> None:
    w = World(make_service(spec={"managedBy": "kueue.x-k8s.io/multikueue"}))
    d = w.step()
    assert (d.commands, d.status, d.interest) == ([], None, [])


def test_deleting_rayservice_creates_nothing() -> None:
    w = World(make_service())
    w.service["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    d = w.step()
    # No cluster: only the finalizer goes (test_finalizer.py has the rest).
    assert [type(x).__name__ for x in d.commands] == ["PatchObject"] and d.status is None


def test_two_head_pods_is_an_error() -> None:
    w = deployed()
    active = w.name("active")
    pod = dict(w.pods[w.head_of(active) or ""])
    w.pods["second-head"] = {**pod, "metadata": {**pod["metadata"], "name": "second-head", "uid": "x"}}
    assert w.decide().error == f"found multiple heads. cluster name {active}, namespace default"


def test_proxy_unhealthy_relabels_the_head_and_drops_endpoints() -> None:
    w = deployed()
    head = w.head_of(w.name("active")) or ""
    w.proxy[head] = False
    d = w.step()
    assert any(isinstance(x, PatchObject) and x.target.name == head for x in d.commands)
    d = w.step()
    assert w.condition(c.READY)["reason"] == c.ZERO_SERVE_ENDPOINTS and "serviceStatus" not in w.status


def test_interest_covers_active_and_pending_during_an_upgrade() -> None:
    w = deployed()
    w.update_spec(rayClusterConfig=NEW_HEAD)
    w.step()
    w.step()
    w.start_heads()
    d = w.step()
    assert d.interest is not None
    by_cluster = {x.cluster: x for x in d.interest}
    assert set(by_cluster) == {w.name("active"), w.name("pending")}
    assert by_cluster[w.name("pending")].serve and by_cluster[w.name("pending")].expect_change
    assert not by_cluster[w.name("active")].serve  # KubeRay stops reading the old cluster's apps
    assert all(x.proxy_pods for x in d.interest)  # both heads' proxies are health-checked


def test_excluded_head_gets_no_proxy_probe_and_serve_false() -> None:
    w = World(make_service(spec={"excludeHeadPodFromServeSvc": True}))
    w.settle()
    head = w.head_of(w.name("active")) or ""
    assert w.pods[head]["metadata"]["labels"][c.SERVE_LABEL] == "false"
    interest = w.step().interest
    assert interest is not None and interest[0].proxy_pods == {}


def test_missing_serve_port_is_kuberays_error() -> None:
    w = World(make_service(spec={"rayClusterConfig": {
        "headGroupSpec": {"template": {"spec": {"containers": [
            {"name": "ray-head", "ports": [{"name": "dashboard", "containerPort": 8265}]}]}}},
        "workerGroupSpecs": []}}))
    for _ in range(5):
        w.start_heads()
        d = w.step()
    assert d.error is not None and d.error.startswith("Please specify a port named 'serve' (or with the prefix 'serve-'")
    assert SERVE_SVC not in w.services


def test_lost_serve_config_cache_resubmits_once() -> None:
    """Redis restart (or KubeRay's operator restart): "submit the request for safety"."""
    w = deployed()
    w.cache.clear()
    puts = len(w.puts)
    w.settle()
    assert len(w.puts) == puts + 1 and w.cache
    w.settle()
    assert len(w.puts) == puts + 1
