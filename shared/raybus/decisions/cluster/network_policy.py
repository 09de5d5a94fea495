"""KubeRay v1.7's NetworkPolicy controller (``networkpolicy_controller.go``, gate RayClusterNetworkPolicy).

KubeRay runs it as a separate controller on RayClusters; raybus decides it in the same round as the
rest of the cluster (after the Pods) and never lets it change the RayCluster status, as the separate
controller cannot. For ``spec.networkPolicy`` it keeps one NetworkPolicy ``<cluster>-head`` for the
head Pod and one ``<cluster>-workers-<group>`` per worker group:

- mode (default DenyAll) decides the policyTypes: Ingress for DenyAll/DenyAllIngress, Egress for
  DenyAll/DenyAllEgress;
- ingress = "from any Pod of this RayCluster" (+ for a K8sJobMode RayJob-owned cluster, the RayJob's
  submitter Pod to the dashboard port, head only) + the user's rules; egress = "to any Pod of this
  RayCluster" + the user's rules (no DNS: the sample adds it). Worker groups use their
  ``workerGroups[]`` entry if any, else ``worker``;
- an existing policy is updated when its spec (ports' protocol defaulted to TCP) or labels differ;
  policies of removed groups, or all of them when ``networkPolicy`` is removed, are deleted.

Not reproduced: the NetworkPolicyNameCollision Warning for a same-named policy the cluster does not
own (the watcher only publishes owned objects, so such a create meets 409 and is left alone).
"""

from __future__ import annotations

import copy
from typing import Any

from raybus.api.raycluster import NetworkPolicyConfig, NetworkPolicyMode, NetworkPolicyRules, RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.pod_parts import owner_reference
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, DeleteObject, ObjectRef, PatchObject, merge_patch

API_VERSION = "networking.k8s.io/v1"
CREATED_NETWORK_POLICY = "CreatedNetworkPolicy"
UPDATED_NETWORK_POLICY = "UpdatedNetworkPolicy"
DELETED_NETWORK_POLICY = "DeletedNetworkPolicy"
RAY_JOB_SUBMISSION_MODE_LABEL_KEY = "ray.io/job-submission-mode"
K8S_JOB_MODE = "K8sJobMode"
DEFAULT_DASHBOARD_PORT = 8265


def head_network_policy_name(cluster_name: str) -> str:
    return f"{cluster_name}-head"


def worker_group_network_policy_name(cluster_name: str, group_name: str) -> str:
    return f"{cluster_name}-workers-{group_name}"


def _labels(cluster: RayCluster) -> dict[str, str]:
    return {
        k.RAY_CLUSTER_LABEL_KEY: cluster.name,
        k.KUBERNETES_APPLICATION_NAME_LABEL_KEY: k.APPLICATION_NAME,
        k.KUBERNETES_CREATED_BY_LABEL_KEY: k.COMPONENT_NAME,
    }


def _same_cluster_peer(cluster: RayCluster) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": {k.RAY_CLUSTER_LABEL_KEY: cluster.name}}}


def _dashboard_port(cluster: RayCluster) -> int:
    """getHeadPort(dashboard-port): the rayStartParam when it parses as an int32, else 8265."""
    raw = (cluster.spec.head_group_spec.ray_start_params or {}).get("dashboard-port", "")
    try:
        port = int(raw)
    except ValueError:
        return DEFAULT_DASHBOARD_PORT
    return port if -(2**31) <= port < 2**31 else DEFAULT_DASHBOARD_PORT


def _ray_job_peer(cluster: RayCluster) -> dict[str, Any] | None:
    """buildRayJobPeer: the submitter Pod of the K8sJobMode RayJob that controls this cluster."""
    if (cluster.metadata.labels or {}).get(RAY_JOB_SUBMISSION_MODE_LABEL_KEY) != K8S_JOB_MODE:
        return None
    for ref in cluster.metadata.owner_references or []:
        if ref.kind == "RayJob" and ref.controller and str(ref.api_version or "").startswith("ray.io/"):
            return {
                "podSelector": {
                    "matchLabels": {
                        k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: ref.name or "",
                        k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: k.RAY_JOB_CRD,
                    }
                }
            }
    return None


def _rules(rules: list[Any] | None) -> list[dict[str, Any]]:
    return [copy.deepcopy(dict(r)) for r in rules or []]


def _policy(
    cluster: RayCluster,
    *,
    name: str,
    selector: dict[str, str],
    mode: str,
    ingress: list[dict[str, Any]],
    egress: list[dict[str, Any]],
) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": {"matchLabels": selector}}
    types: list[str] = []
    if mode in (NetworkPolicyMode.DENY_ALL, NetworkPolicyMode.DENY_ALL_INGRESS):
        types.append("Ingress")
        spec["ingress"] = [{"from": [_same_cluster_peer(cluster)]}, *ingress]
    if mode in (NetworkPolicyMode.DENY_ALL, NetworkPolicyMode.DENY_ALL_EGRESS):
        types.append("Egress")
        spec["egress"] = [{"to": [_same_cluster_peer(cluster)]}, *egress]
    spec["policyTypes"] = types
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": cluster.namespace,
            "labels": _labels(cluster),
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": spec,
    }


