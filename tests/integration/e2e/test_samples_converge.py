"""Every RayCluster in ../shared/kuberay-samples converges on the local stack (issue 4) with the
objects KubeRay creates for it (issue 13): every object `raybus render` predicts for the sample
(auth Secret, NetworkPolicies, Services, RBAC, ...) exists and is controlled by the cluster, GCS FT
clusters carry the Redis cleanup finalizer, history server clusters run the collector sidecar, and
no PodGroup exists without a --batch-scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from raybus.adapters.kube import KubeError, UnknownResource, resource_for
from raybus.api.defaults import with_defaults
from raybus.api.load import parse_manifests
from raybus.api.raycluster import RayCluster
from raybus.api.settings import FeatureGates
from raybus.cli.render import render
from raybus.decisions.cluster.redis_cleanup import GCS_FT_REDIS_CLEANUP_FINALIZER, redis_cleanup_applies
from raybus.decisions.cluster.settings import OperatorSettings
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import RC, Kube
from tests.unit.cli.test_render import ALL_GATES

PODGROUPS = [resource_for("scheduling.volcano.sh/v1beta1", "PodGroup"),
             resource_for("scheduling.x-k8s.io/v1alpha1", "PodGroup")]

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
        created = await kube.c.create(RC, body, namespace="default")
        expected = sum(1 for o in objects if o["kind"] == "Pod"
                       and o["metadata"]["labels"]["ray.io/cluster"] == cluster.metadata.name) - 1
        rc = await kube.wait_ready(name, workers=expected, timeout=60)
        await _extra_objects(kube, body, uid=created["metadata"]["uid"], rc=rc)


async def _extra_objects(kube: Kube, body: dict, *, uid: str, rc: dict) -> None:
    """What KubeRay creates besides Pods, as the stack's operator settings render it."""
    settings = OperatorSettings(feature_gates=FeatureGates.from_flag(
        kube.stack.extra_env.get("RAYBUS_FEATURE_GATES", "")))
    objects, problems = render(yaml.safe_dump(body), settings=settings)
    assert problems == []
    for obj in objects:
        if obj["kind"] == "Pod":
            continue
        meta = obj["metadata"]
        live = await kube.c.get(resource_for(obj["apiVersion"], obj["kind"]), namespace="default",
                                name=meta["name"])
        refs = live["metadata"].get("ownerReferences") or []
        assert any(r.get("uid") == uid for r in refs), f"{obj['kind']}/{meta['name']} not owned by the cluster"
        if obj["kind"] == "Secret":  # the token is there, generated at create time
            assert live.get("data", {}).get("auth_token")
    cluster = RayCluster.model_validate(body)
    finalizers = rc["metadata"].get("finalizers") or []
    assert (GCS_FT_REDIS_CLEANUP_FINALIZER in finalizers) == redis_cleanup_applies(with_defaults(cluster), settings)
    if cluster.spec.history_server_options is not None:
        head = (await kube.pods(body["metadata"]["name"], node_type="head"))[0]
        assert "collector" in [c["name"] for c in head["spec"]["containers"]]
    for res in PODGROUPS:  # no --batch-scheduler: no PodGroup (the CRDs may not even exist)
        try:
            items, _ = await kube.c.list_all(res, namespace="default")
        except KubeError:
            continue
        assert not [i for i in items if any(r.get("uid") == uid for r in i["metadata"].get("ownerReferences") or [])]
