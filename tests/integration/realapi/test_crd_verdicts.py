"""raybus's CRDs (deploy/crds) on the real kube-apiserver give KubeRay v1.7.0's CRDs' verdicts.

The corpus (tests/crds/corpus.py: every KubeRay sample, unknown fields at every depth, wrong types,
bad quantities, bad enums, CEL violations on create and update ...) was run on KubeRay v1.7.0's own
CRDs by `make crd-verdicts` (tests/crds/record_kuberay.py, on a control plane of its own) with
`kubectl apply --dry-run=server --validate=strict`; each case's verdict and the API server's
message are in tests/crds/kuberay-v1.7.0-verdicts.json. Here the same cases go to raybus's CRDs:
all of them through the requests kubectl sends (13 ms a case), a handful through kubectl itself
(0.3 s a case; `make crd-corpus` runs every case through kubectl). Also: every sample applies
server-side, `kubectl explain` reaches pod-template fields, and an object stored under the earlier
schema (pod templates that kept any field) still updates (CRD validation ratcheting).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from raybus_sim.testing.envtest import ApiError, ControlPlane, install_crds
from tests.conftest import REPO
from tests.crds.corpus import cases
from tests.crds.record_kuberay import VERDICTS
from tests.crds.verdicts import Verdict, run_api, run_kubectl, run_server_side

pytestmark = pytest.mark.integration
CORPUS = cases()
RECORDED: dict[str, Any] = json.loads(VERDICTS.read_text())
EXPECTED = {c["id"]: Verdict(c["verdict"] == "accepted", c["message"]) for c in RECORDED["cases"]}
# Through kubectl in `make test`: both verdicts, each way a case is applied (create, update), each
# kind of answer (strict decoding 400, schema 422, CEL 422).
KUBECTL_SMOKE = [
    "sample/ray-cluster.complete.yaml", "sample/ray-job.sample.yaml", "RayCluster/typo containres",
    "RayCluster/cpu '1x'", "RayCluster/duplicate container names", "RayJob/deletionStrategy onSuccess only",
    "RayCluster/update managedBy changed", "RayCluster/update replicas changed",
]


def kubectl(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    assert binary, "kubectl is needed on PATH"
    return subprocess.run([binary, "--kubeconfig", str(cp.admin_kubeconfig), *args], capture_output=True,
                          text=True, timeout=120, check=False)


def _differences(got: dict[str, Verdict], only: set[str] | None = None) -> list[str]:
    out = []
    for case_id, want in EXPECTED.items():
        if only is not None and case_id not in only:
            continue
        have = got.get(case_id)
        if have != want:
            out.append(f"{case_id}: KubeRay {want}, raybus {have}")
    return out


def test_the_recording_is_of_this_corpus() -> None:
    """A changed or added case needs its KubeRay verdict recorded again (make crd-verdicts)."""
    recorded = [(c["id"], c["digest"]) for c in RECORDED["cases"]]
    assert recorded == [(c.id, c.digest()) for c in CORPUS], "corpus changed: run make crd-verdicts"
    assert RECORDED["source"]["kuberay"]["tag"] == "v1.7.0"
    assert RECORDED["source"]["kube-apiserver"] == "v1.36.2"
    verdicts = {c["verdict"] for c in RECORDED["cases"]}
    assert verdicts == {"accepted", "rejected"}


def test_every_verdict_is_kuberays(ray_crds: ControlPlane, namespace: str) -> None:
    got = run_api(list(enumerate(CORPUS)), ray_crds, namespace)
    assert _differences(got) == []


def test_kubectl_gives_the_recorded_verdicts(ray_crds: ControlPlane, namespace: str, tmp_path: Path) -> None:
    chosen = [(i, c) for i, c in enumerate(CORPUS) if c.id in KUBECTL_SMOKE]
    assert len(chosen) == len(KUBECTL_SMOKE)
    got = run_kubectl(chosen, ray_crds.admin_kubeconfig, namespace, tmp_path)
    assert _differences(got, set(KUBECTL_SMOKE)) == []
    assert {v.accepted for v in got.values()} == {True, False}


def test_every_sample_applies_server_side_as_with_kuberays_crds(ray_crds: ControlPlane, namespace: str) -> None:
    """`kubectl apply --server-side`: every sample but the one KubeRay's CRDs refuse too (an empty
    `metadata:` in a pod template is a null, which server-side apply keeps and the schema refuses;
    client-side apply drops it, and that sample applies there, see the corpus)."""
    expected = {c["id"]: Verdict(c["verdict"] == "accepted", c["message"]) for c in RECORDED["server-side"]}
    samples = [(i, c) for i, c in enumerate(CORPUS) if c.id.startswith("sample/")]
    got = run_server_side(samples, ray_crds, namespace)
    assert got == expected
    assert len(samples) >= 60 and sum(v.accepted for v in got.values()) >= len(samples) - 1


@pytest.mark.parametrize(("field", "expect"), [
    ("raycluster.spec.headGroupSpec.template.spec.containers.resources", ["limits", "requests", "claims"]),
    ("raycluster.spec.workerGroupSpecs.template.spec.containers.env.valueFrom.secretKeyRef", ["key", "optional"]),
    ("rayjob.spec.submitterPodTemplate.spec.affinity.podAntiAffinity", ["preferredDuringScheduling"]),
    ("rayservice.spec.rayClusterConfig.headGroupSpec.headService.spec.ports", ["targetPort", "nodePort"]),
    ("raycronjob.spec.jobTemplate.rayClusterSpec.headGroupSpec.template.spec.volumes.configMap", ["items"]),
])
def test_kubectl_explain_reaches_pod_template_fields(ray_crds: ControlPlane, field: str, expect: list[str]) -> None:
    answer = kubectl(ray_crds, "explain", field)
    assert answer.returncode == 0, answer.stderr
    assert all(word in answer.stdout for word in expect), answer.stdout


def _ratchet_crd(full: bool) -> dict[str, Any]:
    """The generated RayCluster CRD under a group of its own (the test must not swap the ray.io CRD
    other tests use); not `full`: the earlier schema, whose pod templates kept any field."""
    crd: dict[str, Any] = yaml.load((REPO / "deploy" / "crds" / "ray.io_rayclusters.yaml").read_text(),
                                    Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    crd["metadata"]["name"] = "rayclusters.ratchet.raybus.test"
    crd["spec"]["group"] = "ratchet.raybus.test"
    if not full:
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        lax = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        spec["headGroupSpec"]["properties"]["template"] = lax
        spec["workerGroupSpecs"]["items"]["properties"]["template"] = lax
    return crd


def test_an_object_stored_under_the_earlier_schema_still_updates(control_plane: ControlPlane, namespace: str,
                                                                  tmp_path: Path) -> None:
    cp = control_plane
    path = tmp_path / "lax.yaml"
    path.write_text(json.dumps(_ratchet_crd(full=False)))
    install_crds(cp, [path])
    items = f"/apis/ratchet.raybus.test/v1/namespaces/{namespace}/rayclusters"
    obj = json.loads(json.dumps(next(c.obj for c in CORPUS if c.id == "sample/ray-cluster.complete.yaml")))
    obj["apiVersion"] = "ratchet.raybus.test/v1"
    obj["metadata"] = {"name": "stored"}
    head = obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"][0]["containerPort"] = "abc"  # what the full schema refuses
    head["resources"]["limits"]["cpu"] = "1x"
    try:
        cp.request("POST", items, obj)
        path.write_text(json.dumps(_ratchet_crd(full=True)))
        install_crds(cp, [path])
        _new_schema_is_served(cp, items, obj)
        # unchanged invalid fields ratchet: the autoscaler's replicas patch goes through
        patched = cp.request("PATCH", f"{items}/stored", {"spec": {"workerGroupSpecs": [
            {**obj["spec"]["workerGroupSpecs"][0], "replicas": 3}]}}, content_type="application/merge-patch+json")
        assert patched["spec"]["workerGroupSpecs"][0]["replicas"] == 3
        stored = patched["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        assert stored["ports"][0]["containerPort"] == "abc" and stored["resources"]["limits"]["cpu"] == "1x"
        # a changed invalid field does not
        head["resources"]["limits"]["cpu"] = "2x"
        with pytest.raises(ApiError) as refused:
            cp.request("PATCH", f"{items}/stored", {"spec": {"headGroupSpec": obj["spec"]["headGroupSpec"]}},
                       content_type="application/merge-patch+json")
        assert refused.value.code == 422 and "limits.cpu" in str(refused.value.body)
    finally:
        cp.request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rayclusters.ratchet.raybus.test")


def _new_schema_is_served(cp: ControlPlane, items: str, obj: dict[str, Any]) -> None:
    """The API server switches schemas a moment after the CRD update: wait until a new object with
    the same invalid template is refused."""
    def refused() -> bool:
        try:
            cp.request("POST", f"{items}?dryRun=All", {**obj, "metadata": {"name": "probe"}})
        except ApiError as exc:
            return exc.code == 422
        return False
    cp.wait_for(refused, "the full schema served", timeout=60)

