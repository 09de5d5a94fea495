"""k8s name/version/duration helpers, FeatureGates parsing, and every sample validating clean."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from raybus.api import parse_manifests
from raybus.api.k8s_names import (
    is_dns1035_label,
    is_dns1123_label,
    is_qualified_name,
    is_valid_label_value,
    parse_generic_version,
    parse_go_duration_seconds,
)
from raybus.api.settings import DEFAULT_FEATURE_GATES, FeatureGates
from raybus.api.validation import validate
from tests.conftest import SAMPLES

ALL_GATES = FeatureGates(**{name: True for name in FeatureGates.model_fields})
# Samples that exercise alpha features KubeRay v1.7 ships disabled.
GATED_SAMPLES = {
    "ray-cluster.historyserver.yaml": "RayClusterHistoryServer feature gate is not enabled",
    "ray-cluster.mtls.yaml": "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled",
    "ray-cluster.network-policy-deny-all.yaml":
        "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled",
}


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_sample_validates_clean(path: Path) -> None:
    objs = parse_manifests(path.read_text())
    for obj in objs:
        assert validate(obj, settings=ALL_GATES) == []
        expected = [GATED_SAMPLES[path.name]] if path.name in GATED_SAMPLES else []
        assert validate(obj) == expected


@pytest.mark.parametrize(
    ("name", "ok"),
    [("a", True), ("a-1", True), ("1a", False), ("a-", False), ("A", False), ("a" * 63, True), ("a" * 64, False),
     ("", False), ("a\n", False)],
)
def test_dns1035(name: str, ok: bool) -> None:
    assert (is_dns1035_label(name) == []) is ok


def test_dns1123_label_allows_leading_digit() -> None:
    assert is_dns1123_label("1abc") == [] and is_dns1035_label("1abc") != []
    assert is_dns1123_label("Abc") != []


@pytest.mark.parametrize(
    ("key", "ok"),
    [("app", True), ("ray.io/node-type", True), ("Example.com/x", False), ("/x", False), ("a/", False),
     ("a/b/c", False), ("-x", False), ("x_y.z", True), ("k" * 64, False)],
)
def test_qualified_name(key: str, ok: bool) -> None:
    assert (is_qualified_name(key) == []) is ok


def test_label_value() -> None:
    assert is_valid_label_value("") == [] and is_valid_label_value("v1.2_x") == []
    assert is_valid_label_value("-bad") != [] and is_valid_label_value("v" * 64) == ["must be no more than 63 characters"]


def test_generic_version() -> None:
    assert parse_generic_version("2.52.0") == (2, 52, 0)
    assert parse_generic_version("v2.9") == (2, 9, 0)
    assert parse_generic_version("2.53.0rc1") == (2, 53, 0)
    assert parse_generic_version("2.9") < parse_generic_version("2.52.0")  # numeric, not lexical
    for bad in ("2", "latest", "", "2.01.0"):
        with pytest.raises(ValueError):
            parse_generic_version(bad)


@pytest.mark.parametrize(("text", "seconds"), [("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3),
                                               ("-2s", -2), ("0", 0), ("1µs", 1e-6)])
def test_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "", "m", "5 m", "1d", "1h-"])
def test_go_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration_seconds(text)


def test_feature_gates_defaults_match_kuberay_v17() -> None:
    gates = DEFAULT_FEATURE_GATES
    assert gates.ray_job_deletion_policy and gates.ray_service_incremental_upgrade
    assert gates.ray_cluster_status_conditions and gates.ray_multi_host_indexing
    assert not (gates.ray_cron_job or gates.ray_cluster_mtls or gates.ray_cluster_network_policy)


def test_feature_gates_from_flag_and_frozen() -> None:
    gates = FeatureGates.from_flag("RayCronJob=true, RayJobDeletionPolicy=false")
    assert gates.ray_cron_job and not gates.ray_job_deletion_policy and gates.ray_service_incremental_upgrade
    with pytest.raises(ValueError, match="unrecognized feature gate"):
        FeatureGates.from_flag("NoSuchGate=true")
    with pytest.raises(ValueError, match="must be true or false"):
        FeatureGates.from_flag("RayCronJob=yes")
    with pytest.raises(ValidationError):
        gates.ray_cron_job = False
