"""The create-only owned objects of rayClusterReconcile, in KubeRay's order.

reconcileAutoscalerServiceAccount / Role / RoleBinding (autoscaling only), reconcileIngress
(``enableIngress``), reconcileAuthSecret (token auth, auth_secret.py), reconcileHeadService, reconcileHeadlessService (multi-host groups),
reconcileServeService (``ray.io/enable-serve-service=true``). Each only creates what is missing;
KubeRay never updates them (the head Service in particular). The first error stops the chain and
reconcilePods is not run, as in the Go loop over ``reconcileFuncs``.

Lookups mirror KubeRay's: RBAC objects by name, the Ingress by ``ray.io/cluster`` label, the head
Service by ``ray.io/cluster`` + ``ray.io/node-type=head``, the headless worker Service by
``ray.io/headless-worker-svc``, the serve Service by name. The adapter's snapshot must therefore
hold the Services matching any of these (not only those labelled ``ray.io/cluster``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster import podutil
from raybus.decisions.cluster.auth_secret import reconcile_auth_secret
from raybus.decisions.cluster.k8s_services import (
    build_head_ingress,
    build_head_service,
    build_headless_worker_service,
    build_serve_service,
    is_serve_service_enabled,
    needs_headless_worker_service,
    serve_service_name,
)
from raybus.decisions.cluster.outcome import ReconcileError, cluster_ref
from raybus.decisions.cluster.rbac import (
    autoscaler_role_name,
    autoscaler_service_account_name,
    build_autoscaler_role,
    build_autoscaler_role_binding,
    build_autoscaler_service_account,
    service_account_is_user_managed,
)
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, ObjectRef, PatchObject, RecordEvent

if TYPE_CHECKING:  # reconcile.py imports this module
    from raybus.decisions.cluster.reconcile import ClusterSnapshot


@dataclass
class OwnedOutcome:
    commands: list[Command] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    error: ReconcileError | None = None
    head_services: list[Mapping[str, Any]] = field(default_factory=list)  # existing or planned
    planned_head_service: bool = False


def _by_name(objects: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    for obj in objects:
        if podutil.name(obj) == name:
            return obj
    return None


def _with_labels(objects: list[dict[str, Any]], wanted: Mapping[str, str]) -> list[dict[str, Any]]:
    return [o for o in objects if all(podutil.labels(o).get(key) == value for key, value in wanted.items())]


def _create(out: OwnedOutcome, obj: dict[str, Any], *, event_reason: str | None) -> None:
    kind = obj.get("kind", "object")
    meta = obj.get("metadata") or {}
    out.commands.append(
        CreateObject(
            reason=f"Created {kind} {meta.get('namespace')}/{meta.get('name')} for the RayCluster",
            object=obj,
            event_reason=event_reason,
        )
    )
    out.reasons.append(f"creating {kind} {meta.get('name')}")


def _rbac(cluster: RayCluster, snapshot: ClusterSnapshot, out: OwnedOutcome) -> ReconcileError | None:
    """reconcileAutoscalerServiceAccount, reconcileAutoscalerRole, reconcileAutoscalerRoleBinding."""
    if not cluster.spec.enable_in_tree_autoscaling:
        return None
    sa_name = autoscaler_service_account_name(cluster)
    if _by_name(list(snapshot.service_accounts), sa_name) is None:
        if service_account_is_user_managed(cluster):
            message = (
                "If users specify ServiceAccountName for the head Pod, they need to create a ServiceAccount "
                f"themselves. However, ServiceAccount {sa_name} is not found. Please create one. See the PR "
                "description of https://github.com/ray-project/kuberay/pull/1128 for more details."
            )
            out.commands.append(
                RecordEvent(
                    reason=message,
                    target=cluster_ref(cluster),
                    type="Warning",
                    event_reason="AutoscalerServiceAccountNotFound",
                    message=f"Failed to reconcile RayCluster {cluster.namespace}/{cluster.name}. {message}",
                )
            )
            return ReconcileError(message)
        _create(out, build_autoscaler_service_account(cluster), event_reason="CreatedServiceAccount")
    if _by_name(list(snapshot.roles), autoscaler_role_name(cluster)) is None:
        _create(out, build_autoscaler_role(cluster), event_reason="CreatedRole")
    if _by_name(list(snapshot.role_bindings), autoscaler_role_name(cluster)) is None:
        _create(out, build_autoscaler_role_binding(cluster), event_reason="CreatedRoleBinding")
    return None


def _map_patch(existing: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge-patch fragment that makes map ``existing`` equal ``desired`` (None when already equal)."""
    existing = existing or {}
    if dict(existing) == dict(desired):
        return None
    patch: dict[str, Any] = {key: None for key in existing if key not in desired}
    patch.update(desired)
    return patch


