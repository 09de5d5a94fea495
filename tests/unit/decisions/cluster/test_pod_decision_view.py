"""podutil.decision_view: the Pod fields the RayCluster decisions read. The watcher wakes a
RayCluster for a Pod update only when its view changed (watcher.routing.pod_update_matters), so
an update outside the view must never change reconcile_cluster's decision: checked here on the
real decision code, at every stage of a cluster's life, for every field the view leaves out."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from raybus.decisions.cluster.expectations import ScaleExpectations
from raybus.decisions.cluster.podutil import clusters_to_wake, decision_view, is_worker
from raybus.decisions.cluster.reconcile import ClusterDecision, ClusterSnapshot, reconcile_cluster
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    SETTINGS,
    head_service,
    later,
    make_cluster,
    pod,
    worker_group,
)

Pod = dict[str, Any]


def _bind(p: Pod) -> None:  # the scheduler's binding
    p["spec"]["nodeName"] = "node-a"
    p["status"].setdefault("conditions", []).append({"type": "PodScheduled", "status": "True"})


def _kubelet(p: Pod) -> None:  # the kubelet's bookkeeping around the container states
    st = p["status"]
    st.update(startTime="2026-01-01T00:00:01Z", hostIP="172.18.0.2", hostIPs=[{"ip": "172.18.0.2"}],
              podIPs=[{"ip": "10.9.9.9"}], qosClass="Burstable", nominatedNodeName="n")
    st["initContainerStatuses"] = [{"name": "wait-gcs-ready", "ready": False,
                                    "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}}]
    st.setdefault("conditions", []).extend([
        {"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized"},
        {"type": "PodReadyToStartContainers", "status": "True"},
        {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady"}])


def _worker_ip(p: Pod) -> None:
    if p["metadata"]["labels"]["ray.io/node-type"] != "head":
        p["status"]["podIP"] = "10.7.7.7"


def _rv(p: Pod) -> None:
    p["metadata"]["resourceVersion"] = "987654"
    p["metadata"]["managedFields"] = [{"manager": "kubelet"}]


def _worker_containers(p: Pod) -> None:
    """The kubelet's container bookkeeping of a worker, short of the Ray container terminating:
    waiting reasons, the running state's details, the ready flag, restarts, a sidecar's state."""
    if not is_worker(p):
        return
    for cs in p["status"].get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "terminated" not in state:
            cs["state"] = {"waiting": {"reason": "ContainerCreating"}} if "waiting" not in state \
                else {"running": {"startedAt": "2026-01-01T00:00:03Z"}}
        cs.update(ready=not cs.get("ready"), restartCount=3, containerID="containerd://abc",
                  lastState={"terminated": {"exitCode": 137}}, started=True)
    p["status"].setdefault("containerStatuses", []).append(
        {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}})


def _worker_ready_while_not_running(p: Pod) -> None:
    """A worker's Ready condition while it is not Running (the kubelet's first status writes
    Ready=False while Pending), and a Running worker's Ready reason and times."""
    if not is_worker(p):
        return
    conditions = p["status"].setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == "Ready":
            cond.update(reason="PodCompleted", lastTransitionTime="2026-01-01T00:00:04Z", message="m")
            if p["status"].get("phase") != "Running":
                cond["status"] = "Unknown" if cond.get("status") == "False" else "False"
    if not any(c.get("type") == "Ready" for c in conditions) and p["status"].get("phase") != "Running":
        conditions.append({"type": "Ready", "status": "False", "reason": "ContainersNotReady"})


UNREAD: list[Callable[[Pod], None]] = [_bind, _kubelet, _worker_ip, _rv, _worker_containers,
                                       _worker_ready_while_not_running]


