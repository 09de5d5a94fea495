"""Fixtures shared by the reconcile/pods/status tests: cluster factories, Pod dicts, and a tiny
"world" that applies a decision's commands to a snapshot (the executor + API server, in memory)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from raybus.api import RayCluster
from raybus.decisions.cluster.reconcile import ClusterDecision, ClusterSnapshot
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = OperatorSettings()


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def worker_group(name: str = "small", **kw: Any) -> dict[str, Any]:
    group: dict[str, Any] = {
        "groupName": name,
        "replicas": 2,
        "minReplicas": 0,
        "maxReplicas": 10,
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.46.0",
                        "resources": {"requests": {"cpu": "1"}},
                    }
                ]
            }
        },
    }
    group.update(kw)
    return group


def make_cluster(
    *,
    groups: list[dict[str, Any]] | None = None,
    name: str = "demo",
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> RayCluster:
    body: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": "uid-1",
            "generation": 1,
            "resourceVersion": "100",
            "annotations": annotations or {},
        },
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-head",
                                "image": "rayproject/ray:2.46.0",
                                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                            }
                        ]
                    }
                },
            },
            "workerGroupSpecs": [worker_group()] if groups is None else groups,
            **spec,
        },
    }
    if status is not None:
        body["status"] = status
    return RayCluster.model_validate(body)


def pod(
    name: str,
    *,
    node_type: str = "worker",
    group: str = "small",
    phase: str = "Running",
    ready: bool = True,
    restart_policy: str | None = None,
    terminated: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
    ip: str = "10.0.0.1",
) -> dict[str, Any]:
    container = "ray-head" if node_type == "head" else "ray-worker"
    state: dict[str, Any] = (
        {"terminated": {"exitCode": 1, "reason": "Error"}} if terminated else {"running": {}}
    )
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "labels": {
            "ray.io/cluster": "demo",
            "ray.io/node-type": node_type,
            "ray.io/group": "headgroup" if node_type == "head" else group,
            **(labels or {}),
        },
        "annotations": annotations or {},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": container}]}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": container, "ready": ready, "state": state}],
        },
    }


def head_service(name: str = "demo-head-svc", cluster_ip: str = "None") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"ray.io/cluster": "demo", "ray.io/node-type": "head"},
        },
        "spec": {
            "clusterIP": cluster_ip,
            "ports": [
                {"name": "dashboard", "port": 8265, "targetPort": 8265},
                {"name": "gcs-server", "port": 6379, "targetPort": 6379},
            ],
        },
    }


def running(manifest: dict[str, Any], *, ready: bool = True) -> dict[str, Any]:
    """The Pod the API server + kubelet make of a created manifest."""
    obj = copy.deepcopy(manifest)
    name = obj["metadata"]["name"]
    obj["metadata"].setdefault("uid", f"uid-{name}")
    containers = obj.get("spec", {}).get("containers") or [{"name": "ray"}]
    obj["status"] = {
        "phase": "Running",
        "podIP": "10.1.0.1",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {"name": c["name"], "ready": ready, "state": {"running": {}}} for c in containers
        ],
    }
    return obj


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def apply(
    snapshot: ClusterSnapshot, decision: ClusterDecision, *, ready: bool = True, drop_deleted: bool = True
) -> ClusterSnapshot:
    """Apply every command (and the status) the way the executor + API server would."""
    pods = [copy.deepcopy(p) for p in snapshot.pods]
    services = [copy.deepcopy(s) for s in snapshot.services]
    others: dict[str, list[dict[str, Any]]] = {
        "ServiceAccount": list(snapshot.service_accounts),
        "Role": list(snapshot.roles),
        "RoleBinding": list(snapshot.role_bindings),
        "Ingress": list(snapshot.ingresses),
        "Secret": list(snapshot.secrets),
        "Job": list(snapshot.jobs),
        "NetworkPolicy": list(snapshot.network_policies),
        "PodGroup": list(snapshot.pod_groups),
    }
    cluster = snapshot.cluster.to_manifest()
    for cmd in decision.commands:
        if isinstance(cmd, CreateObject):
            kind = cmd.object["kind"]
            if kind == "Pod":
                if not any(p["metadata"]["name"] == cmd.object["metadata"]["name"] for p in pods):
                    pods.append(running(cmd.object, ready=ready))
            elif kind == "Service":
                svc = copy.deepcopy(cmd.object)
                svc["spec"].setdefault("clusterIP", "10.96.0.10")
                services.append(svc)
            elif not any(o["metadata"]["name"] == cmd.object["metadata"]["name"] for o in others[kind]):
                others[kind].append(copy.deepcopy(cmd.object))
        elif isinstance(cmd, DeleteObject) and cmd.target.kind == "Pod":
            for p in pods:
                if p["metadata"]["name"] == cmd.target.name:
                    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            if drop_deleted:
                pods = [p for p in pods if p["metadata"]["name"] != cmd.target.name]
        elif isinstance(cmd, PatchObject):
            if cmd.target.kind == "RayCluster":
                patch = copy.deepcopy(cmd.merge_patch)
                meta = patch.pop("metadata", None) or {}
                if "finalizers" in meta:  # resourceVersion/uid are preconditions, not changes
                    patch["metadata"] = {"finalizers": meta["finalizers"]}
                cluster = _merge(cluster, patch)
            elif cmd.target.kind == "Pod":
                pods = [
                    _merge(p, cmd.merge_patch) if p["metadata"]["name"] == cmd.target.name else p
                    for p in pods
                ]
    if decision.status is not None:
        cluster["status"] = decision.status
    return ClusterSnapshot(
        cluster=RayCluster.model_validate(cluster),
        pods=pods,
        services=services,
        service_accounts=others["ServiceAccount"],
        roles=others["Role"],
        role_bindings=others["RoleBinding"],
        ingresses=others["Ingress"],
        secrets=others["Secret"],
        jobs=others["Job"],
        network_policies=others["NetworkPolicy"],
        pod_groups=others["PodGroup"],
        expectations=decision.expectations,
    )


def creates(decision: ClusterDecision, kind: str = "Pod") -> list[CreateObject]:
    return [c for c in decision.commands if isinstance(c, CreateObject) and c.object.get("kind") == kind]


def deletes(decision: ClusterDecision) -> list[DeleteObject]:
    return [c for c in decision.commands if isinstance(c, DeleteObject)]


def patches(decision: ClusterDecision, kind: str = "RayCluster") -> list[PatchObject]:
    return [c for c in decision.commands if isinstance(c, PatchObject) and c.target.kind == kind]
