"""Generated CRDs: committed files are fresh, schemas are structural, every sample is accepted and
KubeRay's defaults/enums/printer columns/status subresource are present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from raybus.api import parse_manifests
from raybus.api.crdgen import KUSTOMIZATION, PLURALS, crd, generate, kustomization, main
from tests.conftest import REPO, SAMPLES
from tests.unit.api.schema_check import check, walk_schemas

CRD_DIR = REPO / "deploy" / "crds"
GENERATED = generate()
CRDS = {kind.__name__: crd(kind) for kind in PLURALS}  # what generate() renders


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_committed_crds_are_fresh() -> None:
    """The CRDs and the kustomization that lists them (deploy/kustomize/base installs the directory)."""
    expected = {**GENERATED, KUSTOMIZATION: kustomization(list(GENERATED))}
    committed = {p.name: p.read_text() for p in CRD_DIR.glob("*.yaml")}
    assert committed == expected, "run: python -m raybus.api.crdgen deploy/crds"
    assert yaml.safe_load(expected[KUSTOMIZATION])["resources"] == sorted(GENERATED)


def test_generation_is_deterministic_and_cli_writes_files(tmp_path: Path) -> None:
    assert generate() == GENERATED
    assert main([str(tmp_path)]) == 0
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        **GENERATED, KUSTOMIZATION: kustomization(list(GENERATED))}
    assert main([]) == 2


@pytest.mark.parametrize(
    ("kind", "plural"),
    [("RayCluster", "rayclusters"), ("RayJob", "rayjobs"), ("RayService", "rayservices"), ("RayCronJob", "raycronjobs")],
)
def test_crd_identity(kind: str, plural: str) -> None:
    crd = CRDS[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["metadata"]["name"] == f"{plural}.ray.io"
    spec = crd["spec"]
    assert spec["group"] == "ray.io" and spec["scope"] == "Namespaced"
    assert spec["names"] == {"categories": ["all"], "kind": kind, "listKind": f"{kind}List", "plural": plural,
                             "singular": kind.lower()}
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}


def _columns(kind: str) -> list[tuple[str, str, str, int]]:
    return [(c["name"], c["jsonPath"], c["type"], c.get("priority", 0))
            for c in CRDS[kind]["spec"]["versions"][0]["additionalPrinterColumns"]]


def test_printer_columns_match_kuberay() -> None:
    assert _columns("RayCluster") == [
        ("desired workers", ".status.desiredWorkerReplicas", "integer", 0),
        ("available workers", ".status.availableWorkerReplicas", "integer", 0),
        ("cpus", ".status.desiredCPU", "string", 0),
        ("memory", ".status.desiredMemory", "string", 0),
        ("gpus", ".status.desiredGPU", "string", 0),
        ("tpus", ".status.desiredTPU", "string", 1),
        ("status", ".status.state", "string", 0),
        ("age", ".metadata.creationTimestamp", "date", 0),
        ("head pod IP", ".status.head.podIP", "string", 1),
        ("head service IP", ".status.head.serviceIP", "string", 1),
    ]
    assert [c[0] for c in _columns("RayJob")] == [
        "job status", "deployment status", "ray cluster name", "start time", "end time", "age"]
    assert _columns("RayCronJob") == [("schedule", ".spec.schedule", "string", 0),
                                      ("timezone", ".spec.timeZone", "string", 0),
                                      ("last schedule", ".status.lastScheduleTime", "date", 0),
                                      ("age", ".metadata.creationTimestamp", "date", 0),
                                      ("suspend", ".spec.suspend", "boolean", 0)]
    assert _columns("RayService") == [("service status", ".status.serviceStatus", "string", 0),
                                      ("num serve endpoints", ".status.numServeEndpoints", "string", 0)]


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_schema_is_structural(kind: str) -> None:
    for path, node in walk_schemas(_schema(kind)):
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "type" in node and "anyOf" not in node, path
        if node["type"] == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
            assert "properties" in node or "additionalProperties" in node or path == ".metadata", path


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_schemas_are_complete_inlined_and_without_descriptions(kind: str) -> None:
    """As controller-gen writes KubeRay's: nothing preserved unknown, no $ref, no description."""
    for path, node in walk_schemas(_schema(kind)):
        assert not ({"x-kubernetes-preserve-unknown-fields", "$ref", "description", "allOf"} & set(node)), path


