"""What one RayCluster reconcile reads, gathered from the replica's snapshot cache (no I/O).

KubeRay's reconcile LISTs the RayCluster's Pods by label and GETs what it owns (head Service,
Ingress, RBAC, the Redis cleanup Job, NetworkPolicies, the batch scheduler's PodGroup) from its
informer cache; here all of them come from the cache, the auth Secret from its create's answer
(state.AnsweredSecrets), the scale expectations and the state of the batches they name from the
caller (Redis and the ledger, read before this: building the snapshot has no await, so the Pods,
Services, ... and the Pods' watermark are one snapshot).
"""

from __future__ import annotations

from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.batches import BatchState
from raybus.decisions.cluster.expectations import ScaleExpectations
from raybus.decisions.cluster.reconcile import ClusterSnapshot, CommandFailure
from raybus.runtime.cache import ObjectCache, union_by_name
from raybus.runtime.outcomes import OutcomeTracker, real_failures


def last_failures(outcomes: OutcomeTracker, key: ObjectKey) -> list[CommandFailure]:
    """The last Outcome's failed commands (target lets the decision name the failed object:
    KubeRay's error message carries it)."""
    outcome = outcomes.last(key)
    if outcome is None:
        return []
    return [CommandFailure(reason=r.error_reason or "", message=r.message, target=r.target)
            for r in real_failures(outcome.results)]


def build_snapshot(cache: ObjectCache, key: ObjectKey, cluster: RayCluster, *,
                   expectations: ScaleExpectations, batches: dict[str, BatchState],
                   secrets: list[dict[str, Any]], failures: list[CommandFailure],
                   batch_id: str) -> ClusterSnapshot:
    def owned(kind: s.Kind) -> list[dict[str, Any]]:
        return cache.owned_by(kind, key.namespace, owner_kind="RayCluster", owner_name=key.name)

    # The watermark is read first, so it never covers a Pod event the Pod list lacks.
    watermark = cache.rv_watermark(s.Kind.POD)
    return ClusterSnapshot(
        cluster=cluster,
        pods=cache.labelled(s.Kind.POD, key.namespace, key.name),
        services=union_by_name(owned(s.Kind.SERVICE), cache.labelled(s.Kind.SERVICE, key.namespace, key.name)),
        ingresses=owned(s.Kind.INGRESS),
        service_accounts=owned(s.Kind.SERVICEACCOUNT),
        roles=owned(s.Kind.ROLE),
        role_bindings=owned(s.Kind.ROLEBINDING),
        secrets=secrets,
        jobs=owned(s.Kind.JOB),
        network_policies=owned(s.Kind.NETWORKPOLICY),
        pod_groups=owned(s.Kind.PODGROUP),
        expectations=expectations,
        last_failures=failures,
        batches=batches,
        batch_id=batch_id,
        pods_watermark=watermark,
    )
