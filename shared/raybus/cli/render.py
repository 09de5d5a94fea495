"""`raybus render FILE`: every object raybus would create for the RayClusters in FILE, as YAML.

No server: it runs the same pure `reconcile_cluster` the cluster-reconciler runs, on an empty
cluster, with a fixed clock and fixed entropy so pod names are stable placeholders between runs
(a real cluster gets random 5-character suffixes, as with KubeRay). A manifest that only has
`metadata.generateName` (e.g. KubeRay's pytorch RayJob samples) is previewed under the name the
API server would give it: the prefix plus a fixed placeholder suffix.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from raybus.api.load import RayAny, parse_manifests
from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService
from raybus.api.settings import FeatureGates
from raybus.cli import manifests
from raybus.decisions.cluster.naming import random_suffix
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject, PatchObject, RecordEvent

FIXED_NOW = datetime(2000, 1, 1, tzinfo=UTC)
ENTROPY = "raybus-render"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("render", help="print the objects raybus would create for a manifest",
                       description="Print, as YAML, every object raybus would create for the "
                       "RayClusters (and the clusters of RayJobs and RayServices) in FILE; no server "
                       "is needed. The manifest is checked first as `kubectl apply` would check it: "
                       "YAML errors, unknown fields and wrong types are reported one per line, "
                       "with exit code 1.")
    p.add_argument("file", type=Path, metavar="FILE",
                   help="YAML with RayCluster (or RayJob/RayService) documents")
    p.add_argument("--namespace", default="default", help="namespace for objects that have none")
    p.add_argument("--feature-gates", default="",
                   help="KubeRay --feature-gates syntax, e.g. RayClusterMTLS=true")
    p.set_defaults(func=run)


def _name(obj: RayCluster | RayJob | RayService) -> str:
    """metadata.name, or the API server's generateName + 5 characters (a stable placeholder here)."""
    if obj.metadata.name:
        return obj.metadata.name
    prefix = obj.metadata.generate_name or ""
    return f"{prefix}{random_suffix(ENTROPY, 'generateName/' + prefix)}" if prefix else ""


def _named(obj: Any) -> Any:
    name = _name(obj)
    if name == obj.metadata.name:
        return obj
    return obj.model_copy(update={"metadata": obj.metadata.model_copy(update={"name": name})})


def _clusters(objects: list[RayAny], namespace: str) -> list[RayCluster]:
    out: list[RayCluster] = []
    for obj in map(_named, objects):
        if isinstance(obj, RayCluster):
            cluster = obj
        elif isinstance(obj, RayJob | RayService):
            # The RayCluster a RayJob/RayService would own, named <name>-<5 chars> as KubeRay's
            # GenerateRayClusterName does (a fixed placeholder suffix here).
            spec = obj.spec.ray_cluster_spec
            if spec is None:
                continue
            cluster = RayCluster.model_validate({
                "apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": f"{obj.metadata.name}-{random_suffix(ENTROPY, obj.metadata.name or '')}",
                             "namespace": obj.metadata.namespace},
                "spec": spec.to_dict()})
        else:
            continue
        if not cluster.metadata.namespace:
            cluster = cluster.model_copy(update={"metadata": cluster.metadata.model_copy(
                update={"namespace": namespace})})
        out.append(cluster)
    return out


def render(text: str, *, namespace: str = "default",
           settings: OperatorSettings | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """(objects to create, problems) for the Ray objects of a YAML string."""
    return render_objects(parse_manifests(text), namespace=namespace, settings=settings)


def render_objects(ray_objects: list[RayAny], *, namespace: str = "default",
                   settings: OperatorSettings | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """(objects to create, problems). Repeats reconcile rounds on the growing set of created
    objects until nothing more would be created, so pods that KubeRay creates only after the head
    exists are included too."""
    settings = settings or OperatorSettings()
    objects: list[dict[str, Any]] = []
    problems: list[str] = []
    for cluster in _clusters(ray_objects, namespace):
        created: list[dict[str, Any]] = []
        for round_no in range(6):
            def of(kind: str, created: list[dict[str, Any]] = created) -> list[dict[str, Any]]:
                return [o for o in created if o.get("kind") == kind]

            snapshot = ClusterSnapshot(cluster=cluster, pods=of("Pod"), services=of("Service"),
                                       ingresses=of("Ingress"), service_accounts=of("ServiceAccount"),
                                       roles=of("Role"), role_bindings=of("RoleBinding"),
                                       secrets=of("Secret"), jobs=of("Job"),
                                       network_policies=of("NetworkPolicy"), pod_groups=of("PodGroup"))
            decision = reconcile_cluster(snapshot, settings=settings, now=FIXED_NOW,
                                         entropy=f"{ENTROPY}-{round_no}")
            problems += [c.message for c in decision.commands
                         if isinstance(c, RecordEvent) and c.type == "Warning"]
            new = [c.object for c in decision.commands if isinstance(c, CreateObject)]
            # The GCS FT finalizer comes first (a patch of the RayCluster): apply it and go on.
            finalizers = [c.merge_patch["metadata"]["finalizers"] for c in decision.commands
                          if isinstance(c, PatchObject) and c.target.kind == "RayCluster"
                          and "finalizers" in (c.merge_patch.get("metadata") or {})]
            if finalizers:
                cluster = cluster.model_copy(update={"metadata": cluster.metadata.model_copy(
                    update={"finalizers": finalizers[-1]})})
            if not new and not finalizers:
                break
            created += new
        objects += created
    return objects, problems


def _ordered(obj: dict[str, Any]) -> dict[str, Any]:
    first: tuple[str, ...] = ("apiVersion", "kind", "metadata", "spec")
    head: dict[str, Any] = {k: obj[k] for k in first if k in obj}
    return {**head, **{k: v for k, v in obj.items() if k not in head}}


def run(args: argparse.Namespace) -> int:
    try:
        settings = OperatorSettings(feature_gates=FeatureGates.from_flag(args.feature_gates))
    except ValueError as exc:
        print(f"raybus render: --feature-gates: {exc}", file=sys.stderr)
        return 1
    try:
        ray_objects = manifests.load(args.file)
    except manifests.ManifestError as exc:
        for line in exc.lines:
            print(f"raybus render: {line}", file=sys.stderr)
        return 1
    if not ray_objects:
        print(f"raybus render: {args.file}: no RayCluster, RayJob or RayService in it", file=sys.stderr)
        return 1
    objects, problems = render_objects(ray_objects, namespace=args.namespace, settings=settings)
    objects = [_ordered(o) for o in objects]
    for problem in problems:
        print(f"invalid: {problem}", file=sys.stderr)
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)
    return 1 if problems else 0
