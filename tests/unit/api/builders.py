"""Minimal valid manifests for table-driven validation tests; each case mutates a fresh copy."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Doc = dict[str, Any]
# Mutations edit the document in place; any return value is ignored (lets lambdas chain updates).
Mutation = Callable[[Doc], object]


def pod_template(name: str = "ray", **spec: Any) -> Doc:
    return {"spec": {"containers": [{"name": name, "image": "rayproject/ray:2.52.0"}], **spec}}


def cluster_spec() -> Doc:
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": {}, "template": pod_template("ray-head")},
        "workerGroupSpecs": [
            {
                "groupName": "small",
                "replicas": 1,
                "minReplicas": 1,
                "maxReplicas": 5,
                "rayStartParams": {},
                "template": pod_template("ray-worker"),
            }
        ],
    }


def raycluster() -> Doc:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "demo"}, "spec": cluster_spec()}


def rayjob() -> Doc:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "job"},
        "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": cluster_spec()},
    }


def rayservice() -> Doc:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "svc"},
        "spec": {"serveConfigV2": "applications: []\n", "rayClusterConfig": cluster_spec()},
    }


def mutated(base: Doc, mutation: Mutation) -> Doc:
    doc = copy.deepcopy(base)
    mutation(doc)
    return doc


def head_container(spec: Doc) -> Doc:
    container: Doc = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    return container


def worker(spec: Doc, index: int = 0) -> Doc:
    group: Doc = spec["workerGroupSpecs"][index]
    return group
