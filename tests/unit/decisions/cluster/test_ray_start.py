"""`ray start` generation, mirroring KubeRay pod_test.go (TestGenerateRayStartCommand & co.)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.decisions.cluster.ray_start import (
    add_well_known_accelerator_resources,
    container_command,
    convert_cmd_to_string,
    convert_param_map,
    generate_ray_start_command,
    get_head_port,
    go_json_float,
    is_gpu_resource_key,
    quantity_value,
    set_missing_ray_start_params,
    ulimit_command,
    update_ray_start_params_labels,
    update_ray_start_params_resources,
)

# TestGenerateRayStartCommand
GENERATE_CASES: list[tuple[str, str, dict[str, str], dict[str, Any], str]] = [
    ("worker with GPU", "worker", {}, {"limits": {"nvidia.com/gpu": "1"}}, "ray start  --num-gpus=1 "),
    (
        "worker with TPU",
        "worker",
        {},
        {"limits": {"google.com/tpu": "4"}},
        "ray start  --resources='{\"TPU\":4}' ",
    ),
    (
        "head with Neuron cores",
        "head",
        {},
        {"limits": {"aws.amazon.com/neuroncore": "4"}},
        "ray start --head  --resources='{\"neuron_cores\":4}' ",
    ),
    (
        "head with multiple accelerators",
        "head",
        {},
        {"limits": {"aws.amazon.com/neuroncore": "4", "nvidia.com/gpu": "1"}},
        "ray start --head  --num-gpus=1  --resources='{\"neuron_cores\":4}' ",
    ),
    (
        "head with multiple custom accelerators: first in sorted order only",
        "head",
        {},
        {"limits": {"google.com/tpu": "8", "aws.amazon.com/neuroncore": "4", "nvidia.com/gpu": "1"}},
        "ray start --head  --num-gpus=1  --resources='{\"neuron_cores\":4}' ",
    ),
    (
        "head with existing resources",
        "head",
        {"resources": '"{"custom_resource":2}"'},
        {"limits": {"aws.amazon.com/neuroncore": "4"}},
        'ray start --head  --resources=\'{"custom_resource":2,"neuron_cores":4}\' ',
    ),
    (
        "head with existing neuron_cores resources",
        "head",
        {"resources": '\'{"custom_resource":2,"neuron_cores":3}\''},
        {"limits": {"aws.amazon.com/neuroncore": "4"}},
        'ray start --head  --resources=\'{"custom_resource":2,"neuron_cores":3}\' ',
    ),
    (
        "head with existing TPU resources",
        "head",
        {"resources": '\'{"custom_resource":2,"TPU":4}\''},
        {"limits": {"google.com/tpu": "8"}},
        'ray start --head  --resources=\'{"custom_resource":2,"TPU":4}\' ',
    ),
    (
        "head with invalid resources string",
        "head",
        {"resources": "{"},
        {"limits": {"aws.amazon.com/neuroncore": "4"}},
        "ray start --head  --resources={ ",
    ),
    ("invalid node type", "InvalidType", {}, {}, ""),
    (
        "cpu from limits, rounded up; memory from limits",
        "worker",
        {},
        {"limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": "4"}},
        "ray start  --memory=1073741824  --num-cpus=2 ",
    ),
    (
        "cpu falls back to requests; memory request ignored",
        "worker",
        {},
        {"requests": {"cpu": "2", "memory": "1Gi"}},
        "ray start  --num-cpus=2 ",
    ),
    (
        "user num-cpus/memory/num-gpus win",
        "worker",
        {"num-cpus": "0", "memory": "5", "num-gpus": "0"},
        {"limits": {"cpu": "8", "memory": "1Gi", "nvidia.com/gpu": "2"}},
        "ray start  --memory=5  --num-cpus=0  --num-gpus=0 ",
    ),
    (
        "zero GPU limit adds nothing",
        "worker",
        {},
        {"limits": {"nvidia.com/gpu": "0"}},
        "ray start ",
    ),
    (
        "MIG profile counts as GPU",
        "worker",
        {},
        {"limits": {"nvidia.com/mig-1g.5gb": 2}},
        "ray start  --num-gpus=2 ",
    ),
]


@pytest.mark.parametrize(
    ("node_type", "params", "resources", "expected"),
    [case[1:] for case in GENERATE_CASES],
    ids=[case[0] for case in GENERATE_CASES],
)
def test_generate_ray_start_command(
    node_type: str, params: dict[str, str], resources: dict[str, Any], expected: str
) -> None:
    assert generate_ray_start_command(node_type, dict(params), resources=resources) == expected


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ""),
        ({"block": "true"}, " --block "),
        ({"block": "false"}, ""),
        ({"block": "True"}, " --block "),
        ({"log-color": "true"}, " --log-color=true "),
        ({"include-dashboard": "false"}, " --include-dashboard=false "),
        ({"include-log-monitor": "false"}, " --include-log-monitor=false "),
        ({"num-cpus": "1", "address": "h:6379"}, " --address=h:6379  --num-cpus=1 "),
    ],
)
def test_convert_param_map(params: dict[str, str], expected: str) -> None:
    assert convert_param_map(params) == expected


def test_get_head_port() -> None:  # TestGetHeadPort
    assert get_head_port({}) == "6379"
    assert get_head_port({"port": "9999"}) == "9999"


@pytest.mark.parametrize(
    ("node_type", "params", "expected"),
    [
        (
            "head",
            {},
            {
                "dashboard-host": "0.0.0.0",
                "metrics-export-port": "8080",
                "block": "true",
                "dashboard-agent-listen-port": "52365",
            },
        ),
        (
            "head",
            {"dashboard-host": "localhost", "metrics-export-port": "9000", "block": "false"},
            {
                "dashboard-host": "localhost",
                "metrics-export-port": "9000",
                "block": "true",
                "dashboard-agent-listen-port": "52365",
            },
        ),
        (
            "worker",
            {},
            {
                "address": "svc.ns.svc.cluster.local:6379",
                "metrics-export-port": "8080",
                "block": "true",
                "dashboard-agent-listen-port": "52365",
            },
        ),
        (
            "worker",
            {"address": "custom:1234", "dashboard-agent-listen-port": "1"},
            {
                "address": "custom:1234",
                "metrics-export-port": "8080",
                "block": "true",
                "dashboard-agent-listen-port": "1",
            },
        ),
    ],
)
def test_set_missing_ray_start_params(
    node_type: str, params: dict[str, str], expected: dict[str, str]
) -> None:
    out = set_missing_ray_start_params(
        dict(params), node_type=node_type, head_port="6379", fqdn_ray_ip="svc.ns.svc.cluster.local"
    )
    assert out == expected


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"CPU": "4"}, {"num-cpus": "4"}),
        ({"cpu": "500m"}, {"num-cpus": "1"}),
        ({"Memory": "1Gi"}, {"memory": "1073741824"}),
        ({"nvidia.com/gpu": "2"}, {"num-gpus": "2"}),
        ({"GPU": "3"}, {"num-gpus": "3"}),
        ({"TPU": "4", "custom": "0.5"}, {"resources": '\'{"TPU":4,"custom":0.5}\''}),
        ({"cpu": "not-a-quantity"}, {}),
    ],
)
def test_update_ray_start_params_resources(resources: dict[str, str], expected: dict[str, str]) -> None:
    params: dict[str, str] = {"resources": "'{\"old\":1}'"} if "resources" in expected else {}
    update_ray_start_params_resources(params, resources)
    assert params == expected  # custom resources replace any previous --resources JSON


def test_update_ray_start_params_labels_sorted() -> None:
    params: dict[str, str] = {}
    update_ray_start_params_labels(params, {"zone": "a", "accel": "tpu"})
    assert params == {"labels": "accel=tpu,zone=a"}
    update_ray_start_params_labels(params, None)
    assert params == {"labels": "accel=tpu,zone=a"}


def test_accelerators_skip_when_no_limits() -> None:
    params = {"resources": "{"}
    assert add_well_known_accelerator_resources(params, {})
    assert params == {"resources": "{"}
    assert not add_well_known_accelerator_resources(params, {"nvidia.com/gpu": "1"})
    assert params == {"resources": "{"}  # invalid JSON: KubeRay logs and adds nothing, not even GPUs


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("gpu", True),
        ("nvidia.com/mig-1g.5gb", True),
        ("nvidia.com/mig-3g.20gb", True),
        ("google.com/tpu", False),
        ("nvidia.com/mig-1g", False),
        ("cpu", False),
    ],
)
def test_is_gpu_resource_key(key: str, expected: bool) -> None:
    assert is_gpu_resource_key(key) is expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", 1), ("500m", 1), ("1Gi", 1073741824), ("1G", 10**9), ("2.5", 3), (3, 3), (0.5, 1), ("1e3", 1000)],
)
def test_quantity_value_rounds_up(raw: object, expected: int) -> None:
    assert quantity_value(raw) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(4.0, "4"), (0.5, "0.5"), (1e-7, "1e-7"), (1e21, "1e+21"), (123456789.0, "123456789"), (0.0, "0")],
)
def test_go_json_float(value: float, expected: str) -> None:
    assert go_json_float(value) == expected


def test_container_command_and_ulimit() -> None:
    assert container_command(login_shell=False) == ["/bin/bash", "-c", "--"]
    assert container_command(login_shell=True) == ["/bin/bash", "-cl", "--"]
    assert ulimit_command() == "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}"
    assert convert_cmd_to_string(["echo", "hi"]) == " echo  hi "


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
_values = st.one_of(st.sampled_from(["true", "false", "TRUE", "False"]), st.text(min_size=0, max_size=8))


@given(st.dictionaries(_keys, _values, max_size=10))
def test_convert_param_map_is_sorted_and_deterministic(params: dict[str, str]) -> None:
    out = convert_param_map(params)
    assert out == convert_param_map(dict(reversed(list(params.items()))))
    flags = [part.split("=", 1)[0] for part in out.split() if part.startswith("--")]
    assert flags == sorted(flags)
    emitted = {flag[2:] for flag in flags}
    for key, value in params.items():
        is_switch = value.lower() in ("true", "false") and key not in ("log-color", "include-dashboard")
        if is_switch and key != "include-log-monitor":
            assert (key in emitted) == (value.lower() == "true")


@given(st.dictionaries(_keys, st.text(alphabet="0123456789", min_size=1, max_size=3), max_size=6))
def test_generate_is_idempotent_on_its_own_output(params: dict[str, str]) -> None:
    resources = {"limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1", "google.com/tpu": "4"}}
    first = dict(params)
    cmd1 = generate_ray_start_command("worker", first, resources=resources)
    second = dict(first)
    cmd2 = generate_ray_start_command("worker", second, resources=resources)
    assert cmd1 == cmd2
    assert first == second
