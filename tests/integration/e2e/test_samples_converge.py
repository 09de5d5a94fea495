"""Every RayCluster in ../shared/kuberay-samples converges on the local stack (issue 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from raybus.adapters.kube import KubeError, UnknownResource, resource_for
from raybus.api.load import parse_manifests
from raybus.api.raycluster import RayCluster
from raybus.cli.render import render
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import RC, Kube
from tests.unit.cli.test_render import ALL_GATES

CLUSTER_SAMPLES = sorted(p for p in SAMPLES.glob("*.yaml")
                         if any(isinstance(o, RayCluster) for o in parse_manifests(p.read_text())))


async def _prerequisites(kube: Kube, path: Path, clusters: list[RayCluster]) -> None:
    """What a user applies with the sample: the file's other objects (ServiceAccounts, RBAC,
    Secrets, ...) and any ServiceAccount the pod templates name (e.g. GKE's pre-created KSA): the
    API server refuses pods whose ServiceAccount does not exist, as a real one does."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    accounts = {tpl.get("spec", {}).get("serviceAccountName")
                for c in clusters for tpl in [c.spec.head_group_spec.template,
                                              *[g.template for g in c.spec.worker_group_specs or []]]}
    docs += [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
             for name in accounts if name]
    for doc in docs:
        if doc.get("apiVersion", "").startswith("ray.io/"):
            continue
        try:
            res = resource_for(doc["apiVersion"], doc["kind"])
        except UnknownResource:
            continue  # kinds raybus never touches (e.g. NetworkPolicy): not needed to converge
        doc.setdefault("metadata", {})["namespace"] = "default"
        try:
            await kube.c.create(res, doc, namespace="default" if res.namespaced else None)
        except KubeError as exc:
            if not exc.already_exists:
                raise


@pytest.mark.parametrize("path", CLUSTER_SAMPLES, ids=lambda p: p.name)
async def test_sample_cluster_converges(kube: Kube, path: Path) -> None:
    clusters = [o for o in parse_manifests(path.read_text()) if isinstance(o, RayCluster)]
    objects, problems = render(path.read_text(), settings=ALL_GATES)
    assert problems == []
    await _prerequisites(kube, path, clusters)
    for cluster in clusters:
        # Each sample gets its own name so samples sharing a name don't collide.
        name = f"s-{path.stem.replace('.', '-').replace('_', '-')}"[:40].rstrip("-")
        body = cluster.to_manifest()
        body["metadata"] = {**body["metadata"], "name": name, "namespace": "default"}
        body["metadata"].pop("generateName", None)
        await kube.c.create(RC, body, namespace="default")
        expected = sum(1 for o in objects if o["kind"] == "Pod"
                       and o["metadata"]["labels"]["ray.io/cluster"] == cluster.metadata.name) - 1
        await kube.wait_ready(name, workers=expected, timeout=60)
