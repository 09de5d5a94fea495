"""Command -> API mapping, KubeRay failure reasons and Event shape; Executor semantics against a
scripted client (the real API server is exercised in tests/integration/boundary)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from command_executor.executor import Executor
from command_executor.mapping import (
    event_action,
    event_manifest,
    failed_event_reason,
    failure_reason,
    involved_object,
    reporting_controller,
    target_of,
)
from raybus.adapters.kube import KubeError, Resource
from raybus.bus.envelopes import CommandBatch, ObjectKey
from raybus.decisions.commands import (
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    RecordEvent,
    UpdateStatus,
)

POD = ObjectRef(api_version="v1", kind="Pod", namespace="ns", name="p")
RC = ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace="ns", name="rc", uid="u1")


def pod(node_type: str, name: str = "p") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"ray.io/node-type": node_type}}}


def batch(*commands: Any) -> CommandBatch:
    return CommandBatch(key=ObjectKey(namespace="ns", name="rc"), kind="raycluster", uid="u1",
                        controller="cluster", reconcile_id="r1", commands=list(commands))


def test_kuberay_replica_failure_reasons() -> None:
    assert failure_reason(CreateObject(reason="r", object=pod("head"))) == "FailedCreateHeadPod"
    assert failure_reason(CreateObject(reason="r", object=pod("worker"))) == "FailedCreateWorkerPod"
    assert failure_reason(DeleteObject(reason="r", target=POD, event_reason="DeletedHeadPod")) == \
        "FailedDeleteHeadPod"
    assert failure_reason(DeleteObject(reason="r", target=POD, event_reason="DeletedWorkerPod")) == \
        "FailedDeleteWorkerPod"
    assert failure_reason(DeleteObject(reason="suspend", target=POD, event_reason="DeletedAllPods")) == \
        "FailedDeleteAllPods"
    assert failure_reason(UpdateStatus(reason="r", target=RC, status={})) is None
    assert failure_reason(CreateObject(reason="r", object={"apiVersion": "v1", "kind": "Service",
                                                           "metadata": {"name": "s"}})) is None


def test_failed_event_reasons_mirror_kuberay_constants() -> None:
    assert failed_event_reason("CreatedWorkerPod") == "FailedToCreateWorkerPod"
    assert failed_event_reason("DeletedHeadPod") == "FailedToDeleteHeadPod"
    assert failed_event_reason("CreatedService") == "FailedToCreateService"
    assert failed_event_reason(None) is None and failed_event_reason("Whatever") is None


def test_event_manifest_like_kuberay_v1_7_recorder() -> None:
    """events.k8s.io/v1 with action and the per-controller reportingController (v1.7)."""
    now = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    ev = event_manifest(RC, type_="Normal", reason="CreatedHeadPod", message="Created head Pod ns/p",
                        now=now, host="h")
    assert ev["apiVersion"] == "events.k8s.io/v1" and ev["kind"] == "Event"
    assert ev["metadata"]["name"].startswith("rc.") and ev["metadata"]["namespace"] == "ns"
    assert ev["regarding"] == {"apiVersion": "ray.io/v1", "kind": "RayCluster", "namespace": "ns",
                               "name": "rc", "uid": "u1"}
    assert (ev["reason"], ev["note"], ev["type"], ev["action"]) == (
        "CreatedHeadPod", "Created head Pod ns/p", "Normal", "Create")
    assert ev["reportingController"] == "raycluster-controller"
    assert ev["reportingInstance"] == "raycluster-controller-h"
    assert ev["eventTime"] == "2026-01-02T03:04:05.123456Z"
    assert "series" not in ev and "count" not in ev


@pytest.mark.parametrize(("reason", "action"), [
    ("CreatedWorkerPod", "Create"), ("FailedToCreateHeadPod", "Create"), ("DeletedRayCluster", "Delete"),
    ("FailedToDeleteWorkerPodCollection", "Delete"), ("UpdatedServeApplications", "Update"),
    ("FailedToUpdateTargetCapacity", "Update"), ("InvalidRayServiceSpec", "Validate"),
    ("InvalidRayClusterSpec", "Validate"), ("AutoscalerServiceAccountNotFound", "Validate"),
    ("ForceDeletedStuckCluster", "Cleanup"), ("BatchSchedulerCleanedUp", "Cleanup"),
    ("RollbackImpossible", "Reconcile"), ("RayServiceInitializingTimeout", "Reconcile"),
])
def test_event_action(reason: str, action: str) -> None:
    assert event_action(reason) == action


@pytest.mark.parametrize(("kind", "reason", "controller"), [
    ("RayCluster", "CreatedHeadPod", "raycluster-controller"),
    ("RayJob", "CreatedRayJobSubmitter", "rayjob-controller"),
    ("RayService", "UpdatedServeApplications", "rayservice-controller"),
    ("RayCluster", "CreatedNetworkPolicy", "networkpolicy-controller"),
])
def test_reporting_controller(kind: str, reason: str, controller: str) -> None:
    involved = ObjectRef(api_version="ray.io/v1", kind=kind, namespace="ns", name="x")
    assert reporting_controller(involved, reason) == controller


def test_targets_and_involved_object() -> None:
    b = batch(CreateObject(reason="r", object=pod("head")))
    assert target_of(b.commands[0], b) == ObjectRef(api_version="v1", kind="Pod", namespace="ns", name="p")
    assert involved_object(b) == RC


class ScriptedKube:
    """Records calls; `fail` maps (verb, name) to a list of errors raised in turn."""

    def __init__(self, fail: dict[tuple[str, str], list[KubeError]] | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail or {}
        self.rv = 0

    def _maybe_fail(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        errors = self.fail.get((verb, name))
        if errors:
            raise errors.pop(0)

    async def create(self, res: Resource, body: dict[str, Any], *, namespace: str | None) -> dict[str, Any]:
        self._maybe_fail("create", body["metadata"]["name"])
        return body

    async def delete(self, res: Resource, *, namespace: str | None, name: str, uid: str | None = None,
                     propagation: str | None = None) -> dict[str, Any]:
        self._maybe_fail("delete", name)
        return {}

    async def merge_patch(self, res: Resource, *, namespace: str | None, name: str,
                          patch: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("patch", name)
        return {}

    async def get(self, res: Resource, *, namespace: str | None, name: str) -> dict[str, Any]:
        self._maybe_fail("get", name)
        self.rv += 1
        return {"metadata": {"name": name, "namespace": namespace, "uid": "u1", "resourceVersion": str(self.rv)}}

    async def replace_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("status", obj["metadata"]["name"])
        return obj


async def test_already_exists_and_not_found_are_success() -> None:
    kube = ScriptedKube({("create", "p"): [KubeError(409, "AlreadyExists", "")],
                         ("delete", "p"): [KubeError(404, "NotFound", "")]})
    out = await Executor(kube).apply(batch(CreateObject(reason="r", object=pod("worker")),
                                           DeleteObject(reason="r", target=POD)))  # type: ignore[arg-type]
    assert [r.ok for r in out.results] == [True, True] and not out.failed
    assert [r.code for r in out.results] == [409, 404]


async def test_status_conflict_retries_against_fresh_state() -> None:
    kube = ScriptedKube({("status", "rc"): [KubeError(409, "Conflict", ""), KubeError(409, "Conflict", "")]})
    out = await Executor(kube).apply(batch(UpdateStatus(reason="r", target=RC, status={"state": "ready"})))  # type: ignore[arg-type]
    assert out.results[0].ok
    assert kube.calls == [("get", "rc"), ("status", "rc")] * 3


async def test_status_conflict_gives_up_after_bounded_retries() -> None:
    kube = ScriptedKube({("status", "rc"): [KubeError(409, "Conflict", "")] * 10})
    out = await Executor(kube, status_retries=3).apply(  # type: ignore[arg-type]
        batch(UpdateStatus(reason="r", target=RC, status={})))
    assert not out.results[0].ok and out.results[0].code == 409 and not out.transient
    assert kube.calls.count(("status", "rc")) == 3


async def test_first_failure_stops_the_batch_and_reports_kuberay_reason() -> None:
    kube = ScriptedKube({("create", "w1"): [KubeError(403, "Forbidden", "exceeded quota")]})
    out = await Executor(kube, create_parallelism=1).apply(batch(  # type: ignore[arg-type]
        CreateObject(reason="r", object=pod("worker", "w0"), event_reason="CreatedWorkerPod"),
        CreateObject(reason="r", object=pod("worker", "w1"), event_reason="CreatedWorkerPod"),
        CreateObject(reason="r", object=pod("worker", "w2"), event_reason="CreatedWorkerPod")))
    assert [r.ok for r in out.results] == [True, False, False]
    assert out.results[1].error_reason == "FailedCreateWorkerPod" and out.results[1].code == 403
    assert "skipped" in out.results[2].message
    assert ("create", "w2") not in kube.calls
    created = [c for c in kube.calls if c[0] == "create"]
    # w0, its Normal event, w1 (failed), its Warning event
    assert [n for _, n in created][:1] == ["w0"] and len(created) == 4


async def test_parallel_creates_stop_after_the_failed_step() -> None:
    kube = ScriptedKube({("create", "w1"): [KubeError(403, "Forbidden", "exceeded quota")]})
    cmds = [CreateObject(reason="r", object=pod("worker", f"w{i}"), event_reason="CreatedWorkerPod")
            for i in range(5)]
    out = await Executor(kube, create_parallelism=2).apply(batch(*cmds))  # type: ignore[arg-type]
    # steps [w0, w1] [w2, w3] [w4]: the first step fails, nothing after it is attempted
    assert [r.ok for r in out.results] == [True, False, False, False, False]
    assert all("skipped" in r.message for r in out.results[2:])
    assert {n for op, n in kube.calls if op == "create" and n.startswith("w")} == {"w0", "w1"}


@pytest.mark.parametrize("code", [429, 500, 503, 0])
async def test_transient_errors_flag_the_batch_for_redelivery(code: int) -> None:
    kube = ScriptedKube({("patch", "rc"): [KubeError(code, "X", "")]})
    out = await Executor(kube).apply(batch(  # type: ignore[arg-type]
        PatchObject(reason="r", target=RC, merge_patch={"spec": {}})))
    assert out.transient and out.failed


async def test_repeated_event_bumps_count_instead_of_new_event() -> None:
    kube = ScriptedKube()
    ex = Executor(kube)  # type: ignore[arg-type]
    cmd = RecordEvent(reason="r", target=RC, event_reason="Unhealthy", message="m", type="Warning")
    await ex.apply(batch(cmd))
    await ex.apply(batch(cmd))
    assert [c[0] for c in kube.calls] == ["create", "patch"]


async def test_secret_error_messages_are_withheld() -> None:
    leak = KubeError(422, "Invalid", 'Secret "s" is invalid: data[token]: Invalid value: "hunter2"')
    kube = ScriptedKube({("create", "s"): [leak]})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"token": "aHVudGVyMg=="}}
    out = await Executor(kube).apply(batch(CreateObject(reason="r", object=secret)))  # type: ignore[arg-type]
    assert not out.results[0].ok and "hunter2" not in out.results[0].message


class EventsKube:
    """Records Event writes by API group; `forbid_new` answers events.k8s.io creates with 403."""

    def __init__(self, *, forbid_new: bool) -> None:
        self.forbid_new = forbid_new
        self.writes: list[tuple[str, str, dict[str, Any]]] = []

    async def create(self, res: Resource, body: dict[str, Any], *, namespace: str | None) -> dict[str, Any]:
        if self.forbid_new and res.group == "events.k8s.io":
            raise KubeError(403, "Forbidden", "events.events.k8s.io is forbidden")
        self.writes.append((res.group, "create", body))
        return body

    async def merge_patch(self, res: Resource, *, namespace: str | None, name: str,
                          patch: dict[str, Any]) -> dict[str, Any]:
        self.writes.append((res.group, "patch", patch))
        return {}


@pytest.mark.parametrize(("forbid_new", "group", "repeat"), [
    (False, "events.k8s.io", {"series": {"count": 2}}),
    (True, "", {"count": 2}),  # no RBAC for events.k8s.io: core/v1 Events, never none
])
async def test_events_api_group_and_repeats(forbid_new: bool, group: str, repeat: dict[str, Any]) -> None:
    kube = EventsKube(forbid_new=forbid_new)
    executor = Executor(kube, events_kube=kube)  # type: ignore[arg-type]
    for _ in range(2):
        await executor.record_event(RC, type_="Warning", reason="FailedToCreateHeadPod", message="boom")
    (g1, verb1, body), (g2, verb2, patch) = kube.writes
    assert (g1, verb1, g2, verb2) == (group, "create", group, "patch")
    if group:
        assert body["action"] == "Create" and body["reportingController"] == "raycluster-controller"
        assert patch["series"]["count"] == repeat["series"]["count"] and patch["series"]["lastObservedTime"]
    else:
        assert body["involvedObject"]["name"] == "rc" and body["reportingComponent"] == "raycluster-controller"
        assert patch["count"] == repeat["count"]
