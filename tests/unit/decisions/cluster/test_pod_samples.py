"""Every KubeRay sample (RayClusters, and the clusters RayJobs/RayServices embed) builds a head Pod,
a Pod for every worker group, and its Services / Ingress / RBAC, with the invariants that must hold
for any Pod we create."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raybus.api.load import parse_manifests
from raybus.api.meta import ObjectMeta
from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService
from raybus.decisions.cluster.k8s_services import (
    build_head_ingress,
    build_head_service,
    build_headless_worker_service,
    build_serve_service,
    is_serve_service_enabled,
    needs_headless_worker_service,
    service_ports,
)
from raybus.decisions.cluster.pod_template import build_head_pod, build_worker_pod
from raybus.decisions.cluster.rbac import build_autoscaler_rbac
from raybus.decisions.cluster.settings import OperatorSettings

SAMPLES = Path(__file__).resolve().parents[4].parent / "shared" / "kuberay-samples"


def _clusters() -> list[tuple[str, RayCluster]]:
    out: list[tuple[str, RayCluster]] = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for obj in parse_manifests(path.read_text()):
            name = f"{path.stem}/{obj.kind}/{obj.name}"
            if isinstance(obj, RayCluster):
                out.append((name, obj))
            elif isinstance(obj, RayJob) and obj.spec.ray_cluster_spec is not None:
                meta = ObjectMeta(name=f"{obj.name}-abcde", labels={"ray.io/originated-from-crd": "RayJob"})
                out.append((name, RayCluster(metadata=meta, spec=obj.spec.ray_cluster_spec)))
            elif isinstance(obj, RayService):
                meta = ObjectMeta(
                    name=f"{obj.name}-abcde", labels={"ray.io/originated-from-crd": "RayService"}
                )
                out.append((name, RayCluster(metadata=meta, spec=obj.spec.ray_cluster_config)))
    for _, rc in out:
        rc.metadata.namespace = rc.metadata.namespace or "default"
        rc.metadata.uid = "uid-sample"
    return out


CLUSTERS = _clusters()


def test_samples_found() -> None:
    assert len(CLUSTERS) >= 60


def _check_pod(pod: dict[str, Any], rc: RayCluster, node_type: str) -> None:
    meta = pod["metadata"]
    assert meta["namespace"] == rc.namespace
    assert meta["labels"]["ray.io/cluster"] == rc.name
    assert meta["labels"]["ray.io/node-type"] == node_type
    refs = meta["ownerReferences"]
    assert [r for r in refs if r.get("controller")] == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "name": rc.name,
            "uid": "uid-sample",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    containers = pod["spec"]["containers"]
    ray = containers[0]
    assert [c for c in containers if c.get("name") == "autoscaler"] == (
        [containers[1]] if node_type == "head" and rc.spec.enable_in_tree_autoscaling else []
    )
    names = [e["name"] for e in ray["env"]]
    assert names.count("KUBERAY_GEN_RAY_START_CMD") == 1
    gen = next(e["value"] for e in ray["env"] if e["name"] == "KUBERAY_GEN_RAY_START_CMD")
    assert gen.startswith("ray start --head " if node_type == "head" else "ray start ")
    assert " --block " in gen
    overwrite = (meta.get("annotations") or {}).get("ray.io/overwrite-container-cmd", "").lower() == "true"
    if not overwrite and ray.get("command", [None])[:1] == ["/bin/bash"] and len(ray["args"]) == 1:
        assert ray["args"][0].endswith(gen) or "ray start" in ray["args"][0]
    assert {p.get("name") for p in ray.get("ports", [])} >= {"metrics"}


@pytest.mark.parametrize(("name", "rc"), CLUSTERS, ids=[name for name, _ in CLUSTERS])
def test_sample_builds(name: str, rc: RayCluster) -> None:
    settings = OperatorSettings()
    _check_pod(build_head_pod(rc, settings=settings, name=f"{rc.name}-head-abcde"), rc, "head")
    for index, group in enumerate(rc.spec.worker_group_specs or []):
        pod = build_worker_pod(
            rc,
            group,
            settings=settings,
            name=f"{rc.name}-{group.group_name}-worker-abcde",
            replica_group_name=f"{group.group_name}-xyz",
            replica_index=index,
            host_index=0,
        )
        _check_pod(pod, rc, "worker")
        assert pod["spec"]["initContainers"][-1]["name"] == "wait-gcs-ready"
    service = build_head_service(rc, settings=settings)
    assert service["metadata"]["name"]
    assert {p["name"] for p in service["spec"]["ports"]} >= {"metrics"}
    if is_serve_service_enabled(rc) and "serve" in service_ports(rc):
        assert build_serve_service(rc)["spec"]["ports"][0]["name"] == "serve"
    if needs_headless_worker_service(rc):
        assert build_headless_worker_service(rc)["spec"]["clusterIP"] == "None"
    if rc.spec.head_group_spec.enable_ingress:
        assert build_head_ingress(rc)["kind"] == "Ingress"
    rbac = build_autoscaler_rbac(rc)
    assert bool(rbac) == bool(rc.spec.enable_in_tree_autoscaling)
