"""spec.suspend: Suspending (commit point) -> teardown -> Suspended -> resume."""

from __future__ import annotations

from datetime import timedelta

from raybus.decisions.commands import DeleteObject
from raybus.decisions.rayservice import constants as c
from tests.unit.decisions.rayservice.world import World, make_service


def deployed() -> World:
    w = World(make_service())
    w.settle()
    return w


def test_suspend_commits_then_tears_down_then_is_suspended() -> None:
    w = deployed()
    active = w.name("active")
    w.update_spec(suspend=True)
    commit = w.step()
    assert commit.commands == [] and commit.status is not None
    assert (w.condition(c.SUSPENDING)["status"], w.condition(c.SUSPENDING)["reason"]) == ("True", c.SUSPEND_REQUESTED)
    # v1.7 handleSuspend: the commit point also resets the serving status and the other conditions.
    assert w.condition(c.SUSPENDING)["message"] == ("Spec.Suspend is true; will delete all Kubernetes resources "
                                                    "owned by this RayService.")
    for type_, message in ((c.READY, "RayService is suspending."), (c.UPGRADE_IN_PROGRESS, "No upgrade in progress."),
                           (c.ROLLBACK_IN_PROGRESS, "No rollback in progress.")):
        cond = w.condition(type_)
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", c.SUSPEND_IN_PROGRESS, message)
    assert w.status["activeServiceStatus"] == {} and w.status["pendingServiceStatus"] == {}
    assert w.status["numServeEndpoints"] == 0 and "serviceStatus" not in w.status
    teardown = w.step()
    deleted = {(x.target.kind, x.target.name) for x in teardown.commands if isinstance(x, DeleteObject)}
    assert deleted == {("RayCluster", active), ("Service", "rayservice-sample-head-svc"),
                       ("Service", "rayservice-sample-serve-svc")}
    # deleteRayServiceOwnedResources' Normal Events (reason, message)
    assert {(x.event_reason, x.reason) for x in teardown.commands if isinstance(x, DeleteObject)} == {
        ("DeletedRayCluster", f"Deleted the RayCluster default/{active} during suspend"),
        ("DeletedService", "Deleted the Service default/rayservice-sample-head-svc during suspend"),
        ("DeletedService", "Deleted the Service default/rayservice-sample-serve-svc during suspend")}
    assert w.condition(c.SUSPENDING)["message"] == ("Waiting for all Kubernetes resources owned by this "
                                                    "RayService to be deleted.")
    assert teardown.interest == []
    done = w.step()
    assert w.condition(c.SUSPENDED)["status"] == "True" and w.condition(c.SUSPENDING)["status"] == "False"
    ready = w.condition(c.READY)
    assert (ready["status"], ready["reason"]) == ("False", c.SUSPEND_COMPLETE)
    assert w.condition(c.ROLLBACK_IN_PROGRESS)["reason"] == c.SUSPEND_COMPLETE
    assert "serviceStatus" not in w.status and w.name("active") == "" and w.name("pending") == ""
    assert done.serve_config_cache == {active: None} and w.cache == {}
    idle = w.step()
    assert (idle.commands, idle.status, idle.requeue_after) == ([], None, None)


def test_suspension_is_atomic_once_committed() -> None:
    w = deployed()
    w.update_spec(suspend=True)
    w.step()  # Suspending=True persisted
    w.update_spec(suspend=False)  # the user changes their mind mid-way
    teardown = w.step()
    assert any(isinstance(x, DeleteObject) for x in teardown.commands)
    w.step()
    assert w.condition(c.SUSPENDED)["status"] == "True"
    w.step()  # resumes (spec.suspend is false)
    assert w.condition(c.SUSPENDED)["reason"] == c.RESUMED and w.name("pending")


def test_resume_reinitializes_and_rearms_the_initializing_timeout() -> None:
    w = World(make_service(annotations={c.INITIALIZING_TIMEOUT_ANNOTATION: "10m"}))
    w.settle()
    w.update_spec(suspend=True)
    for _ in range(3):
        w.step()
    w.advance(3600)
    w.update_spec(suspend=False)
    resume = w.step()
    ready = w.condition(c.READY)
    assert (ready["status"], ready["reason"]) == ("False", c.INITIALIZING)
    assert ready["lastTransitionTime"] == w.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert w.condition(c.UPGRADE_IN_PROGRESS)["reason"] == c.INITIALIZING
    assert ready["message"] == "RayService is initializing after resuming from suspend."
    assert w.condition(c.SUSPENDED)["message"] == "Spec.Suspend is false; RayService has resumed."
    assert resume.requeue_after == timedelta(minutes=10).total_seconds()
    assert w.name("pending")  # a new cluster, as for a new RayService
    w.settle()
    assert w.condition(c.READY)["status"] == "True" and w.condition(c.SUSPENDED)["status"] == "False"


def test_created_suspended_never_creates_a_cluster() -> None:
    w = World(make_service(spec={"suspend": True}))
    for _ in range(3):
        d = w.step()
        assert not any(isinstance(x, DeleteObject) for x in d.commands)
    assert w.clusters == {} and w.condition(c.SUSPENDED)["status"] == "True"
