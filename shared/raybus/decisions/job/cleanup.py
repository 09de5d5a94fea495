"""Terminal states (Complete, Failed): KubeRay's cleanup mechanisms, newest first.

1. clusterSelector: the cluster is not ours, nothing to clean up.
2. RayJobDeletionPolicy gate + deletionStrategy: ``deletionRules`` (handleDeletionRules) or the
   legacy ``onSuccess``/``onFailure`` (handleLegacyDeletionPolicy).
3. ``shutdownAfterJobFinishes`` + ``ttlSecondsAfterFinished`` (handleShutdownAfterJobFinishes).
Every TTL is measured from ``status.endTime``, so it fires on time after any restart; the next one
is registered with ``w.deadline`` (KubeRay: RequeueAfter time.Until(t) + 2 s).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from raybus.api.rayjob import DeletionPolicyType, DeletionRule
from raybus.decisions.job import constants as c
from raybus.decisions.job.resources import (
    current_cluster,
    delete_cluster,
    delete_self,
    suspend_worker_groups,
    uses_cluster_selector,
)
from raybus.decisions.job.timefmt import EPOCH
from raybus.decisions.job.work import Work


def _end_time(w: Work) -> datetime:
    # Always set when a terminal status is written; a status written by someone else without it is
    # treated as long finished (KubeRay would dereference nil here).
    return w.time("endTime") or EPOCH


def is_deletion_rule_matched(rule: DeletionRule, w: Work) -> bool:
    cond = rule.condition
    if cond.job_status is not None:
        return cond.job_status == w.job_status
    return cond.job_deployment_status == w.jds


def is_deletion_action_completed(w: Work, policy: str) -> bool:
    """isDeletionActionCompleted: looks at the actual cluster (idempotent rules)."""
    cluster = current_cluster(w)
    if policy == DeletionPolicyType.DELETE_WORKERS:
        if cluster is None or cluster.metadata.deletion_timestamp:
            return True
        return all(g.suspend is True for g in cluster.spec.worker_group_specs or [])
    if policy == DeletionPolicyType.DELETE_CLUSTER:
        return cluster is None or bool(cluster.metadata.deletion_timestamp)
    # DeleteSelf: still reconciling, so the RayJob still exists. DeleteNone: always complete.
    return policy != DeletionPolicyType.DELETE_SELF


def select_most_impactful_rule(rules: list[DeletionRule]) -> DeletionRule:
    best = rules[0]
    for rule in rules[1:]:
        if c.DELETION_POLICY_IMPACT.get(rule.policy, 0) > c.DELETION_POLICY_IMPACT.get(best.policy, 0):
            best = rule
    return best


def execute_deletion_policy(w: Work, policy: str) -> None:
    w.log(f"Executing deletion policy: {policy}")
    if policy == DeletionPolicyType.DELETE_CLUSTER:
        delete_cluster(w)
    elif policy == DeletionPolicyType.DELETE_WORKERS:
        suspend_worker_groups(w)
    elif policy == DeletionPolicyType.DELETE_SELF:
        delete_self(w)


def handle_deletion_rules(w: Work) -> None:
    """At most one deletion per reconcile: the most destructive overdue rule (after downtime several
    can be overdue at once); then wait for the earliest pending one."""
    end = _end_time(w)
    overdue: list[DeletionRule] = []
    for rule in (w.job.spec.deletion_strategy.deletion_rules or []) if w.job.spec.deletion_strategy else []:
        if not is_deletion_rule_matched(rule, w):
            continue
        when = end + timedelta(seconds=rule.condition.ttl_seconds or 0)
        if w.now < when:
            w.deadline(when)
            continue
        if is_deletion_action_completed(w, rule.policy):
            continue
        overdue.append(rule)
    if overdue:
        execute_deletion_policy(w, select_most_impactful_rule(overdue).policy)


def _ttl_passed(w: Work) -> bool:
    when = _end_time(w) + timedelta(seconds=w.job.spec.ttl_seconds_after_finished or 0)
    if when > w.now:
        w.deadline(when)
        return False
    return True


def handle_legacy_deletion_policy(w: Work) -> None:
    strategy = w.job.spec.deletion_strategy
    assert strategy is not None
    if w.job_status == "SUCCEEDED":
        policy = strategy.on_success.policy if strategy.on_success is not None else None
    elif w.job_status == "FAILED":
        policy = strategy.on_failure.policy if strategy.on_failure is not None else None
    else:
        # e.g. DeadlineExceeded while the Ray job was still RUNNING: KubeRay applies no policy.
        w.log(f"JobStatus {w.job_status!r} is not valid for deletion, no policy applied")
        return
    if policy is None or policy == DeletionPolicyType.DELETE_NONE:
        return
    if _ttl_passed(w):
        execute_deletion_policy(w, policy)


def handle_shutdown_after_job_finishes(w: Work) -> None:
    if not _ttl_passed(w):
        return
    if w.settings.delete_rayjob_cr_after_job_finishes:
        delete_self(w)
    else:
        delete_cluster(w)


def handle_terminal(w: Work) -> None:
    """The Complete/Failed case of the switch (no status write, no backoff check)."""
    if uses_cluster_selector(w):
        return
    strategy = w.job.spec.deletion_strategy
    if w.settings.deletion_policy_gate and strategy is not None:
        # Validation guarantees either rules or the legacy pair, never both.
        if strategy.deletion_rules is not None:
            handle_deletion_rules(w)
        else:
            handle_legacy_deletion_policy(w)
        return
    if w.job.spec.shutdown_after_job_finishes:
        handle_shutdown_after_job_finishes(w)
