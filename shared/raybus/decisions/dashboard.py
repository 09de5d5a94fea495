"""Which Ray dashboards to poll and when (pure; the dashboard-poller does the HTTP).

KubeRay polls a head only for the controllers that need it (RayJob every 3 s, RayService every
2 s), never for a bare RayCluster. raybus polls a cluster's dashboard only while a RayJob or
RayService owns it and its head is ready, and backs off exponentially while it is unreachable so
a broken head is not hammered (and a timeout is never mistaken for a terminal state).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

POLLED_OWNERS = frozenset({"RayJob", "RayService"})


def head_ready(cluster: Mapping[str, Any]) -> bool:
    status = cluster.get("status") or {}
    conditions = status.get("conditions") or []
    return any(c.get("type") == "HeadPodReady" and c.get("status") == "True" for c in conditions)


def poll_targets(clusters: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, cluster) of every RayJob/RayService-owned RayCluster with a ready head."""
    out: list[tuple[str, str]] = []
    for cluster in clusters:
        meta = cluster.get("metadata") or {}
        owners = {ref.get("kind") for ref in meta.get("ownerReferences") or []}
        if owners & POLLED_OWNERS and head_ready(cluster):
            out.append((meta.get("namespace", "default"), meta.get("name", "")))
    return sorted(out)


def next_delay(consecutive_failures: int, *, base_s: float, cap_s: float) -> float:
    """base while healthy; base * 2^failures (capped) while the dashboard does not answer."""
    if consecutive_failures <= 0:
        return base_s
    return float(min(cap_s, base_s * 2 ** min(consecutive_failures, 16)))
