"""GenerateHashWithoutReplicasAndWorkersToDelete: which spec changes trigger a Recreate upgrade."""

from __future__ import annotations

import re
from typing import Any

import pytest

from raybus.api.raycluster import RayClusterSpec
from raybus.decisions.cluster.hashing import generate_hash_without_replicas_and_workers_to_delete, json_hash
from tests.unit.decisions.cluster.test_reconcile_helpers import make_cluster, worker_group


def spec(**kw: Any) -> RayClusterSpec:
    return make_cluster(**kw).spec


BASE = generate_hash_without_replicas_and_workers_to_delete(spec())


@pytest.mark.parametrize(
    "kw",
    [
        {"groups": [worker_group(replicas=7)]},
        {"groups": [worker_group(minReplicas=3)]},
        {"groups": [worker_group(maxReplicas=99)]},
        {"groups": [worker_group(scaleStrategy={"workersToDelete": ["a", "b"]})]},
        {"groups": [worker_group(scaleStrategy={})]},
        {"upgradeStrategy": {"type": "Recreate"}},
        {"upgradeStrategy": {"type": "None"}},
    ],
)
def test_ignored_fields_do_not_change_hash(kw: dict[str, Any]) -> None:
    assert generate_hash_without_replicas_and_workers_to_delete(spec(**kw)) == BASE


@pytest.mark.parametrize(
    "kw",
    [
        {"rayVersion": "2.47.0"},
        {"groups": [worker_group(numOfHosts=2)]},
        {"groups": [worker_group("renamed")]},
        {"groups": [worker_group(rayStartParams={"num-cpus": "2"})]},
        {"groups": [worker_group(), worker_group("second")]},
        {"enableInTreeAutoscaling": True},
        {"suspend": True},
    ],
)
def test_relevant_fields_change_hash(kw: dict[str, Any]) -> None:
    assert generate_hash_without_replicas_and_workers_to_delete(spec(**kw)) != BASE


def test_defaulting_does_not_change_hash() -> None:
    raw = worker_group()
    for key in ("replicas", "minReplicas", "maxReplicas", "rayStartParams"):
        raw.pop(key)
    bare = spec(groups=[raw])
    assert generate_hash_without_replicas_and_workers_to_delete(
        bare
    ) == generate_hash_without_replicas_and_workers_to_delete(spec(groups=[worker_group(rayStartParams={})]))


def test_hash_is_base32hex_sha1_and_key_order_independent() -> None:
    assert re.fullmatch(r"[0-9A-V]{32}=*", BASE)
    assert json_hash({"a": 1, "b": [1, 2]}) == json_hash({"b": [1, 2], "a": 1})


TOLERATION = [{"key": "kueue", "operator": "Exists", "effect": "NoSchedule"}]
GATES = [{"name": "kueue.x-k8s.io/admission"}]


def _template_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0",
                            "resources": {"requests": {"cpu": "1"}}}], **extra}


def _with_head(**extra: Any) -> RayClusterSpec:
    body = spec().model_dump(by_alias=True, exclude_none=True, mode="json")
    body["headGroupSpec"]["template"]["spec"].update(extra)
    return RayClusterSpec.model_validate(body)


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        # kuberay#4569 (v1.7): Kueue injects tolerations and scheduling gates after creation.
        ("worker tolerations", spec(groups=[worker_group(template={"spec": _template_spec(tolerations=TOLERATION)})])),
        ("worker schedulingGates", spec(groups=[worker_group(template={"spec": _template_spec(schedulingGates=GATES)})])),
        ("head tolerations", _with_head(tolerations=TOLERATION)),
        ("head schedulingGates", _with_head(schedulingGates=GATES)),
        ("both, everywhere", spec(groups=[worker_group(template={"spec": _template_spec(
            tolerations=TOLERATION, schedulingGates=GATES)})])),
    ],
)
def test_tolerations_and_scheduling_gates_do_not_change_hash(name: str, changed: RayClusterSpec) -> None:
    assert generate_hash_without_replicas_and_workers_to_delete(changed) == BASE, name


def test_other_pod_spec_fields_still_change_hash() -> None:
    changed = spec(groups=[worker_group(template={"spec": _template_spec(nodeSelector={"a": "b"})})])
    assert generate_hash_without_replicas_and_workers_to_delete(changed) != BASE
