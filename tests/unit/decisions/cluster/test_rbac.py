"""Autoscaler ServiceAccount / Role / RoleBinding, mirroring KubeRay rbac_test.go."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster.rbac import (
    build_autoscaler_rbac,
    build_autoscaler_role,
    build_autoscaler_role_binding,
    build_autoscaler_service_account,
    service_account_is_user_managed,
)

LONG = "".join(chr(ord("a") + i % 26) for i in range(200))


def make(name: str = "raycluster-sample", sa: str | None = None, autoscaling: bool = True) -> RayCluster:
    spec: dict[str, Any] = {"containers": [{"name": "ray-head"}]}
    if sa:
        spec["serviceAccountName"] = sa
    return RayCluster.from_dict(
        {
            "metadata": {"name": name, "namespace": "default", "uid": "uid-1"},
            "spec": {"enableInTreeAutoscaling": autoscaling, "headGroupSpec": {"template": {"spec": spec}}},
        }
    )


@pytest.mark.parametrize(
    ("name", "sa", "want"),
    [
        ("raycluster-sample", "my-service-account", ["my-service-account", "raycluster-sample"]),
        ("raycluster-sample", None, ["raycluster-sample", "raycluster-sample"]),
        (LONG, None, [LONG[-50:], LONG[-50:]]),  # clipped by utils.CheckName (last 50 chars)
    ],
)
def test_role_binding_subject_and_role_ref_name(name: str, sa: str | None, want: list[str]) -> None:
    # TestBuildRoleBindingSubjectAndRoleRefName
    rb = build_autoscaler_role_binding(make(name, sa))
    assert [rb["subjects"][0]["name"], rb["roleRef"]["name"]] == want
    assert rb["subjects"][0] == {"kind": "ServiceAccount", "name": want[0], "namespace": "default"}
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": want[1]}


def test_role_rules_and_metadata() -> None:
    role = build_autoscaler_role(make())
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1" and role["kind"] == "Role"
    assert role["metadata"]["name"] == "raycluster-sample"
    assert role["metadata"]["namespace"] == "default"
    assert role["metadata"]["labels"] == {
        "ray.io/cluster": "raycluster-sample",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
        {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
    ]
    ref = role["metadata"]["ownerReferences"]
    assert ref == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "name": "raycluster-sample",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_service_account() -> None:
    sa = build_autoscaler_service_account(make(LONG))
    assert sa["apiVersion"] == "v1" and sa["kind"] == "ServiceAccount"
    assert sa["metadata"]["name"] == LONG[-50:]
    assert sa["metadata"]["labels"]["ray.io/cluster"] == LONG


def test_rbac_set() -> None:
    assert build_autoscaler_rbac(make(autoscaling=False)) == []
    assert [o["kind"] for o in build_autoscaler_rbac(make())] == ["ServiceAccount", "Role", "RoleBinding"]
    # A ServiceAccount named in the head template is the user's to create (AutoscalerServiceAccountNotFound).
    rc = make(sa="my-service-account")
    assert service_account_is_user_managed(rc)
    assert [o["kind"] for o in build_autoscaler_rbac(rc)] == ["Role", "RoleBinding"]
    assert not service_account_is_user_managed(make())


def test_rbac_names_match_head_pod_service_account() -> None:
    from raybus.decisions.cluster.pod_template import build_head_pod
    from raybus.decisions.cluster.settings import OperatorSettings

    rc = make(LONG)
    rc.spec.head_group_spec.template["spec"]["containers"][0]["image"] = "ray"
    pod = build_head_pod(rc, settings=OperatorSettings(), name="x")
    assert pod["spec"]["serviceAccountName"] == build_autoscaler_service_account(rc)["metadata"]["name"]
    assert pod["spec"]["serviceAccountName"] == build_autoscaler_role_binding(rc)["subjects"][0]["name"]
