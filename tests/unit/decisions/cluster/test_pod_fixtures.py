"""Shared fixtures (no tests here): KubeRay pod_test.go's ``instance`` as a manifest, plus lookups."""

from __future__ import annotations

import copy
from typing import Any

from raybus.api.raycluster import RayCluster, WorkerGroupSpec
from raybus.decisions.cluster.pod_template import build_head_pod, build_worker_pod
from raybus.decisions.cluster.settings import OperatorSettings

FQDN = "raycluster-sample-head-svc.default.svc.cluster.local"

INSTANCE: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "raycluster-sample", "namespace": "default", "uid": "uid-1"},
    "spec": {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {
                "metadata": {"namespace": "default"},
                "spec": {
                    "containers": [
                        {
                            "name": "ray-head",
                            "image": "repo/image:custom",
                            "env": [{"name": "TEST_ENV_NAME", "value": "TEST_ENV_VALUE"}],
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi"},
                                "limits": {"cpu": "1", "memory": "1Gi"},
                            },
                        }
                    ]
                },
            },
        },
        "workerGroupSpecs": [
            {
                "replicas": 3,
                "minReplicas": 0,
                "maxReplicas": 10000,
                "groupName": "small-group",
                "rayStartParams": {"port": "6379"},
                "template": {
                    "metadata": {"namespace": "default"},
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-worker",
                                "image": "repo/image:custom",
                                "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "3"}},
                                "env": [{"name": "TEST_ENV_NAME", "value": "TEST_ENV_VALUE"}],
                            }
                        ]
                    },
                },
            }
        ],
    },
}


def cluster(**spec_updates: Any) -> RayCluster:
    """A copy of INSTANCE with top-level spec fields replaced."""
    data = copy.deepcopy(INSTANCE)
    data["spec"].update(spec_updates)
    return RayCluster.from_dict(data)


def first_group(rc: RayCluster) -> WorkerGroupSpec:
    assert rc.spec.worker_group_specs
    return rc.spec.worker_group_specs[0]


def head(rc: RayCluster, settings: OperatorSettings | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = build_head_pod(
        rc, settings=settings or OperatorSettings(), name="raycluster-sample-head-abcde"
    )
    return pod


def worker(rc: RayCluster, settings: OperatorSettings | None = None, **kwargs: Any) -> dict[str, Any]:
    assert rc.spec.worker_group_specs
    pod: dict[str, Any] = build_worker_pod(
        rc,
        rc.spec.worker_group_specs[0],
        settings=settings or OperatorSettings(),
        name="raycluster-sample-small-group-worker-abcde",
        **kwargs,
    )
    return pod


def ray_container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def env(container: dict[str, Any], name: str) -> dict[str, Any] | None:
    for item in container.get("env") or []:
        if item["name"] == name:
            found: dict[str, Any] = item
            return found
    return None


def env_value(container: dict[str, Any], name: str) -> str | None:
    """Value, or the fieldRef path for downward-API env vars (checkContainerEnv in pod_test.go)."""
    item = env(container, name)
    if item is None:
        return None
    if "value" in item:
        return str(item["value"])
    return str(item["valueFrom"]["fieldRef"]["fieldPath"])


def split_and_sort(command: str) -> list[str]:
    """splitAndSort in pod_test.go: compare commands ignoring flag order and spacing."""
    return sorted(part for part in command.split(" ") if part)
