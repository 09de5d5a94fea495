"""KubeRay's scale expectations as pure data.

Mirrors ``ray-operator/controllers/ray/expectations/scale_expectations.go``: after the controller
asks for a Pod create/delete it records an expectation; before reconciling a group again it checks
``IsSatisfied`` and skips the group while any expectation is outstanding. KubeRay keeps them in an
in-process ``cache.Indexer``; raybus keeps them in Redis (the adapter persists the updated value
returned by the decision *before* publishing the commands, i.e. ExpectScalePod-before-create).

Semantics kept from ``isPodScaled``:
- Create: satisfied once the Pod exists, or once ``ExpectationsTimeout`` (30 s) has elapsed.
- Delete: satisfied only once the Pod is gone (no timeout).
Satisfied expectations are dropped while checking, as ``IsSatisfied`` deletes them from the cache.

The existence check uses the snapshot's Pod list (KubeRay reads the API server directly, bypassing
the informer cache); the adapter builds the snapshot from a fresh list.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

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


class ScaleExpectations(BaseModel):
    """Outstanding expectations of one RayCluster, keyed by group name (head group = "")."""

    model_config = ConfigDict(frozen=True)

    groups: dict[str, tuple[ExpectedPod, ...]] = Field(default_factory=dict)

    def for_group(self, group: str) -> tuple[ExpectedPod, ...]:
        return self.groups.get(group, ())

    def is_empty(self) -> bool:
        return not any(self.groups.values())


def expect_scale_pod(
    expectations: ScaleExpectations, *, group: str, pod_name: str, action: ScaleAction, now: datetime
) -> ScaleExpectations:
    """ExpectScalePod: record (or overwrite: the indexer key is the Pod name) one expectation."""
    groups: dict[str, tuple[ExpectedPod, ...]] = {}
    for name, items in expectations.groups.items():
        kept = tuple(item for item in items if item.name != pod_name)
        if kept:
            groups[name] = kept
    groups[group] = (*groups.get(group, ()), ExpectedPod(name=pod_name, action=action, recorded_at=now))
    return ScaleExpectations(groups=groups)


def _is_pod_scaled(item: ExpectedPod, *, existing: frozenset[str], now: datetime, timeout: float) -> bool:
    """isPodScaled."""
    if item.action is ScaleAction.CREATE:
        if item.name in existing:
            return True
        return item.recorded_at + timedelta(seconds=timeout) < now
    return item.name not in existing


def check_satisfied(
    expectations: ScaleExpectations,
    *,
    group: str,
    existing_pod_names: Iterable[str],
    now: datetime,
    timeout_seconds: float = DEFAULT_EXPECTATIONS_TIMEOUT_SECONDS,
) -> tuple[bool, ScaleExpectations]:
    """IsSatisfied: (all expectations of ``group`` met, expectations with the met ones dropped)."""
    existing = frozenset(existing_pod_names)
    items = expectations.for_group(group)
    if not items:
        return True, expectations
    pending = tuple(
        item
        for item in items
        if not _is_pod_scaled(item, existing=existing, now=now, timeout=timeout_seconds)
    )
    groups = dict(expectations.groups)
    if pending:
        groups[group] = pending
    else:
        groups.pop(group, None)
    return not pending, ScaleExpectations(groups=groups)


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
    return ScaleExpectations(groups=groups)


def clear_expectations() -> ScaleExpectations:
    """RayClusterScaleExpectation.Delete: forget every expectation of the cluster."""
    return ScaleExpectations()
