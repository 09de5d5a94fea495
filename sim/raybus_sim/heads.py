"""Ties simulated Ray dashboards to simulated head pods: a cluster's dashboard answers while its
head pod is Running with its Ray container ready, and refuses connections otherwise (a real head's
dashboard lives and dies with the head's ray container; SidecarMode's finished submitter container
makes the Pod not Ready, not the dashboard unreachable)."""

from __future__ import annotations

from typing import Any

from raybus_sim.dashboard import DashboardRegistry
from raybus_sim.kubelet.client import ObjEvent


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    containers = (pod.get("spec") or {}).get("containers") or []
    ray = containers[0].get("name") if containers else None  # KubeRay's RayContainerIndex 0
    for container in status.get("containerStatuses") or []:
        if container.get("name") == ray:
            return bool(container.get("ready"))
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _export_addr(pod: dict[str, Any]) -> str:
    """The Ray container's RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR ("" when absent): the
    simulated head then pushes its job ends there (raybus_sim.dashboard.events)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    for var in (containers[0].get("env") or []) if containers else []:
        if var.get("name") == "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR":
            return str(var.get("value") or "")
    return ""


class HeadDashboardSync:
    """A Pod informer listener (raybus_sim.kubelet.client): head pod events -> registry.head_up /
    head_down, from the API like any client, so it follows a real API server's Pods as well."""

    def __init__(self, registry: DashboardRegistry) -> None:
        self._registry = registry
        self._ready_heads: dict[tuple[str, str], set[str]] = {}

    def __call__(self, event: ObjEvent) -> None:
        meta = event.obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get("ray.io/node-type") != "head" or "ray.io/cluster" not in labels:
            return
        key = (meta.get("namespace", "default"), labels["ray.io/cluster"])
        heads = self._ready_heads.setdefault(key, set())
        was_up = bool(heads)
        if event.type != "DELETED" and _ready(event.obj):
            heads.add(meta["name"])
        else:
            heads.discard(meta["name"])
        if event.type != "DELETED" and meta["name"] in heads:
            self._registry.cluster(*key).events_export_addr = _export_addr(event.obj)
        if heads and not was_up:
            # A new head pod is a new Ray cluster: jobs and serve apps start empty (keep_state
            # False), as when KubeRay recreates a head without GCS fault tolerance.
            self._registry.head_up(*key)
        elif was_up and not heads:
            self._registry.head_down(*key)
