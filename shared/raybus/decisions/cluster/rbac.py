"""RBAC objects for the autoscaler sidecar (common/rbac.go + reconcileAutoscaler{ServiceAccount,Role,RoleBinding}).

Created only when ``enableInTreeAutoscaling`` is true. Names are clipped with ``CheckName`` exactly
as the controller does before creating them, so the head Pod's ``serviceAccountName`` (also clipped)
and the RoleBinding's subject/roleRef always agree.
"""

from __future__ import annotations

from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.kuberay_names import check_name, head_group_service_account_name
from raybus.decisions.cluster.pod_parts import set_controller_reference

# Minimal rules the Ray autoscaler needs: watch/patch its Pods (incl. in-place resize) and patch
# the RayCluster's replicas / workersToDelete.
AUTOSCALER_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
)


def _labels(cluster: RayCluster) -> dict[str, str]:
    return {
        k.RAY_CLUSTER_LABEL_KEY: cluster.name,
        k.KUBERNETES_APPLICATION_NAME_LABEL_KEY: k.APPLICATION_NAME,
        k.KUBERNETES_CREATED_BY_LABEL_KEY: k.COMPONENT_NAME,
    }


def _meta(cluster: RayCluster, name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": cluster.namespace, "labels": _labels(cluster)}
    set_controller_reference(meta, cluster)
    return meta


def autoscaler_service_account_name(cluster: RayCluster) -> str:
    """RayClusterAutoscalerServiceAccountNamespacedName: CheckName(GetHeadGroupServiceAccountName)."""
    return check_name(head_group_service_account_name(cluster))


def autoscaler_role_name(cluster: RayCluster) -> str:
    """RayClusterAutoscalerRoleNamespacedName / ...RoleBindingNamespacedName: CheckName(<cluster>)."""
    return check_name(cluster.name)


def service_account_is_user_managed(cluster: RayCluster) -> bool:
    """reconcileAutoscalerServiceAccount refuses to create a ServiceAccount the user named in the head
    template (it reports AutoscalerServiceAccountNotFound instead): the user must create it."""
    spec = cluster.spec.head_group_spec.template.get("spec") or {}
    return bool(spec.get("serviceAccountName")) and spec.get(
        "serviceAccountName"
    ) == autoscaler_service_account_name(cluster)


def build_autoscaler_service_account(cluster: RayCluster) -> dict[str, Any]:
    """BuildServiceAccount (name clipped by the controller)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(cluster, autoscaler_service_account_name(cluster)),
    }


def build_autoscaler_role(cluster: RayCluster) -> dict[str, Any]:
    """BuildRole: the minimal autoscaler rules in the cluster's namespace."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(cluster, autoscaler_role_name(cluster)),
        "rules": [{key: list(value) for key, value in rule.items()} for rule in AUTOSCALER_RULES],
    }


def build_autoscaler_role_binding(cluster: RayCluster) -> dict[str, Any]:
    """BuildRoleBinding: the head's ServiceAccount bound to the Role (both names clipped)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(cluster, autoscaler_role_name(cluster)),
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": autoscaler_service_account_name(cluster),
                "namespace": cluster.namespace,
            }
        ],
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": autoscaler_role_name(cluster),
        },
    }


def build_autoscaler_rbac(cluster: RayCluster) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding in KubeRay's reconcile order; empty without autoscaling.

    The ServiceAccount is left out when the user manages it (service_account_is_user_managed)."""
    if not cluster.spec.enable_in_tree_autoscaling:
        return []
    objects = [] if service_account_is_user_managed(cluster) else [build_autoscaler_service_account(cluster)]
    return [*objects, build_autoscaler_role(cluster), build_autoscaler_role_binding(cluster)]
