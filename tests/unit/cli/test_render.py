"""`raybus render`: what the operator would create, without a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raybus.api.defaults import with_defaults
from raybus.api.load import parse_manifests
from raybus.api.raycluster import RayCluster
from raybus.api.settings import FeatureGates
from raybus.cli.render import render
from raybus.decisions.cluster.settings import OperatorSettings
from tests.conftest import SAMPLES

ALL_GATES = OperatorSettings(feature_gates=FeatureGates(**{
    name: True for name in FeatureGates.model_fields}))
CLUSTER_SAMPLES = sorted(p for p in SAMPLES.glob("*.yaml")
                         if any(isinstance(o, RayCluster) for o in parse_manifests(p.read_text())))


def _expected_workers(cluster: RayCluster) -> int:
    total = 0
    for group in with_defaults(cluster).spec.worker_group_specs or []:
        if group.suspend:
            continue
        replicas = max(group.min_replicas or 0, min(group.replicas or 0, group.max_replicas or 0))
        total += replicas * (group.num_of_hosts or 1)
    return total


@pytest.mark.parametrize("path", CLUSTER_SAMPLES, ids=lambda p: p.name)
def test_every_cluster_sample_renders_head_workers_and_head_service(path: Path) -> None:
    text = path.read_text()
    objects, problems = render(text)
    if problems:
        # Samples of alpha features (mTLS, NetworkPolicy, history server) need their gate, as
        # with KubeRay: rejected with a message naming it, rendered once it is enabled.
        assert all("feature gate" in p.lower() or "gate" in p for p in problems), problems
        objects, problems = render(text, settings=ALL_GATES)
        assert problems == []
    clusters = [o for o in parse_manifests(text) if isinstance(o, RayCluster)]
    pods = [o for o in objects if o["kind"] == "Pod"]
    heads = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    workers = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert len(heads) == len(clusters)
    assert len(workers) == sum(_expected_workers(c) for c in clusters)
    services = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    for cluster in clusters:
        custom = ((cluster.spec.head_group_spec.head_service or {}).get("metadata") or {}).get("name")
        assert (custom or f"{cluster.metadata.name}-head-svc") in services
    for pod in pods:  # owned by their RayCluster, so deleting it cascades
        refs = pod["metadata"]["ownerReferences"]
        assert refs[0]["kind"] == "RayCluster" and refs[0]["controller"] is True
    assert render(text, settings=ALL_GATES) == render(text, settings=ALL_GATES)  # stable names


def test_autoscaler_sample_renders_rbac() -> None:
    objects, _ = render((SAMPLES / "ray-cluster.autoscaler.yaml").read_text())
    kinds = {o["kind"] for o in objects}
    assert {"ServiceAccount", "Role", "RoleBinding"} <= kinds
    head = next(o for o in objects if o["kind"] == "Pod"
                and o["metadata"]["labels"]["ray.io/node-type"] == "head")
    assert [c["name"] for c in head["spec"]["containers"]][1] == "autoscaler"


def test_cli_prints_yaml_and_fails_on_invalid(tmp_path: Path) -> None:
    ok = subprocess.run([sys.executable, "-m", "raybus.cli", "render",
                         str(SAMPLES / "ray-cluster.sample.yaml")], capture_output=True, text=True, check=False)
    assert ok.returncode == 0
    docs = list(yaml.safe_load_all(ok.stdout))
    assert [d["kind"] for d in docs].count("Pod") == 2 and docs[0]["apiVersion"]
    bad = yaml.safe_load((SAMPLES / "ray-cluster.sample.yaml").read_text())
    bad["spec"]["workerGroupSpecs"].append(dict(bad["spec"]["workerGroupSpecs"][0]))  # duplicate name
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    res = subprocess.run([sys.executable, "-m", "raybus.cli", "render", str(path)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 1 and "invalid:" in res.stderr and "workergroup" in res.stderr
