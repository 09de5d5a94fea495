"""--batch-scheduler plugins: volcano / yunikorn / scheduler-plugins PodGroups and Pod metadata, and
Kueue's part (labels, managedBy, suspend) which needs no plugin (issue 13 item 3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster.batch_scheduler import (
    build_volcano_pod_group,
    calculate_min_resources,
    reconcile_pod_group,
)
from raybus.decisions.cluster.quantity import format_quantity
from raybus.decisions.cluster.reconcile import (
    ClusterDecision,
    ClusterSnapshot,
    CommandFailure,
    reconcile_cluster,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import PatchObject, RecordEvent
from tests.conftest import SAMPLES
from tests.unit.decisions.cluster.test_reconcile_helpers import (
    apply,
    creates,
    later,
    make_cluster,
    worker_group,
)

VOLCANO = OperatorSettings(batch_scheduler="volcano")
YUNIKORN = OperatorSettings(batch_scheduler="yunikorn")
PLUGINS = OperatorSettings(batch_scheduler="scheduler-plugins")


def decide(snapshot: ClusterSnapshot, s: OperatorSettings, seconds: float = 0) -> ClusterDecision:
    return reconcile_cluster(snapshot, settings=s, now=later(seconds), entropy="e")


def labelled(labels: dict[str, str], **spec: Any) -> RayCluster:
    body = make_cluster(**spec).to_manifest()
    body["metadata"]["labels"] = labels
    return RayCluster.model_validate(body)


def test_unknown_batch_scheduler_refuses_to_start() -> None:
    with pytest.raises(ValidationError, match="the scheduler is not supported, name=kai"):
        OperatorSettings(batch_scheduler="kai")


# --- volcano ---------------------------------------------------------------------------------------------
def test_volcano_pod_group_first_then_pods_with_metadata() -> None:
    rc = labelled({"volcano.sh/queue-name": "kuberay-test-queue", "ray.io/priority-class-name": "high"},
                  annotations={"note": "copied"})
    first = decide(ClusterSnapshot(cluster=rc), VOLCANO)
    # No gang member before its gang: this round only creates the PodGroup (and the head Service).
    assert creates(first, "Pod") == [] and first.requeue_after == 2.0
    (pg,) = [c.object for c in creates(first, "PodGroup")]
    d = decide(apply(ClusterSnapshot(cluster=rc), first), VOLCANO, seconds=1)
    assert creates(d, "PodGroup") == [] and len(creates(d, "Pod")) == 3
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1" and pg["metadata"]["name"] == "ray-demo-pg"
    assert pg["metadata"]["annotations"] == {"note": "copied"}
    assert pg["metadata"]["ownerReferences"][0]["controller"] is True
    spec = pg["spec"]
    # head 1 cpu/2Gi + 2 workers x 1 cpu
    assert spec["minMember"] == 3 and spec["minResources"] == {"cpu": "3", "memory": "2Gi"}
    assert spec["queue"] == "kuberay-test-queue" and spec["priorityClassName"] == "high"
    assert [g["name"] for g in spec["subGroupPolicy"]] == ["headgroup", "small"]
    assert spec["subGroupPolicy"][1] == {
        "name": "small", "subGroupSize": 1, "minSubGroups": 2,
        "labelSelector": {"matchLabels": {"ray.io/group": "small"}},
        "matchLabelKeys": ["ray.io/worker-group-replica-index"]}
    for create in creates(d, "Pod"):
        meta, pod_spec = create.object["metadata"], create.object["spec"]
        group = meta["labels"]["ray.io/group"]
        assert meta["annotations"]["scheduling.k8s.io/group-name"] == "ray-demo-pg"
        assert meta["annotations"]["volcano.sh/task-spec"] == group
        assert meta["labels"]["volcano.sh/queue-name"] == "kuberay-test-queue"
        assert meta["labels"]["ray.io/priority-class-name"] == "high"
        assert pod_spec["schedulerName"] == "volcano"


def test_volcano_autoscaling_uses_min_replicas_and_network_topology() -> None:
    rc = labelled({"volcano.sh/network-topology-mode": "hard",
                   "volcano.sh/network-topology-highest-tier-allowed": "2"},
                  groups=[worker_group(replicas=5, minReplicas=1, numOfHosts=2)], enableInTreeAutoscaling=True)
    pg = build_volcano_pod_group(rc, settings=VOLCANO)
    assert pg["spec"]["minMember"] == 3  # head + 1 replica x 2 hosts
    assert {k: format_quantity(v) for k, v in calculate_min_resources(rc).items()} == {"cpu": "3", "memory": "2Gi"}
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert "subGroupPolicy" not in pg["spec"]  # the whole-group topology keeps the legacy policy


def test_volcano_pod_group_is_updated_when_the_size_changes() -> None:
    rc = make_cluster()
    current = build_volcano_pod_group(rc, settings=VOLCANO)
    current["metadata"]["uid"] = "pg-uid"
    assert reconcile_pod_group(rc, existing=[current], settings=VOLCANO) == []
    bigger = make_cluster(groups=[worker_group(replicas=4)])
    (patch,) = reconcile_pod_group(bigger, existing=[current], settings=VOLCANO)
    assert isinstance(patch, PatchObject) and patch.target.kind == "PodGroup" and patch.target.uid == "pg-uid"
    assert patch.target.api_version == "scheduling.volcano.sh/v1beta1"
    assert patch.merge_patch["spec"]["minMember"] == 5 and patch.merge_patch["spec"]["minResources"]["cpu"] == "5"


def test_volcano_skips_clusters_of_a_ray_job() -> None:  # (their Pods go ahead at once)
    rc = labelled({"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "job"})
    d = decide(ClusterSnapshot(cluster=rc), VOLCANO)
    assert creates(d, "PodGroup") == []
    # ... but its Pods still point at the RayJob's PodGroup.
    assert creates(d, "Pod")[0].object["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "ray-job-pg"


def test_suspended_cluster_gets_no_pod_group() -> None:
    assert creates(decide(ClusterSnapshot(cluster=make_cluster(suspend=True)), VOLCANO), "PodGroup") == []


def test_missing_crd_gives_a_clear_warning_and_no_crash() -> None:
    failure = CommandFailure(reason="", message="NotFound: the server could not find the requested resource",
                             target="PodGroup/ns/ray-demo-pg")
    d = decide(ClusterSnapshot(cluster=make_cluster(), last_failures=[failure]), VOLCANO)
    (event,) = [c for c in d.commands if isinstance(c, RecordEvent)]
    assert event.type == "Warning" and event.event_reason == "FailedToCreatePodGroup"
    assert "podgroups.scheduling.volcano.sh" in event.message and "ray-demo-pg" in event.message
    assert creates(d, "PodGroup") and d.requeue_after is None  # retried with the rate limiter's backoff
    assert creates(d, "Pod") == []  # still no Pod without the PodGroup


def test_volcano_converges_and_creates_the_pod_group_once() -> None:
    snapshot = ClusterSnapshot(cluster=make_cluster())
    made = 0
    for i in range(5):
        d = decide(snapshot, VOLCANO, seconds=i)
        made += len(creates(d, "PodGroup"))
        snapshot = apply(snapshot, d)
    assert made == 1 and len(snapshot.pods) == 3


# --- yunikorn --------------------------------------------------------------------------------------------
def test_yunikorn_sample_labels_and_task_groups() -> None:
    import yaml

    body = yaml.safe_load((SAMPLES / "ray-cluster.yunikorn-scheduler.yaml").read_text())
    body["metadata"].update(namespace="ns", uid="u", generation=1, resourceVersion="1")
    d = decide(ClusterSnapshot(cluster=RayCluster.model_validate(body)), YUNIKORN)
    assert creates(d, "PodGroup") == []
    pods = creates(d, "Pod")
    assert len(pods) == 3
    for create in pods:
        meta = create.object["metadata"]
        assert meta["labels"]["applicationId"] == "test-yunikorn-0" and meta["labels"]["queue"] == "root.test"
        assert create.object["spec"]["schedulerName"] == "yunikorn"
        assert meta["annotations"]["yunikorn.apache.org/task-group-name"] == meta["labels"]["ray.io/group"]
        groups = json.loads(meta["annotations"]["yunikorn.apache.org/task-groups"])
        assert groups == [
            {"minResource": {"cpu": "1", "memory": "2Gi"}, "name": "headgroup", "minMember": 1},
            {"minResource": {"cpu": "1", "memory": "1Gi"}, "name": "worker", "minMember": 2},
        ]


def test_yunikorn_without_gang_label_has_no_task_groups() -> None:
    rc = labelled({"yunikorn.apache.org/app-id": "app"})
    meta = creates(decide(ClusterSnapshot(cluster=rc), YUNIKORN), "Pod")[0].object["metadata"]
    assert meta["labels"]["applicationId"] == "app" and "queue" not in meta["labels"]
    assert not any(a.startswith("yunikorn.apache.org/task-group") for a in meta.get("annotations") or {})


# --- scheduler-plugins -----------------------------------------------------------------------------------
def test_scheduler_plugins_gang_pod_group() -> None:
    rc = labelled({"ray.io/gang-scheduling-enabled": "true"})
    first = decide(ClusterSnapshot(cluster=rc), PLUGINS)
    assert creates(first, "Pod") == []
    (pg,) = [c.object for c in creates(first, "PodGroup")]
    d = decide(apply(ClusterSnapshot(cluster=rc), first), PLUGINS, seconds=1)
    assert pg["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and pg["metadata"]["name"] == "demo"
    assert pg["spec"] == {"minMember": 3, "minResources": {"cpu": "3", "memory": "2Gi"}}
    assert "controller" not in pg["metadata"]["ownerReferences"][0]
    for create in creates(d, "Pod"):
        assert create.object["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "demo"
        assert create.object["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    existing = [dict(pg, metadata={**pg["metadata"], "uid": "x"})]
    assert reconcile_pod_group(make_cluster(groups=[worker_group(replicas=7)]), existing=existing,
                               settings=PLUGINS) == []  # never updated


def test_scheduler_plugins_without_gang_only_sets_the_scheduler() -> None:
    d = decide(ClusterSnapshot(cluster=make_cluster()), PLUGINS)
    assert creates(d, "PodGroup") == []
    assert all(c.object["spec"]["schedulerName"] == "scheduler-plugins-scheduler" for c in creates(d, "Pod"))


def test_default_scheduler_leaves_pods_alone() -> None:
    for create in creates(decide(ClusterSnapshot(cluster=make_cluster()), OperatorSettings()), "Pod"):
        assert "schedulerName" not in create.object["spec"]


# --- Kueue: no plugin; KubeRay honours its managedBy and suspend ------------------------------------------
def test_kueue_queue_label_suspend_and_multikueue() -> None:
    queued = labelled({"kueue.x-k8s.io/queue-name": "user-queue"}, suspend=True)
    d = decide(ClusterSnapshot(cluster=queued), OperatorSettings())
    assert creates(d, "Pod") == [] and d.status is not None
    assert any(c["type"] == "RayClusterSuspending" and c["status"] == "True" for c in d.status["conditions"])
    admitted = labelled({"kueue.x-k8s.io/queue-name": "user-queue"}, suspend=False)
    assert len(creates(decide(ClusterSnapshot(cluster=admitted), OperatorSettings()), "Pod")) == 3
    remote = make_cluster(managedBy="kueue.x-k8s.io/multikueue")
    d = decide(ClusterSnapshot(cluster=remote), OperatorSettings())
    assert d.commands == [] and d.status is None
