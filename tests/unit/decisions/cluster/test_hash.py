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
