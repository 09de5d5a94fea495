"""The envtest harness itself, on the real kube-apiserver + kube-controller-manager: TLS, token
authentication, RBAC, TokenRequest, the garbage collector and the Job controller act as in a cluster,
and raybus's KubeClient (kubernetes-asyncio) talks to it through a TLS + token kubeconfig."""

from __future__ import annotations

import asyncio
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus_sim.testing.envtest import ApiError, ControlPlane

pytestmark = pytest.mark.integration


def test_serves_tls_with_its_ca_only(control_plane: ControlPlane) -> None:
    assert control_plane.url.startswith("https://127.0.0.1:")
    # The system trust store does not know the test CA: the certificate is really checked.
    with pytest.raises(urllib.error.URLError) as no_ca:
        urllib.request.urlopen(control_plane.url + "/readyz", context=ssl.create_default_context(), timeout=5)
    assert isinstance(no_ca.value.reason, ssl.SSLCertVerificationError)
    # With the CA the server's identity checks out, and it still wants a token.
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(control_plane.url + "/api/v1/namespaces",
                               context=ssl.create_default_context(cafile=str(control_plane.ca_file)), timeout=5)
    assert anonymous.value.code == 401
    with pytest.raises(ApiError) as wrong:
        control_plane.request("GET", "/api/v1/namespaces", token="not-a-token")
    assert wrong.value.code == 401


def test_rbac_refuses_an_unbound_service_account_until_bound(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
                          {"metadata": {"name": "reader"}})
    token = control_plane.token_for(namespace, "reader", expiration_s=600)
    # TokenRequest gave a real ServiceAccount token: the server knows who holds it.
    review = control_plane.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                   token=token)
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:reader"
    with pytest.raises(ApiError) as refused:
        control_plane.request("GET", f"/api/v1/namespaces/{namespace}/configmaps", token=token)
    assert refused.value.code == 403
    assert f'"system:serviceaccount:{namespace}:reader" cannot list resource "configmaps"' \
        in refused.value.body["message"]  # type: ignore[index]

    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    control_plane.request("POST", f"{rbac}/roles", {
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
    control_plane.request("POST", f"{rbac}/rolebindings", {
        "metadata": {"name": "cm-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]})
    listed = control_plane.wait_for(lambda: control_plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/configmaps", token=token), "RBAC grant to take effect")
    assert listed["kind"] == "ConfigMapList"
    # Only what the Role grants: reading Secrets stays refused.
    with pytest.raises(ApiError) as still:
        control_plane.request("GET", f"/api/v1/namespaces/{namespace}/secrets", token=token)
    assert still.value.code == 403


def test_garbage_collector_deletes_an_owned_object(control_plane: ControlPlane, namespace: str) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    owner = control_plane.request("POST", cms, {"metadata": {"name": "owner"}})
    control_plane.request("POST", cms, {"metadata": {"name": "dependent", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]}})
    control_plane.request("POST", cms, {"metadata": {"name": "bystander"}})
    control_plane.request("DELETE", f"{cms}/owner")

    def dependent_gone() -> bool:
        try:
            control_plane.request("GET", f"{cms}/dependent")
        except ApiError as exc:
            return exc.code == 404
        return False
    control_plane.wait_for(dependent_gone, "the garbage collector to delete the dependent")
    assert control_plane.request("GET", f"{cms}/bystander")["metadata"]["name"] == "bystander"


def test_job_controller_creates_a_pod_for_a_job(control_plane: ControlPlane, namespace: str) -> None:
    job = control_plane.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", {
        "metadata": {"name": "hello"},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}})
    uid = job["metadata"]["uid"]

    def job_pods() -> list[dict[str, object]]:
        answer = control_plane.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=batch.kubernetes.io/controller-uid%3D{uid}")
        return list(answer["items"])
    pods = control_plane.wait_for(job_pods, "the Job controller to create the Job's Pod")
    assert len(pods) == 1
    pod = pods[0]
    owner = pod["metadata"]["ownerReferences"][0]  # type: ignore[index]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Job", "hello", uid, True)
    # No kubelet: the Pod stays Pending (only a simulated node would move it).
    assert pod["status"]["phase"] == "Pending"  # type: ignore[index]


async def test_kube_client_over_tls_with_a_service_account_token(control_plane: ControlPlane, namespace: str,
                                                               tmp_path: Path) -> None:
    """raybus's own KubeClient (kubernetes-asyncio) through a kubeconfig with the CA file and a
    least-privilege ServiceAccount token, as a service would run in a cluster."""
    control_plane.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "svc"}})
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    control_plane.request("POST", f"{rbac}/roles", {"metadata": {"name": "cm"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create"]}]})
    control_plane.request("POST", f"{rbac}/rolebindings", {
        "metadata": {"name": "cm"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "svc", "namespace": namespace}]})
    kubeconfig = control_plane.write_kubeconfig(tmp_path / "kubeconfig", control_plane.token_for(namespace, "svc"))
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    cm = resource_for("v1", "ConfigMap")
    try:
        items, rv = await kube.list_all(cm, namespace=namespace)
        assert rv and all(i["metadata"]["name"] == "kube-root-ca.crt" or i["metadata"]["name"].startswith(
            "openshift-") for i in items)

        async def first_added() -> str:
            async for event in kube.watch(cm, resource_version=rv, namespace=namespace, timeout_s=30):
                if event.type == "ADDED":
                    return str(event.object["metadata"]["name"])
            raise AssertionError("watch ended without the ADDED event")
        watching = asyncio.create_task(first_added())
        await kube.create(cm, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "made"}},
                          namespace=namespace)
        assert await asyncio.wait_for(watching, 30) == "made"
        with pytest.raises(Exception) as refused:  # the Role grants configmaps only
            await kube.list_all(resource_for("v1", "Secret"), namespace=namespace)
        assert getattr(refused.value, "code", None) == 403
    finally:
        await kube.close()
