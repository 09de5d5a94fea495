"""The Kubernetes install (deploy/kustomize) against a real kube-apiserver: every object of the
base and of each overlay, rendered by `kubectl kustomize` as `kubectl apply --server-side -k` does,
passes the server's validation, defaulting and admission in a dry run, with no error and no warning.
Server-side apply is the install's way: the CRDs' full schemas (150-220 KB of JSON each) leave
little room under the 256 KiB last-applied annotation client-side apply would add. Only the namespace is created for real (a namespaced dry run needs
it); CRDs, ClusterRoles, Deployments, StatefulSets, PDBs, ... are dry-run. A manifest the server
refuses makes the same check fail (last test).

`control_plane` is the real etcd + kube-apiserver (+ kube-controller-manager) of tests/conftest.py
(raybus_sim.testing.envtest); kubectl uses its admin kubeconfig."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
KUSTOMIZE = REPO / "deploy" / "kustomize"
# base and the namespaced install (its own RBAC) in `make test`; the overlays that only add to base
# (each a full CRD dry run, about 30 s on the real server) in `make test-long`.
TARGETS = ["base", "overlays/namespaced",
           *(pytest.param(t, marks=pytest.mark.long) for t in ("overlays/dev", "overlays/ha", "overlays/webhook"))]
DRY_RUN = "serverside-applied (server dry run)"


def kubectl(control_plane: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    assert binary, "kubectl is needed on PATH"
    return subprocess.run([binary, "--kubeconfig", str(control_plane.admin_kubeconfig), *args],
                          input=stdin, capture_output=True, text=True, timeout=120, check=False)


def rendered(target: Path) -> list[dict[str, Any]]:
    out = subprocess.run([shutil.which("kubectl") or "kubectl", "kustomize", str(target)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    # libyaml: the render holds the CRDs' full schemas (2.5 MB of YAML)
    return [d for d in yaml.load_all(out, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def create_namespaces(control_plane: Any, docs: list[dict[str, Any]]) -> None:
    """For real, as the first thing `kubectl apply -k` does; idempotent."""
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    assert namespaces, "the install creates its namespace"
    # A namespaced install's watched namespaces are the user's (they exist before the install).
    namespaces += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                   for ns in sorted({d["metadata"].get("namespace") for d in docs} - {None, "raybus-system"})]
    # Client-side apply: it records the last-applied annotation that a later client-side apply
    # wants (without it, kubectl warns); a server-side apply takes over such an object silently.
    done = kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump_all(namespaces))
    assert done.returncode == 0, done.stderr


def dry_run(control_plane: Any, target: Path) -> subprocess.CompletedProcess[str]:
    return kubectl(control_plane, "apply", "--server-side", "--field-manager", "raybus-install", "--dry-run=server",
                   "-k", str(target))


@pytest.mark.parametrize("target", TARGETS)
def test_every_object_passes_a_dry_run_on_the_real_server(control_plane: Any, target: str) -> None:
    """`kubectl apply --server-side -k` as docs/install says."""
    docs = rendered(KUSTOMIZE / target)
    create_namespaces(control_plane, docs)
    result = dry_run(control_plane, KUSTOMIZE / target)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no warning either (deprecated API, unknown field, ...)
    lines = result.stdout.splitlines()
    assert len(lines) == len(docs) and all(line.endswith(DRY_RUN) for line in lines), result.stdout
    kinds = {d["kind"] for d in docs}
    cluster_rbac = {"Role", "RoleBinding"} if target == "overlays/namespaced" else {"ClusterRole", "ClusterRoleBinding"}
    assert {"CustomResourceDefinition", "Namespace", "ServiceAccount", *cluster_rbac,
            "ConfigMap", "Service", "Deployment", "StatefulSet", "PodDisruptionBudget"} <= kinds
    # a dry run stores nothing: the Deployments are not there
    listed = kubectl(control_plane, "get", "deployments", "-n", "raybus-system", "-o", "name")
    assert listed.returncode == 0 and listed.stdout == "", listed.stdout + listed.stderr


BROKEN = {  # a patch to the watcher's Deployment -> what the server's answer names
    "unknown field": ({"template": {"spec": {"containers": [{"name": "watcher", "livenessProbe": {
        "httpGet": {"pth": "/healthz"}}}]}}}, "livenessProbe.httpGet.pth"),
    "invalid value": ({"replicas": -1}, "spec.replicas"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_the_server_refuses_what_is_wrong(control_plane: Any, tmp_path: Path, broken: str) -> None:
    """The same dry run on an overlay that breaks the watcher's Deployment fails, naming the field."""
    spec, field = BROKEN[broken]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(KUSTOMIZE / "overlays" / "dev", tmp_path)],  # kustomize: relative
        "patches": [{"patch": yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment",
                                              "metadata": {"name": "raybus-watcher"}, "spec": spec})}]}))
    create_namespaces(control_plane, rendered(tmp_path))
    result = dry_run(control_plane, tmp_path)
    assert result.returncode != 0
    assert "raybus-watcher" in result.stderr and field in result.stderr, result.stderr