def _group_rules(config: NetworkPolicyConfig, group_name: str) -> NetworkPolicyRules | None:
    """workerGroupCustomRules: the group's workerGroups entry replaces ``worker``."""
    for entry in config.worker_groups or []:
        if entry.group_name == group_name:
            return entry
    return config.worker


def build_network_policies(cluster: RayCluster) -> list[dict[str, Any]]:
    """The desired NetworkPolicies (head first, then the worker groups in spec order)."""
    config = cluster.spec.network_policy
    if config is None:
        return []
    mode = config.mode or NetworkPolicyMode.DENY_ALL.value
    head_ingress: list[dict[str, Any]] = []
    peer = _ray_job_peer(cluster)
    if peer is not None:
        head_ingress.append({"from": [peer], "ports": [{"protocol": "TCP", "port": _dashboard_port(cluster)}]})
    head_rules = config.head
    policies = [
        _policy(
            cluster,
            name=head_network_policy_name(cluster.name),
            selector={k.RAY_CLUSTER_LABEL_KEY: cluster.name, k.RAY_NODE_TYPE_LABEL_KEY: k.HEAD_NODE},
            mode=mode,
            ingress=head_ingress + _rules(head_rules.ingress_rules if head_rules else None),
            egress=_rules(head_rules.egress_rules if head_rules else None),
        )
    ]
    for group in cluster.spec.worker_group_specs or []:
        rules = _group_rules(config, group.group_name)
        policies.append(
            _policy(
                cluster,
                name=worker_group_network_policy_name(cluster.name, group.group_name),
                selector={
                    k.RAY_CLUSTER_LABEL_KEY: cluster.name,
                    k.RAY_NODE_TYPE_LABEL_KEY: k.WORKER_NODE,
                    k.RAY_NODE_GROUP_LABEL_KEY: group.group_name,
                },
                mode=mode,
                ingress=_rules(rules.ingress_rules if rules else None),
                egress=_rules(rules.egress_rules if rules else None),
            )
        )
    return policies


def _normalized(spec: dict[str, Any]) -> dict[str, Any]:
    """normalizeNetworkPolicyPorts (protocol defaults to TCP, as the API server does) and Go's
    omitempty (empty lists are absent)."""
    out = copy.deepcopy(spec)
    for key in ("ingress", "egress"):
        for rule in out.get(key) or []:
            for port in rule.get("ports") or []:
                port.setdefault("protocol", "TCP")
            for peers in ("from", "to"):
                if peers in rule and not rule[peers]:
                    rule.pop(peers)
            if "ports" in rule and not rule["ports"]:
                rule.pop("ports")
        if key in out and not out[key]:
            out.pop(key)
    if not out.get("policyTypes"):
        out.pop("policyTypes", None)
    return out


def _ref(policy: dict[str, Any], namespace: str) -> ObjectRef:
    return ObjectRef.of(policy, api_version=API_VERSION, kind="NetworkPolicy", namespace=namespace)


def reconcile_network_policies(
    cluster: RayCluster, *, existing: list[dict[str, Any]], settings: OperatorSettings
) -> list[Command]:
    """NetworkPolicyController.Reconcile for one (defaulted, not deleting, KubeRay-managed) cluster."""
    if not settings.feature_gates.ray_cluster_network_policy:
        return []  # KubeRay does not even start the controller
    where = cluster.namespace
    owned = {
        podutil.name(p): p
        for p in existing
        if podutil.labels(p).get(k.RAY_CLUSTER_LABEL_KEY) == cluster.name
        and any(
            r.get("controller") and r.get("uid") == cluster.metadata.uid
            for r in podutil.meta(p).get("ownerReferences") or []
        )
    }
    commands: list[Command] = []
    desired = build_network_policies(cluster)
    for policy in desired:
        name = podutil.name(policy)
        current = owned.get(name)
        if current is None:
            commands.append(
                CreateObject(
                    reason=f"Created NetworkPolicy {where}/{name}",
                    object=policy,
                    event_reason=CREATED_NETWORK_POLICY,
                )
            )
            continue
        want, have = _normalized(policy["spec"]), _normalized(current.get("spec") or {})
        want_labels, have_labels = policy["metadata"]["labels"], dict(podutil.labels(current))
        if want == have and want_labels == have_labels:
            continue
        patch: dict[str, Any] = {"spec": merge_patch(have, want)}
        if want_labels != have_labels:
            patch["metadata"] = {"labels": merge_patch(have_labels, want_labels)}
        commands.append(
            PatchObject(
                reason=f"Updated NetworkPolicy {where}/{name}",
                target=_ref(current, where),
                merge_patch=patch,
                event_reason=UPDATED_NETWORK_POLICY,
            )
        )
    wanted = {podutil.name(p) for p in desired}
    for name, policy in sorted(owned.items()):
        if name in wanted:
            continue
        commands.append(
            DeleteObject(
                reason=f"Deleted NetworkPolicy {where}/{name}",
                target=_ref(policy, where),
                event_reason=DELETED_NETWORK_POLICY,
            )
        )
    return commands


__all__ = [
    "build_network_policies",
    "head_network_policy_name",
    "reconcile_network_policies",
    "worker_group_network_policy_name",
]
