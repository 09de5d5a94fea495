"""The optional validating webhooks on the real kube-apiserver: the API server calls raybus-webhook
over TLS on loopback, and `kubectl apply` of an invalid object is refused with KubeRay's message.

Set up as deploy/kustomize/components/webhook installs it: the ValidatingWebhookConfiguration of
webhook.yaml (a `url` on loopback instead of the Service, which an API server without kube-proxy
cannot reach, and a namespaceSelector so other tests on this control plane are not judged), the
secrets Job's RBAC of secrets-job.yaml, and `raybus webhook-secrets` run with that ServiceAccount's
token: it makes the serving certificate and sets the caBundle. Red team: the same token can patch no
other webhook configuration and read no other Secret.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from raybus_sim.testing.envtest import ApiError, ControlPlane
from raybus_sim.testing.servers import ServerProcess, free_port
from tests.conftest import REPO
from tests.unit.api.builders import mutated, raycluster, rayjob

pytestmark = pytest.mark.integration
COMPONENT = REPO / "deploy" / "kustomize" / "components" / "webhook"
CONFIG = "raybus-validating-webhook"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((COMPONENT / name).read_text()) if d]


def kubectl(cp: ControlPlane, namespace: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    assert binary, "kubectl is needed on PATH"
    return subprocess.run([binary, "--kubeconfig", str(cp.admin_kubeconfig), "-n", namespace, *args], input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)


def install_rbac(cp: ControlPlane, namespace: str) -> None:
    """secrets-job.yaml's ServiceAccount, Role(Binding) in `namespace`, ClusterRole(Binding)."""
    paths = {"ServiceAccount": f"/api/v1/namespaces/{namespace}/serviceaccounts",
             "Role": f"{RBAC}/namespaces/{namespace}/roles", "RoleBinding": f"{RBAC}/namespaces/{namespace}/rolebindings",
             "ClusterRole": f"{RBAC}/clusterroles", "ClusterRoleBinding": f"{RBAC}/clusterrolebindings"}
    for doc in docs("secrets-job.yaml"):
        if doc["kind"] in paths:
            for subject in doc.get("subjects") or []:
                subject["namespace"] = namespace
            cp.request("POST", paths[doc["kind"]], doc)


def webhook_configuration(namespace: str, port: int) -> dict[str, Any]:
    (config,) = [d for d in docs("webhook.yaml") if d["kind"] == "ValidatingWebhookConfiguration"]
    for hook in config["webhooks"]:
        path = hook["clientConfig"].pop("service")["path"]
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{path}"
        hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return dict(config)


def start_webhook(cp: ControlPlane, namespace: str, home: Path, port: int, strictness: str) -> ServerProcess:
    secret = cp.request("GET", f"/api/v1/namespaces/{namespace}/secrets/raybus-webhook-tls")
    for key in ("tls.crt", "tls.key"):
        (home / key).write_bytes(base64.b64decode(secret["data"][key]))
    server = ServerProcess(argv=[sys.executable, "-m", "webhook", "--bind", "127.0.0.1", "--port", str(port),
                                 "--tls-cert-file", str(home / "tls.crt"), "--tls-key-file", str(home / "tls.key"),
                                 "--strictness", strictness, "--log-level", "INFO"], port=port, data_dir=home)
    server.start()
    return server