def test_embedded_kubernetes_objects_have_their_full_schema() -> None:
    spec = _schema("RayCluster")["properties"]["spec"]["properties"]
    template = spec["headGroupSpec"]["properties"]["template"]["properties"]
    assert sorted(template["metadata"]["properties"]) == ["annotations", "finalizers", "labels", "name", "namespace"]
    containers = template["spec"]["properties"]["containers"]
    assert containers["x-kubernetes-list-map-keys"] == ["name"] and containers["items"]["required"] == ["name"]
    container = containers["items"]["properties"]
    assert container["ports"]["items"]["properties"]["containerPort"] == {"format": "int32", "type": "integer"}
    assert container["ports"]["items"]["properties"]["protocol"] == {"default": "TCP", "type": "string"}
    assert container["imagePullPolicy"] == {"type": "string"}  # Go's +enum is not controller-gen's
    limit = container["resources"]["properties"]["limits"]["additionalProperties"]
    assert limit["x-kubernetes-int-or-string"] is True and limit["pattern"].startswith("^(\\+|-)?")
    assert container["livenessProbe"]["properties"]["httpGet"]["properties"]["port"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    env = spec["autoscalerOptions"]["properties"]["env"]["items"]
    assert env["required"] == ["name"] and "valueFrom" in env["properties"]
    assert spec["headGroupSpec"]["properties"]["headService"]["properties"]["spec"]["properties"]["ports"]
    worker = spec["workerGroupSpecs"]["items"]["properties"]
    assert worker["template"] == spec["headGroupSpec"]["properties"]["template"]
    job = _schema("RayJob")["properties"]["spec"]["properties"]
    assert job["submitterPodTemplate"] == spec["headGroupSpec"]["properties"]["template"]
    conditions = _schema("RayCluster")["properties"]["status"]["properties"]["conditions"]["items"]
    assert conditions["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]


def test_kuberay_defaults_and_enums_present() -> None:
    worker = _schema("RayCluster")["properties"]["spec"]["properties"]["workerGroupSpecs"]["items"]
    defaults = {k: worker["properties"][k].get("default") for k in ("replicas", "minReplicas", "maxReplicas", "numOfHosts")}
    assert defaults == {"replicas": 0, "minReplicas": 0, "maxReplicas": 2147483647, "numOfHosts": 1}
    assert worker["required"] == ["groupName", "maxReplicas", "minReplicas", "template"]
    job = _schema("RayJob")["properties"]["spec"]["properties"]
    assert job["submissionMode"]["default"] == "K8sJobMode" and job["backoffLimit"]["default"] == 0
    rule = job["deletionStrategy"]["properties"]["deletionRules"]["items"]
    assert rule["properties"]["policy"]["enum"] == ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"]
    assert len(rule["properties"]["condition"]["x-kubernetes-validations"]) == 2
    managed_by = _schema("RayCluster")["properties"]["spec"]["properties"]["managedBy"]
    assert [v["rule"] for v in managed_by["x-kubernetes-validations"]] == [
        "self == oldSelf", "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']"]
    assert _schema("RayJob")["properties"]["spec"]["properties"]["rayClusterSpec"] == \
        _schema("RayCluster")["properties"]["spec"]


SAMPLE_FILES = sorted(SAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_every_sample_is_accepted_by_its_schema(path: Path) -> None:
    for obj in parse_manifests(path.read_text()):
        assert check(obj.to_manifest(), _schema(obj.kind)) == []


def test_schema_check_rejects_bad_objects() -> None:
    # Guards against a vacuous checker: each of these must be refused by the generated schema.
    schema = _schema("RayCluster")
    base = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "x"},
            "spec": {"headGroupSpec": {"template": {}}, "workerGroupSpecs": [{"groupName": "g", "template": {}}]}}
    assert check(base, schema) == []
    bad_enum = yaml.safe_load(yaml.safe_dump(base))
    bad_enum["spec"]["autoscalerOptions"] = {"upscalingMode": "Fast"}
    assert check(bad_enum, schema) == [".spec.autoscalerOptions.upscalingMode: unsupported value 'Fast'"]
    unknown = yaml.safe_load(yaml.safe_dump(base))
    unknown["spec"]["workerGroupSpecs"][0]["replica"] = 2
    assert check(unknown, schema) == [".spec.workerGroupSpecs[0]: unknown field 'replica'"]
    wrong_type = yaml.safe_load(yaml.safe_dump(base))
    wrong_type["spec"]["workerGroupSpecs"][0]["replicas"] = "two"
    assert check(wrong_type, schema) == [".spec.workerGroupSpecs[0].replicas: expected integer, got str"]
    missing = yaml.safe_load(yaml.safe_dump(base))
    del missing["spec"]["headGroupSpec"]
    assert check(missing, schema) == [".spec: missing required field 'headGroupSpec'"]
