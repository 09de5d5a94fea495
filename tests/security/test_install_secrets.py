"""No raybus Pod can read the bus's credentials: Secret raybus-bus holds every role's password and
bus-admin's, and RBAC cannot leave one Secret out of a list or watch, so no ServiceAccount of the
install may get, list or watch any Secret. Checked on the real kube-apiserver with each
ServiceAccount's own token (TokenRequest), for the RBAC of every kustomize target as rendered; the
command-executor may still create the RayCluster auth token Secret (its create is its answer)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from raybus_sim.testing.envtest import ApiError, ControlPlane
from tests.integration.deploy.install_kit import InstalledRbac, install_rbac, render

pytestmark = pytest.mark.integration
# base and the namespaced install (Roles instead of ClusterRoles) in `make test`; dev and ha reuse
# base's ServiceAccounts and RBAC, and run in `make test-long`.
TARGETS = ["base", "overlays/namespaced",
           *(pytest.param(t, marks=pytest.mark.long) for t in ("overlays/dev", "overlays/ha"))]


@pytest.fixture(params=TARGETS)
def install(request: pytest.FixtureRequest, control_plane: ControlPlane, namespace: str) -> Iterator[InstalledRbac]:
    """The target's RBAC with every namespace it names mapped to this test's namespace, so the
    Secret below sits both in raybus's namespace and in every namespace it watches."""
    docs = render(request.param)
    names = {d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")}
    names |= {s["namespace"] for d in docs for s in d.get("subjects", []) if "namespace" in s}
    installed = install_rbac(control_plane, docs, dict.fromkeys(names, namespace), secrets.token_hex(3))
    control_plane.request("POST", f"/api/v1/namespaces/{namespace}/secrets", {
        "metadata": {"name": "raybus-bus"}, "stringData": {"nats-bus-admin": "s3cr3t"}})
    try:
        yield installed
    finally:
        installed.cleanup()


def refused(cp: ControlPlane, path: str, token: str) -> bool:
    try:
        cp.request("GET", path, token=token)
    except ApiError as exc:
        return exc.code == 403
    return False


def test_no_service_account_reads_raybus_bus(install: InstalledRbac, namespace: str) -> None:
    cp = install.cp
    accounts = [d["metadata"]["name"] for d in cp.request(
        "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts")["items"] if d["metadata"]["name"] != "default"]
    assert {"raybus-watcher", "raybus-command-executor", "raybus-dashboard-poller",
            "raybus-bus-bootstrap"} <= set(accounts)
    for account in accounts:
        token = cp.token_for(namespace, account, expiration_s=600)
        for path in (f"/api/v1/namespaces/{namespace}/secrets/raybus-bus",
                     f"/api/v1/namespaces/{namespace}/secrets",
                     f"/api/v1/namespaces/{namespace}/secrets?watch=1&timeoutSeconds=1",
                     "/api/v1/secrets", "/api/v1/secrets?watch=1&timeoutSeconds=1"):
            assert refused(cp, path, token), f"{account} may GET {path}"
    # The tokens are real and bound: what each one is for is allowed.
    watcher = cp.token_for(namespace, "raybus-watcher", expiration_s=600)
    assert cp.request("GET", f"/api/v1/namespaces/{namespace}/pods", token=watcher)["items"] == []
    executor = cp.token_for(namespace, "raybus-command-executor", expiration_s=600)
    created = cp.request("POST", f"/api/v1/namespaces/{namespace}/secrets", {
        "metadata": {"name": "rc-token"}, "stringData": {"auth_token": "t"}}, token=executor)
    assert created["metadata"]["name"] == "rc-token"
    with pytest.raises(ApiError) as again:  # the answer the cluster-reconciler takes as "exists"
        cp.request("POST", f"/api/v1/namespaces/{namespace}/secrets", {
            "metadata": {"name": "rc-token"}, "stringData": {"auth_token": "other"}}, token=executor)
    assert again.value.code == 409
    assert refused(cp, f"/api/v1/namespaces/{namespace}/secrets/rc-token", executor)
