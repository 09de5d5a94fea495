"""Replica and resource arithmetic: mirrors utils/util_test.go (TestGetWorkerGroupDesiredReplicas,
TestCalculateDesiredReplicas, TestCalculateDesiredResources...) and resource.Quantity printing."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.api import with_defaults
from raybus.api.raycluster import MAX_INT32, RayCluster, WorkerGroupSpec
from raybus.decisions.cluster.quantity import format_quantity, parse_quantity, sum_quantities
from raybus.decisions.cluster.replicas import (
    calculate_available_replicas,
    calculate_desired_replicas,
    calculate_desired_resources,
    calculate_max_replicas,
    calculate_min_replicas,
    calculate_ready_replicas,
    sum_gpus,
    worker_group_desired_pods,
)


def group(**kw: Any) -> WorkerGroupSpec:
    return WorkerGroupSpec(group_name=kw.pop("group_name", "g"), **kw)


@pytest.mark.parametrize(
    ("replicas", "lo", "hi", "hosts", "suspend", "expected"),
    [
        (3, 1, 10, 1, None, 3),  # normal
        (0, 2, 10, 1, None, 2),  # below min
        (15, 1, 10, 1, None, 10),  # above max
        (3, 1, 10, 4, None, 12),  # multi-host
        (3, 1, 10, 1, True, 0),  # suspended group
        (None, 2, 10, 1, None, 2),  # nil replicas -> min
        (5, 6, 4, 1, None, 4),  # min > max -> max
        (None, None, None, None, None, 0),  # all CRD defaults
        (7, None, None, 0, None, 7),  # numOfHosts 0 means 1
    ],
)
def test_worker_group_desired_pods(
    replicas: int | None,
    lo: int | None,
    hi: int | None,
    hosts: int | None,
    suspend: bool | None,
    expected: int,
) -> None:
    g = group(replicas=replicas, min_replicas=lo, max_replicas=hi, num_of_hosts=hosts, suspend=suspend)
    assert worker_group_desired_pods(g) == expected


def cluster(groups: list[WorkerGroupSpec], head_resources: dict[str, Any] | None = None) -> RayCluster:
    head = {"spec": {"containers": [{"name": "ray-head", "resources": head_resources or {}}]}}
    return with_defaults(
        RayCluster.model_validate(
            {
                "metadata": {"name": "c", "namespace": "ns"},
                "spec": {
                    "headGroupSpec": {"template": head},
                    "workerGroupSpecs": [g.to_dict() for g in groups],
                },
            }
        )
    )


def test_cluster_level_replicas() -> None:
    c = cluster(
        [
            group(group_name="a", replicas=2, min_replicas=1, max_replicas=5, num_of_hosts=2),
            group(group_name="b", replicas=9, min_replicas=0, max_replicas=3),
            group(group_name="s", replicas=4, min_replicas=2, max_replicas=8, suspend=True),
        ]
    )
    assert calculate_desired_replicas(c) == 2 * 2 + 3
    assert calculate_min_replicas(c) == 1 * 2 + 0  # suspended group skipped
    assert calculate_max_replicas(c) == 5 * 2 + 3


def test_max_replicas_saturates_at_int32() -> None:
    c = cluster([group(group_name="a"), group(group_name="b")])
    assert calculate_max_replicas(c) == MAX_INT32


def pod(node_type: str, phase: str, ready: str | None) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {
        "metadata": {"name": f"p-{node_type}-{phase}-{ready}", "labels": {"ray.io/node-type": node_type}},
        "status": {"phase": phase, "conditions": conditions},
    }


def test_ready_and_available_count_only_workers() -> None:
    pods = [
        pod("head", "Running", "True"),
        pod("worker", "Running", "True"),
        pod("worker", "Running", "False"),
        pod("worker", "Pending", None),
    ]
    assert calculate_ready_replicas(pods) == 1
    assert calculate_available_replicas(pods) == 2


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("1", "1"),
        ("500m", "500m"),
        ("1.5", "1500m"),
        ("2000", "2k"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("512", "512"),
        ("0.1", "100m"),
        (2, "2"),
        (0.25, "250m"),
        ("1e3", "1e3"),
        ("0", "0"),
        ("1n", "1n"),
    ],
)
def test_quantity_canonical_strings(raw: str | float, canonical: str) -> None:
    assert format_quantity(parse_quantity(raw)) == canonical


def test_quantity_sums_keep_first_nonzero_format() -> None:
    assert format_quantity(sum_quantities([parse_quantity("1Gi"), parse_quantity("512Mi")])) == "1536Mi"
    assert format_quantity(sum_quantities([parse_quantity("500m"), parse_quantity("1")])) == "1500m"
    assert format_quantity(sum_quantities([parse_quantity("1"), parse_quantity("1Gi")])) == "1073741825"


def test_desired_resources_like_kuberay() -> None:
    worker_template = {
        "spec": {
            "containers": [
                {
                    "name": "w",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}},
                },
                {"name": "side", "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}}},
            ]
        }
    }
    c = cluster(
        [
            group(
                group_name="gpu",
                replicas=3,
                min_replicas=0,
                max_replicas=2,
                num_of_hosts=2,
                template=worker_template,
            ),
            group(group_name="sus", replicas=5, suspend=True, template=worker_template),
        ],
        head_resources={"requests": {"cpu": "2", "memory": "4Gi", "google.com/tpu": "4"}},
    )
    totals = calculate_desired_resources(c)
    # raw replicas (3, not clamped to 2) * 2 hosts = 6 worker Pods of 1.5 CPU / 1.5Gi / 1 GPU.
    assert format_quantity(totals["cpu"]) == "11"
    assert format_quantity(totals["memory"]) == "13Gi"
    assert format_quantity(sum_gpus(totals)) == "6"
    assert format_quantity(totals["google.com/tpu"]) == "4"


@given(st.lists(st.integers(min_value=0, max_value=10**6), max_size=8))
def test_millicpu_sum_matches_integer_sum(values: list[int]) -> None:
    total = sum_quantities([parse_quantity(f"{v}m") for v in values])
    assert parse_quantity(format_quantity(total)).value == Decimal(sum(values)) / 1000