def ingress_drift_patch(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """ingressNeedsUpdate (v1.7): labels, annotations and spec rules / tls / ingressClassName follow
    the RayCluster; returns the merge patch, or None when nothing drifted."""
    patch: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        fragment = _map_patch(
            (existing.get("metadata") or {}).get(key), (desired.get("metadata") or {}).get(key) or {}
        )
        if fragment is not None:
            meta[key] = fragment
    spec: dict[str, Any] = {}
    for key in ("rules", "tls", "ingressClassName"):
        want = (desired.get("spec") or {}).get(key)
        if (existing.get("spec") or {}).get(key) != want:
            spec[key] = want
    if meta:
        patch["metadata"] = meta
    if spec:
        patch["spec"] = spec
    return patch or None


def _ingress(cluster: RayCluster, snapshot: ClusterSnapshot, out: OwnedOutcome) -> None:
    """reconcileIngressKubernetes: create when none carries the cluster label, bring a single
    existing one back in line (v1.7 ingressNeedsUpdate). No OpenShift Route."""
    if not cluster.spec.head_group_spec.enable_ingress:
        return
    existing = _with_labels(list(snapshot.ingresses), {k.RAY_CLUSTER_LABEL_KEY: cluster.name})
    desired = build_head_ingress(cluster)
    if not existing:
        _create(out, desired, event_reason="CreatedIngress")
        return
    if len(existing) == 1:
        patch = ingress_drift_patch(existing[0], desired)
        if patch is not None:
            meta = existing[0].get("metadata") or {}
            out.commands.append(
                PatchObject(
                    reason=f"Ingress {meta.get('name')} drifted from the RayCluster; updating it",
                    target=ObjectRef(
                        api_version="networking.k8s.io/v1",
                        kind="Ingress",
                        namespace=str(meta.get("namespace") or cluster.namespace),
                        name=str(meta.get("name") or ""),
                        uid=meta.get("uid"),
                    ),
                    merge_patch=patch,
                    event_reason="UpdatedIngress",
                )
            )


def _head_service(
    cluster: RayCluster, snapshot: ClusterSnapshot, settings: OperatorSettings, out: OwnedOutcome
) -> ReconcileError | None:
    """reconcileHeadService: exactly one head Service; create it if there is none."""
    existing = _with_labels(
        list(snapshot.services),
        {k.RAY_CLUSTER_LABEL_KEY: cluster.name, k.RAY_NODE_TYPE_LABEL_KEY: k.HEAD_NODE},
    )
    out.head_services = list(existing)
    if len(existing) > 1:
        return ReconcileError(
            f"{len(existing)} head service found {sorted(podutil.name(s) for s in existing)}"
        )
    if existing:
        return None
    service = build_head_service(cluster, settings=settings)
    if not (service.get("spec") or {}).get("ports"):
        return ReconcileError("ray head service does not have any ports set up")
    _create(out, service, event_reason="CreatedService")
    out.head_services = [service]
    out.planned_head_service = True
    return None


def _headless_service(cluster: RayCluster, snapshot: ClusterSnapshot, out: OwnedOutcome) -> None:
    """reconcileHeadlessService."""
    if not needs_headless_worker_service(cluster):
        return
    if not _with_labels(list(snapshot.services), {k.RAY_CLUSTER_HEADLESS_SERVICE_LABEL_KEY: cluster.name}):
        _create(out, build_headless_worker_service(cluster), event_reason="CreatedService")


def _serve_service(
    cluster: RayCluster, snapshot: ClusterSnapshot, out: OwnedOutcome
) -> ReconcileError | None:
    """reconcileServeService (plain r.Create: no Event)."""
    if not is_serve_service_enabled(cluster):
        return None
    if _by_name(list(snapshot.services), serve_service_name(cluster.name)) is not None:
        return None
    try:
        service = build_serve_service(cluster)
    except ValueError as exc:
        return ReconcileError(str(exc))
    _create(out, service, event_reason=None)
    return None


def reconcile_owned_objects(
    cluster: RayCluster, *, snapshot: ClusterSnapshot, settings: OperatorSettings
) -> OwnedOutcome:
    out = OwnedOutcome()
    out.error = _rbac(cluster, snapshot, out)
    if out.error is not None:
        return out
    _ingress(cluster, snapshot, out)
    # reconcileAuthSecret (token auth): between the Ingress and the head Service, as in KubeRay.
    auth = reconcile_auth_secret(cluster, secrets=list(snapshot.secrets))
    out.commands += auth
    out.reasons += [c.reason for c in auth]
    out.error = _head_service(cluster, snapshot, settings, out)
    if out.error is not None:
        return out
    _headless_service(cluster, snapshot, out)
    out.error = _serve_service(cluster, snapshot, out)
    return out