@pytest.fixture
def webhook(ray_crds: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[tuple[ControlPlane, str, Path, int]]:
    cp, port = ray_crds, free_port()
    install_rbac(cp, namespace)
    cp.request("POST", WEBHOOKS, webhook_configuration(namespace, port))
    try:
        token = cp.token_for(namespace, "raybus-webhook-bootstrap")
        kubeconfig = cp.write_kubeconfig(tmp_path / "bootstrap.kubeconfig", token, namespace=namespace)
        made = subprocess.run([sys.executable, "-m", "raybus.cli", "webhook-secrets", "--namespace", namespace,
                               "--kubeconfig", str(kubeconfig), "--host", "127.0.0.1"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert made.returncode == 0, made.stdout + made.stderr
        assert "created" in made.stdout and "caBundle" in made.stdout, made.stdout
        yield cp, namespace, tmp_path, port
    finally:
        cp.request("DELETE", f"{WEBHOOKS}/{CONFIG}")
        for path in (f"{RBAC}/clusterrolebindings/raybus-webhook-bootstrap", f"{RBAC}/clusterroles/raybus-webhook-bootstrap"):
            cp.request("DELETE", path)


def named(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return mutated(doc, lambda d: d["metadata"].update(name=name))


def apply(cp: ControlPlane, namespace: str, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return kubectl(cp, namespace, "apply", "-f", "-", stdin=yaml.safe_dump(doc))


def _duplicate_group(d: dict[str, Any]) -> None:
    d["spec"]["workerGroupSpecs"].append(dict(d["spec"]["workerGroupSpecs"][0]))


def _min_above_max(d: dict[str, Any]) -> None:
    d["spec"]["workerGroupSpecs"][0].update(minReplicas=5, maxReplicas=1)


def test_kubectl_apply_is_refused_with_kuberays_message(webhook: tuple[ControlPlane, str, Path, int]) -> None:
    cp, namespace, home, port = webhook
    server = start_webhook(cp, namespace, home, port, "kuberay")
    try:
        ok = apply(cp, namespace, named(raycluster(), "valid"))
        assert ok.returncode == 0 and "created" in ok.stdout, ok.stderr
        duplicate = named(mutated(raycluster(), _duplicate_group), "dup")
        dup = apply(cp, namespace, duplicate)
        # kubectl prints an Invalid Status by its causes; the API server's message names the webhook
        assert dup.returncode != 0
        assert ('The RayCluster "dup" is invalid: spec.workerGroupSpecs[1]: Invalid value: "small": worker group '
                "names must be unique") in dup.stderr
        with pytest.raises(ApiError) as denied:
            cp.request("POST", f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters", duplicate)
        assert denied.value.code == 422 and isinstance(denied.value.body, dict)
        assert denied.value.body["message"] == (
            'admission webhook "vraycluster.kb.io" denied the request: RayCluster.ray.io "dup" is invalid: '
            'spec.workerGroupSpecs[1]: Invalid value: "small": worker group names must be unique')
        assert denied.value.body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field":
                                                           "spec.workerGroupSpecs[1]", "message":
                                                           'Invalid value: "small": worker group names must be unique'}]
        # an update is judged too: the valid cluster given a second group of the same name
        update = apply(cp, namespace, named(mutated(raycluster(), _duplicate_group), "valid"))
        assert update.returncode != 0 and "worker group names must be unique" in update.stderr
        long_name = "j" * 48  # a valid object name, over KubeRay's RayJob limit
        job = apply(cp, namespace, named(rayjob(), long_name))
        assert job.returncode != 0
        assert (f'The RayJob "{long_name}" is invalid: metadata.name: Invalid value: "{long_name}": The RayJob '
                "metadata is invalid: RayJob name should be no more than 47 characters") in job.stderr
        # what only the operator judges passes KubeRay's webhook (its Warning Event says it later)
        loose = apply(cp, namespace, named(mutated(raycluster(), _min_above_max), "loose"))
        assert loose.returncode == 0, loose.stderr
    finally:
        server.stop()


def test_full_strictness_refuses_what_the_operator_would(webhook: tuple[ControlPlane, str, Path, int]) -> None:
    cp, namespace, home, port = webhook
    server = start_webhook(cp, namespace, home, port, "full")
    try:
        refused = apply(cp, namespace, named(mutated(raycluster(), _min_above_max), "loose"))
        assert refused.returncode != 0
        assert ('The RayCluster "loose" is invalid: spec: Forbidden: worker group small has minReplicas 5 greater '
                "than maxReplicas 1") in refused.stderr
        assert apply(cp, namespace, named(raycluster(), "fine")).returncode == 0
    finally:
        server.stop()


def test_no_webhook_answering_means_no_write(webhook: tuple[ControlPlane, str, Path, int]) -> None:
    """failurePolicy Fail, as KubeRay's."""
    cp, namespace, _, _ = webhook
    down = apply(cp, namespace, named(raycluster(), "nobody-home"))
    assert down.returncode != 0 and 'failed calling webhook "vraycluster.kb.io"' in down.stderr


def test_the_secrets_job_can_touch_nothing_else(webhook: tuple[ControlPlane, str, Path, int], tmp_path: Path) -> None:
    cp, namespace, _, _ = webhook
    token = cp.token_for(namespace, "raybus-webhook-bootstrap")
    other = {"metadata": {"name": f"other-{namespace}"}, "webhooks": []}
    cp.request("POST", WEBHOOKS, other)
    cp.request("POST", f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "someone-elses"},
                                                                   "stringData": {"k": "v"}})
    try:
        attempts = [
            ("PATCH", f"{WEBHOOKS}/other-{namespace}", [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}],
             "application/json-patch+json"),
            ("GET", f"/api/v1/namespaces/{namespace}/secrets/someone-elses", None, "application/json"),
            ("GET", f"/api/v1/namespaces/{namespace}/secrets", None, "application/json"),
            ("DELETE", f"{WEBHOOKS}/{CONFIG}", None, "application/json"),
            ("GET", f"/api/v1/namespaces/{namespace}/configmaps", None, "application/json"),
        ]
        for method, path, body, content_type in attempts:
            with pytest.raises(ApiError) as denied:
                cp.request(method, path, body, token=token, content_type=content_type)
            assert denied.value.code == 403, (method, path)
        # what it may do: read its own Secret and its own webhook configuration
        cp.request("GET", f"/api/v1/namespaces/{namespace}/secrets/raybus-webhook-tls", token=token)
        cp.request("GET", f"{WEBHOOKS}/{CONFIG}", token=token)
    finally:
        cp.request("DELETE", f"{WEBHOOKS}/other-{namespace}")


def test_running_the_job_again_keeps_the_ca(webhook: tuple[ControlPlane, str, Path, int], tmp_path: Path) -> None:
    """A re-run (kubectl apply again) keeps the certificate; --renew issues a new one from the same
    CA, so the caBundle the API server trusts does not change."""
    cp, namespace, _, _ = webhook
    kubeconfig = cp.write_kubeconfig(tmp_path / "again.kubeconfig", cp.token_for(namespace, "raybus-webhook-bootstrap"),
                                     namespace=namespace)
    before = cp.request("GET", f"/api/v1/namespaces/{namespace}/secrets/raybus-webhook-tls")["data"]
    bundle = cp.request("GET", f"{WEBHOOKS}/{CONFIG}")["webhooks"][0]["clientConfig"]["caBundle"]
    assert bundle == before["ca.crt"]
    for extra, what in (([], "kept (valid)"), (["--renew"], "renewed (same CA)")):
        again = subprocess.run([sys.executable, "-m", "raybus.cli", "webhook-secrets", "--namespace", namespace,
                                "--kubeconfig", str(kubeconfig), "--host", "127.0.0.1", *extra],
                               capture_output=True, text=True, timeout=120, check=False)
        assert again.returncode == 0 and what in again.stdout, again.stdout + again.stderr
    after = cp.request("GET", f"/api/v1/namespaces/{namespace}/secrets/raybus-webhook-tls")["data"]
    assert after["ca.crt"] == before["ca.crt"] and after["tls.crt"] != before["tls.crt"]
    assert {w["clientConfig"]["caBundle"] for w in cp.request("GET", f"{WEBHOOKS}/{CONFIG}")["webhooks"]} == {bundle}
