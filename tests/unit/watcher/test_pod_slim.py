"""The watcher publishes Pods without what their containers run (routing.sanitize, issue 20):
checked on the Pods the RayCluster decisions really build (the sample RayCluster), at several
stages of their life, against every bus reader of a Pod's spec: reconcile_cluster decides the
same on the published copies as on the API's, the RayService serving port is kept, a Pod update
wakes the RayCluster exactly when it did before, and the bytes on the bus shrink."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from raybus.api import RayCluster
from raybus.bus import subjects as s
from raybus.decisions.cluster.expectations import ScaleExpectations
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject
from raybus.decisions.rayservice.services import serving_port
from watcher.routing import pod_update_matters, sanitize

SAMPLE = Path(__file__).resolve().parents[3] / "deploy/samples/ray-cluster.sample.yaml"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
Pod = dict[str, Any]


def _cluster() -> RayCluster:
    body = yaml.safe_load(SAMPLE.read_text())
    body["metadata"] = {"name": "c1", "namespace": "ns", "uid": "u-1", "resourceVersion": "5",
                        "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"}
    body["spec"]["workerGroupSpecs"][0].update(replicas=3, minReplicas=0, maxReplicas=3)
    return RayCluster.model_validate(body)


def _decide(cluster: RayCluster, pods: list[Pod]) -> Any:
    snap = ClusterSnapshot(cluster=cluster, pods=pods, expectations=ScaleExpectations(), batch_id="b1")
    return reconcile_cluster(snap, settings=OperatorSettings(), now=NOW + timedelta(seconds=30),
                             entropy="e")


def _built_pods(cluster: RayCluster) -> list[Pod]:
    """The head and worker Pods as created, with what the API server adds."""
    out = []
    for i, cmd in enumerate(c for c in _decide(cluster, []).commands
                            if isinstance(c, CreateObject) and c.object.get("kind") == "Pod"):
        p = copy.deepcopy(cmd.object)
        p["metadata"].update(uid=f"pod-{i}", resourceVersion=str(100 + i),
                             creationTimestamp="2026-01-01T00:00:01Z",
                             managedFields=[{"manager": "raybus", "fieldsV1": {"f:spec": {}}}])
        for c in p["spec"]["containers"]:
            c.update(terminationMessagePath="/dev/termination-log", imagePullPolicy="IfNotPresent")
        p["spec"].update(restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler")
        out.append(p)
    assert len(out) == 4  # head + 3 workers
    return out


def _status(p: Pod, *, phase: str, ready: bool, terminated: bool = False) -> Pod:
    p = copy.deepcopy(p)
    name = p["spec"]["containers"][0]["name"]
    state = {"terminated": {"exitCode": 1, "reason": "Error"}} if terminated else {"running": {}}
    p["status"] = {"phase": phase, "podIP": "10.0.0.9", "hostIP": "172.18.0.2",
                   "conditions": [{"type": "Ready", "status": str(ready)}],
                   "containerStatuses": [{"name": name, "ready": ready, "state": state,
                                          "image": "rayproject/ray:2.52.0"}]}
    return p


def _stages(pods: list[Pod]) -> dict[str, list[Pod]]:
    never = copy.deepcopy(pods[3])
    never["spec"]["restartPolicy"] = "Never"
    return {
        "pending": [_status(p, phase="Pending", ready=False) for p in pods],
        "ready": [_status(p, phase="Running", ready=True) for p in pods],
        "one worker failed": [_status(p, phase="Running", ready=True) for p in pods[:3]]
        + [_status(pods[3], phase="Failed", ready=False)],
        "ray container terminated, restartPolicy Never": [
            _status(p, phase="Running", ready=True) for p in pods[:3]]
        + [_status(never, phase="Running", ready=False, terminated=True)],
        "ray container terminated, restartPolicy Always": [
            _status(p, phase="Running", ready=True) for p in pods[:3]]
        + [_status(pods[3], phase="Running", ready=False, terminated=True)],
    }


CLUSTER = _cluster()
STAGES = _stages(_built_pods(CLUSTER))


@pytest.mark.parametrize("stage", list(STAGES))
def test_the_cluster_decides_the_same_on_published_pods(stage: str) -> None:
    pods = STAGES[stage]
    published = [sanitize(p) for p in pods]
    assert all("env" not in c for p in published for c in p["spec"]["containers"])
    assert _decide(CLUSTER, published).model_dump() == _decide(CLUSTER, copy.deepcopy(pods)).model_dump()


def test_published_pods_keep_what_readers_use_and_shrink() -> None:
    for p in STAGES["ready"]:
        out = sanitize(p)
        assert p["spec"]["containers"][0].get("env")  # the input is not mutated
        assert serving_port(out) == serving_port(p)
        assert [c["name"] for c in out["spec"]["containers"]] == [c["name"] for c in p["spec"]["containers"]]
        for field in ("ports", "resources", "image"):
            assert out["spec"]["containers"][0].get(field) == p["spec"]["containers"][0].get(field)
        assert out["spec"]["restartPolicy"] == p["spec"]["restartPolicy"]
        assert out["metadata"] == {k: v for k, v in p["metadata"].items() if k != "managedFields"}
        assert out["status"] == p["status"]
        assert sanitize(out) == out  # idempotent: the watcher sanitizes the previous version again
        assert len(json.dumps(out)) < 0.5 * len(json.dumps(p))


@pytest.mark.parametrize(("before", "after", "matters"), [
    ("pending", "ready", True),
    ("ready", "one worker failed", True),
    ("ready", "ready", False),
])
def test_pod_updates_wake_the_cluster_as_before(before: str, after: str, matters: bool) -> None:
    for old, new in zip(STAGES[before], STAGES[after], strict=True):
        new = copy.deepcopy(new)
        new["metadata"]["resourceVersion"] = "999"
        new["status"]["hostIP"] = "172.18.0.3"  # never read: alone it wakes no RayCluster
        want = pod_update_matters(s.Kind.POD, old, new)
        assert pod_update_matters(s.Kind.POD, sanitize(old), sanitize(new)) == want
        if old is STAGES[before][-1]:
            assert want == matters
