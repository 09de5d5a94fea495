"""The RBAC of a rendered install (`kubectl kustomize deploy/kustomize/<target>`) created for real on
the shared control plane, moved out of the way of every other test that uses it: each namespace the
install names becomes one the test chose, and each cluster-scoped object gets the test's suffix
(the base's ClusterRoleBindings bind raybus-system's ServiceAccounts, which other tests use)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from raybus_sim.testing.envtest import ApiError, ControlPlane

REPO = Path(__file__).resolve().parents[3]
KUSTOMIZE = REPO / "deploy" / "kustomize"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
Doc = dict[str, Any]


@cache
def _rendered(target: str) -> str:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed on PATH (kubectl kustomize renders deploy/kustomize)"
    return subprocess.run([kubectl, "kustomize", str(KUSTOMIZE / target)], check=True,
                          capture_output=True, text=True, timeout=60).stdout


def render(target: str) -> list[Doc]:
    """The target's documents, as `kubectl kustomize` renders them (a fresh copy per call)."""
    return [d for d in yaml.safe_load_all(_rendered(target)) if d]


@dataclass
class InstalledRbac:
    cp: ControlPlane
    namespaces: dict[str, str]  # the install's namespace -> the test's
    suffix: str
    cluster_scoped: list[str] = field(default_factory=list)  # API paths to delete afterwards

    def ns(self, install_namespace: str) -> str:
        return self.namespaces[install_namespace]

    def token(self, install_namespace: str, account: str) -> str:
        return self.cp.token_for(self.ns(install_namespace), account, expiration_s=600)

    def cleanup(self) -> None:
        for path in self.cluster_scoped:
            try:
                self.cp.request("DELETE", path)
            except ApiError as exc:
                if exc.code != 404:
                    raise


def _subjects(subjects: list[Doc], namespaces: dict[str, str]) -> list[Doc]:
    return [{**s, "namespace": namespaces[s["namespace"]]} if "namespace" in s else s for s in subjects]


def install_rbac(cp: ControlPlane, docs: list[Doc], namespaces: dict[str, str], suffix: str) -> InstalledRbac:
    """ServiceAccounts, Roles, RoleBindings, ClusterRoles and ClusterRoleBindings of `docs`, with
    every namespace mapped by `namespaces` (all must exist) and cluster-scoped names suffixed."""
    out = InstalledRbac(cp=cp, namespaces=namespaces, suffix=suffix)
    renamed = {d["metadata"]["name"]: f"{d['metadata']['name']}-{suffix}"
               for d in docs if d["kind"] == "ClusterRole"}
    for d in docs:
        kind, meta = d["kind"], d["metadata"]
        if kind == "ServiceAccount":
            cp.request("POST", f"/api/v1/namespaces/{namespaces[meta['namespace']]}/serviceaccounts",
                       {**d, "metadata": {"name": meta["name"]}})
        elif kind in ("Role", "RoleBinding"):
            body = {**d, "metadata": {"name": meta["name"]}}
            if kind == "RoleBinding":
                ref = d["roleRef"]
                body["roleRef"] = {**ref, "name": renamed.get(ref["name"], ref["name"])
                                   if ref["kind"] == "ClusterRole" else ref["name"]}
                body["subjects"] = _subjects(d["subjects"], namespaces)
            plural = "roles" if kind == "Role" else "rolebindings"
            cp.request("POST", f"{RBAC_API}/namespaces/{namespaces[meta['namespace']]}/{plural}", body)
        elif kind == "ClusterRole":
            cp.request("POST", f"{RBAC_API}/clusterroles", {**d, "metadata": {"name": renamed[meta["name"]]}})
            out.cluster_scoped.append(f"{RBAC_API}/clusterroles/{renamed[meta['name']]}")
        elif kind == "ClusterRoleBinding":
            name = f"{meta['name']}-{suffix}"
            cp.request("POST", f"{RBAC_API}/clusterrolebindings", {
                **d, "metadata": {"name": name}, "roleRef": {**d["roleRef"], "name": renamed[d["roleRef"]["name"]]},
                "subjects": _subjects(d["subjects"], namespaces)})
            out.cluster_scoped.append(f"{RBAC_API}/clusterrolebindings/{name}")
    return out
