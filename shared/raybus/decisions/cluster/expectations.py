"""KubeRay's scale expectations as pure data, made safe for commands that land late.

Mirrors ``ray-operator/controllers/ray/expectations/scale_expectations.go``: after the controller
asks for a Pod create/delete it records an expectation; before reconciling a group again it checks
``IsSatisfied`` and skips the group while any expectation is outstanding. KubeRay keeps them in an
in-process ``cache.Indexer``; raybus keeps them in Redis (the adapter persists the updated value
returned by the decision *before* the commands are published, i.e. ExpectScalePod-before-create).

Semantics kept from ``isPodScaled``:
- Create: satisfied once the Pod exists, or once ``ExpectationsTimeout`` (30 s) has elapsed (also
  when the Pod was created and is already gone: KubeRay's Get finds nothing then either).
- Delete: satisfied only once the Pod is gone (no timeout).
Satisfied expectations are dropped while checking, as ``IsSatisfied`` deletes them from the cache.

The redelivery invariant (docs/architecture.md): KubeRay's create has happened when it records the expectation,
so its 30 s timeout only covers informer lag. Ours are recorded *before* the command reaches the
executor, which may take longer than 30 s behind the QPS limiter, or a crash and a redelivery. So
an expectation also names its batch, and the timeout runs from the batch's completion, never from
the decision: while the batch is queued or being applied (``BatchState.settled`` false) the
expectation holds, whatever the clock says, so a late create can never be "replaced". A create
that did not happen (failed, skipped, or its batch revoked through the command ledger) is dropped
and its Pod name kept in ``retry``: the next create in that group reuses it, so a create whose
outcome was uncertain collides (409) instead of duplicating, and a rejected create is retried under
the same name (one Event series, not a new name per attempt).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from raybus.decisions.batches import BatchState

# expectations.HeadGroup: the head "group" key is the empty string, as in KubeRay.
HEAD_GROUP = ""
# expectations.ExpectationsTimeout
DEFAULT_EXPECTATIONS_TIMEOUT_SECONDS = 30.0


class ScaleAction(StrEnum):
    CREATE = "Create"
    DELETE = "Delete"


class ExpectedPod(BaseModel):
    """One ``rayPod`` record of scale_expectations.go."""

    model_config = ConfigDict(frozen=True)

    name: str
    action: ScaleAction
    recorded_at: datetime
    batch: str = ""  # the command batch carrying the create/delete ("" = pre-ledger record)


class ScaleExpectations(BaseModel):
    """Outstanding expectations of one RayCluster, keyed by group name (head group = "")."""

    model_config = ConfigDict(frozen=True)

    groups: dict[str, tuple[ExpectedPod, ...]] = Field(default_factory=dict)
    # Pod names whose create did not happen, per group, to be reused by the next creates.
    retry: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    def for_group(self, group: str) -> tuple[ExpectedPod, ...]:
        return self.groups.get(group, ())

    def is_empty(self) -> bool:
        return not any(self.groups.values()) and not any(self.retry.values())

    def batches(self) -> frozenset[str]:
        return frozenset(item.batch for items in self.groups.values() for item in items if item.batch)


def expect_scale_pod(
    expectations: ScaleExpectations,
    *,
    group: str,
    pod_name: str,
    action: ScaleAction,
    now: datetime,
    batch: str = "",
) -> ScaleExpectations:
    """ExpectScalePod: record (or overwrite: the indexer key is the Pod name) one expectation."""
    groups: dict[str, tuple[ExpectedPod, ...]] = {}
    for name, items in expectations.groups.items():
        kept = tuple(item for item in items if item.name != pod_name)
        if kept:
            groups[name] = kept
    record = ExpectedPod(name=pod_name, action=action, recorded_at=now, batch=batch)
    groups[group] = (*groups.get(group, ()), record)
    retry = {g: names for g, names in expectations.retry.items() if names}
    if pod_name in retry.get(group, ()):
        retry[group] = tuple(n for n in retry[group] if n != pod_name)
    return ScaleExpectations(groups=groups, retry={g: n for g, n in retry.items() if n})


def pod_target(namespace: str, pod_name: str) -> str:
    """CommandResult.target / BatchState.not_applied form of a Pod."""
    return f"Pod/{namespace}/{pod_name}"


def _verdict(
    item: ExpectedPod,
    *,
    existing: frozenset[str],
    batches: dict[str, BatchState] | None,
    namespace: str,
    now: datetime,
    timeout: float,
    watermark: int | None,
) -> str:
    """isPodScaled, batch-aware: "met", "pending", or "not-applied" (dropped, name retried)."""
    state = batches.get(item.batch) if batches is not None and item.batch else None
    if item.action is ScaleAction.DELETE:
        if item.name not in existing:
            return "met"
        if state is not None and state.settled and not state.applied(pod_target(namespace, item.name)):
            return "not-applied"  # the delete failed or never ran: decide again
        return "pending"
    if state is None:  # a record without a batch: KubeRay's timeout from the decision
        if item.name in existing or item.recorded_at + timedelta(seconds=timeout) < now:
            return "met"
        return "pending"
    if not state.settled:
        return "pending"  # queued or being applied: it may still land, never replace it
    target = pod_target(namespace, item.name)
    if not state.applied(target):
        return "not-applied"
    if item.name in existing:
        return "met"
    finished = state.finished_at or item.recorded_at
    timed_out = finished + timedelta(seconds=timeout) < now
    created_rv = state.created_rv.get(target)
    if created_rv is not None and (watermark is None or watermark < created_rv):
        # Created at created_rv, and the cache has not applied a watch event that far: it is only
        # not seen yet, however long the watch lags: no timeout can be right about that.
        return "pending"
    # Created and not seen (gone already, or of unknown version): isPodScaled's "quickly deleted
    # by another component" case, met only after ExpectationsTimeout. Met at once, a head the GC
    # removed (its RayCluster deleted, the watcher not yet publishing that) would be created
    # again a second later, and again.
    return "met" if timed_out else "pending"


def check_satisfied(
    expectations: ScaleExpectations,
    *,
    group: str,
    existing_pod_names: Iterable[str],
    now: datetime,
    timeout_seconds: float = DEFAULT_EXPECTATIONS_TIMEOUT_SECONDS,
    batches: dict[str, BatchState] | None = None,
    namespace: str = "",
    watermark: int | None = None,
) -> tuple[bool, ScaleExpectations]:
    """IsSatisfied: (all expectations of ``group`` met, expectations with the met ones dropped).

    ``batches`` holds the state of every batch the expectations name (None: pre-ledger behaviour);
    ``watermark`` is the highest Pod resourceVersion the cache has applied (None: unknown).
    Creates that did not happen are dropped and their names queued in ``retry`` for reuse."""
    existing = frozenset(existing_pod_names)
    items = expectations.for_group(group)
    if not items:
        return True, expectations
    pending: list[ExpectedPod] = []
    retry = list(expectations.retry.get(group, ()))
    for item in items:
        verdict = _verdict(item, existing=existing, batches=batches, namespace=namespace, now=now,
                           timeout=timeout_seconds, watermark=watermark)
        if verdict == "pending":
            pending.append(item)
        elif verdict == "not-applied" and item.action is ScaleAction.CREATE and item.name not in retry:
            retry.append(item.name)
    groups = dict(expectations.groups)
    if pending:
        groups[group] = tuple(pending)
    else:
        groups.pop(group, None)
    retries = dict(expectations.retry)
    if retry:
        retries[group] = tuple(retry)
    else:
        retries.pop(group, None)
    return not pending, ScaleExpectations(groups=groups, retry=retries)


def take_retry_name(expectations: ScaleExpectations, *, group: str,
                    taken: Iterable[str]) -> tuple[str | None, ScaleExpectations]:
    """The next Pod name to reuse for a create in ``group`` (one whose earlier create did not
    happen), skipping names that exist now; (None, unchanged) when there is none."""
    names = set(taken)
    queue = [n for n in expectations.retry.get(group, ()) if n not in names]
    if not queue:
        retry = {g: n for g, n in expectations.retry.items() if g != group}
        return None, ScaleExpectations(groups=expectations.groups, retry=retry)
    name, rest = queue[0], tuple(queue[1:])
    retry = {g: n for g, n in expectations.retry.items() if g != group}
    if rest:
        retry[group] = rest
    return name, ScaleExpectations(groups=expectations.groups, retry=retry)


def forget_pods(expectations: ScaleExpectations, pod_names: Iterable[str]) -> ScaleExpectations:
    """Drop the expectations of Pods whose create/delete failed: KubeRay only calls ExpectScalePod
    after a successful API call, so a failed one never blocks the group."""
    names = frozenset(pod_names)
    if not names:
        return expectations
    groups = {
        group: kept
        for group, items in expectations.groups.items()
        if (kept := tuple(item for item in items if item.name not in names))
    }
    return ScaleExpectations(groups=groups, retry=expectations.retry)


def clear_expectations() -> ScaleExpectations:
    """RayClusterScaleExpectation.Delete: forget every expectation of the cluster."""
    return ScaleExpectations()
