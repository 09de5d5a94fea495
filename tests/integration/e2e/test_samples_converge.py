"""Every RayCluster in ../shared/kuberay-samples converges on the local stack (issue 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raybus.api.load import parse_manifests
from raybus.api.raycluster import RayCluster
from raybus.cli.render import render
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import RC, Kube
from tests.unit.cli.test_render import ALL_GATES

CLUSTER_SAMPLES = sorted(p for p in SAMPLES.glob("*.yaml")
                         if any(isinstance(o, RayCluster) for o in parse_manifests(p.read_text())))


@pytest.mark.parametrize("path", CLUSTER_SAMPLES, ids=lambda p: p.name)
async def test_sample_cluster_converges(kube: Kube, path: Path) -> None:
    clusters = [o for o in parse_manifests(path.read_text()) if isinstance(o, RayCluster)]
    objects, problems = render(path.read_text(), settings=ALL_GATES)
    assert problems == []
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