def _head_waiting(ready: bool) -> Pod:
    head = pod("demo-head", node_type="head", phase="Running" if ready else "Pending", ready=ready)
    if not ready:
        head["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                                         "message": "containers with unready status: [ray-head]"}]
        head["status"]["containerStatuses"] = [{"name": "ray-head", "ready": False, "state": {
            "waiting": {"reason": "ContainerCreating"}}}]
    return head


# A cluster with 3 workers wanted, at the stages its Pods go through.
STAGES: dict[str, list[Pod]] = {
    "head pending, no workers": [_head_waiting(False)],
    "head ready, workers pending": [
        _head_waiting(True), *[pod(f"demo-w{i}", phase="Pending", ready=False) for i in range(3)]],
    "all running and ready": [
        _head_waiting(True), *[pod(f"demo-w{i}") for i in range(3)]],
    "one worker failed, one missing": [
        _head_waiting(True), pod("demo-w0"), pod("demo-w1", phase="Failed", ready=False)],
    "ray container terminated, restartPolicy Never": [
        _head_waiting(True), pod("demo-w0"), pod("demo-w1"),
        pod("demo-w2", restart_policy="Never", terminated=True, ready=False)],
    "no pods": [],
}


def _decide(pods: list[Pod]) -> ClusterDecision:
    cluster = make_cluster(groups=[worker_group(replicas=3)])
    snap = ClusterSnapshot(cluster=cluster, pods=pods, services=[head_service(cluster_ip="10.96.0.1")],
                           expectations=ScaleExpectations(), batch_id="b1")
    return reconcile_cluster(snap, settings=SETTINGS, now=later(5), entropy="e")


@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("mutate", UNREAD, ids=lambda f: f.__name__)
def test_updates_outside_the_view_decide_the_same(stage: str, mutate: Callable[[Pod], None]) -> None:
    pods = STAGES[stage]
    changed = copy.deepcopy(pods)
    for p in changed:
        mutate(p)
    assert [decision_view(p) for p in changed] == [decision_view(p) for p in pods]
    before, after = _decide(copy.deepcopy(pods)), _decide(changed)
    assert after.model_dump() == before.model_dump()


def _ready(p: Pod) -> None:
    p["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]


def _phase(p: Pod) -> None:
    p["status"]["phase"] = "Failed"


def _head_ip(p: Pod) -> None:
    p["status"]["podIP"] = "10.5.5.5"


def _container(p: Pod) -> None:
    p["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 1, "reason": "Error"}}


def _container_never(p: Pod) -> None:
    p["spec"]["restartPolicy"] = "Never"
    _container(p)


def _label(p: Pod) -> None:
    p["metadata"]["labels"]["ray.io/group"] = "other"


@pytest.mark.parametrize(("mutate", "index"), [
    (_ready, 0), (_phase, 0), (_head_ip, 0), (_container, 0),  # the head
    (_ready, 1), (_phase, 1), (_container_never, 1), (_label, 1),  # a worker
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_what_the_decisions_read_is_in_the_view(mutate: Callable[[Pod], None], index: int) -> None:
    """And each of these changes the decision: a view that left one out would skip a decision."""
    pods = STAGES["all running and ready"]
    changed = copy.deepcopy(pods)
    mutate(changed[index])
    assert decision_view(changed[index]) != decision_view(pods[index])
    assert _decide(changed).model_dump() != _decide(copy.deepcopy(pods)).model_dump()


def test_the_heads_waiting_reason_stays_in_its_view() -> None:
    """Unlike a worker's: HeadPodReady carries the head container's waiting reason and message."""
    pods = STAGES["head pending, no workers"]
    changed = copy.deepcopy(pods)
    changed[0]["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "ray"'}}
    assert decision_view(changed[0]) != decision_view(pods[0])
    assert _decide(changed).model_dump() != _decide(copy.deepcopy(pods)).model_dump()


def _labelled(cluster: str, **status: Any) -> Pod:
    return {"metadata": {"name": "p", "namespace": "ns", "labels": {"ray.io/cluster": cluster,
                                                                    "ray.io/node-type": "worker"}},
            "spec": {"containers": [{"name": "ray"}]}, "status": {"phase": "Pending", **status}}


@pytest.mark.parametrize(("old", "new", "woken"), [
    (None, _labelled("a"), ("a",)),  # created
    (_labelled("a"), None, ("a",)),  # deleted
    (_labelled("a"), _labelled("a", hostIP="172.18.0.2", startTime="t"), ()),  # bookkeeping only
    (_labelled("a"), _labelled("a", phase="Running"), ("a",)),
    (_labelled("a"), _labelled("b"), ("b", "a")),  # relabelled: both clusters look again
    (None, {"metadata": {"name": "p", "namespace": "ns"}}, ()),  # no cluster label
])
def test_a_pod_event_wakes_the_clusters_whose_decision_it_may_change(
        old: Pod | None, new: Pod | None, woken: tuple[str, ...]) -> None:
    """podutil.clusters_to_wake: what the cluster-reconciler's cache wakes (no trigger on the bus)."""
    assert clusters_to_wake(old, new) == woken
