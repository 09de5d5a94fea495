"""ray.io/rayservice-finalizer (KubeRay v1.7, kuberay#4807): added first; on deletion the RayService's
RayClusters are deleted at once (no rayClusterDeletionDelaySeconds) and the finalizer goes when none
is left."""

from __future__ import annotations

import pytest

from raybus.decisions.commands import DeleteObject, PatchObject
from raybus.decisions.rayservice import constants as c
from tests.unit.decisions.rayservice.world import World, make_service

FINALIZER = "ray.io/rayservice-finalizer"


def deployed(**spec: object) -> World:
    w = World(make_service(spec=dict(spec) or None))
    w.settle()
    return w


def test_a_new_rayservice_first_gets_its_finalizer_and_nothing_else() -> None:
    raw = make_service()
    raw["metadata"]["finalizers"] = ["someone-else"]
    raw["metadata"]["resourceVersion"] = "7"
    w = World(raw)
    d = w.step()
    assert d.status is None and d.dashboard_commands == [] and d.interest == []
    [patch] = d.commands
    assert isinstance(patch, PatchObject) and patch.target.kind == "RayService"
    assert patch.merge_patch == {"metadata": {"finalizers": ["someone-else", FINALIZER], "resourceVersion": "7"}}
    assert w.clusters == {}
    for _ in range(3):
        w.step()
    assert w.clusters, "the reconcile goes on as usual once the finalizer is there"


@pytest.mark.parametrize(("name", "delay"), [("default delay", None), ("long delay", 3600)])
def test_deletion_deletes_every_cluster_at_once_then_drops_the_finalizer(name: str, delay: int | None) -> None:
    w = deployed(**({"rayClusterDeletionDelaySeconds": delay} if delay is not None else {}))
    # An upgrade in flight: active and pending clusters both exist.
    w.update_spec(rayClusterConfig={**w.service["spec"]["rayClusterConfig"], "rayVersion": "2.53.0"})
    w.step()
    w.step()
    names = sorted(w.clusters)
    assert len(names) == 2, name
    w.service["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    d = w.step()
    assert sorted(x.target.name for x in d.commands if isinstance(x, DeleteObject)) == names
    assert {x.event_reason for x in d.commands if isinstance(x, DeleteObject)} == {c.DELETED_RAY_CLUSTER}
    assert not any(isinstance(x, PatchObject) for x in d.commands)  # clusters still listed
    assert w.clusters == {} and FINALIZER in w.service["metadata"]["finalizers"]
    last = w.step()
    assert [x.merge_patch for x in last.commands] == [{"metadata": {"finalizers": []}}]
    assert w.service["metadata"]["finalizers"] == []


def test_clusters_already_deleting_are_waited_for_not_deleted_again() -> None:
    w = deployed()
    [name] = list(w.clusters)
    w.clusters[name]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w.service["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    d = w.step()
    assert d.commands == [] and d.status is None  # the finalizer stays while the cluster is listed


def test_foreign_clusters_do_not_hold_the_finalizer() -> None:
    w = World(make_service())
    w.clusters["other"] = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                           "metadata": {"name": "other", "namespace": "default",
                                        "labels": {"ray.io/originated-from-cr-name": "another",
                                                   "ray.io/originated-from-crd": "RayService"}}}
    w.service["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    d = w.step()
    assert [type(x).__name__ for x in d.commands] == ["PatchObject"]
