"""Spec hashing for the Recreate upgrade strategy.

Mirrors ``utils.GenerateHashWithoutReplicasAndWorkersToDelete`` + ``utils.GenerateJsonHash``: the
RayCluster spec with every worker group's replicas / minReplicas / maxReplicas /
scaleStrategy.workersToDelete, every pod template's tolerations and schedulingGates (v1.7,
kuberay#4569: Kueue injects them after creation; they must neither recreate Pods under `Recreate`
nor give a RayService a new cluster) and the top-level upgradeStrategy blanked, JSON-serialised, SHA-1,
base32 (extended hex alphabet, padded). Go's ``json.Marshal`` field order cannot be reproduced, so
we serialise canonically (sorted keys, no whitespace, nulls dropped); the hash is therefore only
comparable with hashes raybus wrote. Pods written by a KubeRay operator carry a different
``ray.io/kuberay-version`` annotation and go through the version-skip path instead of being
recreated (``shouldRecreatePodsForUpgrade``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from raybus.api.defaults import spec_with_defaults
from raybus.api.raycluster import RayClusterSpec

# utils.UpgradeStrategyRecreateHashKey / utils.KubeRayVersion annotations on the head Pod.
UPGRADE_STRATEGY_RECREATE_HASH_KEY = "ray.io/upgrade-strategy-recreate-hash"
KUBERAY_VERSION_KEY = "ray.io/kuberay-version"
# utils.HashWithoutReplicasAndWorkersToDeleteKey (used on RayService-owned clusters).
HASH_WITHOUT_REPLICAS_AND_WORKERS_TO_DELETE_KEY = "ray.io/hash-without-replicas-and-workers-to-delete"


def json_hash(obj: Any) -> str:
    """GenerateJsonHash over a canonical JSON serialisation."""
    serial = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.b32hexencode(hashlib.sha1(serial).digest()).decode()


def spec_without_replicas_and_workers_to_delete(spec: RayClusterSpec) -> dict[str, Any]:
    """The defaulted spec as a camelCase dict with the ignored fields removed."""
    body = spec_with_defaults(spec).model_dump(by_alias=True, exclude_none=True, mode="json")
    _mute_scheduling(body.get("headGroupSpec"))
    for group in body.get("workerGroupSpecs") or []:
        _mute_scheduling(group)
        for key in ("replicas", "minReplicas", "maxReplicas"):
            group.pop(key, None)
        strategy = dict(group.get("scaleStrategy") or {})
        strategy.pop("workersToDelete", None)
        group["scaleStrategy"] = strategy
    body.pop("upgradeStrategy", None)
    return body


def _mute_scheduling(group: Any) -> None:
    """Tolerations and scheduling gates of a group's pod template do not count (kuberay#4569)."""
    pod_spec = ((group or {}).get("template") or {}).get("spec")
    if isinstance(pod_spec, dict):
        pod_spec.pop("tolerations", None)
        pod_spec.pop("schedulingGates", None)


def generate_hash_without_replicas_and_workers_to_delete(spec: RayClusterSpec) -> str:
    """GenerateHashWithoutReplicasAndWorkersToDelete."""
    return json_hash(spec_without_replicas_and_workers_to_delete(spec))
