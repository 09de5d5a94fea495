"""OperatorSettings: KubeRay's env knob parsing and defaults."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster.settings import KUBERAY_VERSION, OperatorSettings


def test_defaults_are_kuberays() -> None:
    s = OperatorSettings()
    assert s.enable_probes_injection and s.enable_init_container_injection and s.enable_gcs_ft_redis_cleanup
    assert not s.enable_ray_head_cluster_ip_service and not s.enable_login_shell
    assert not s.enable_random_pod_delete and not s.enable_deterministic_head_pod_name
    assert s.cluster_domain == "cluster.local"
    assert s.raycluster_default_requeue_seconds == 300
    assert s.kuberay_version == KUBERAY_VERSION == "v1.7.0"
    assert s.feature_gates.ray_multi_host_indexing is True
    assert s.feature_gates.ray_cluster_mtls is False
    assert s == OperatorSettings.from_env({})


@pytest.mark.parametrize(
    ("env", "field", "expected"),
    [
        ({"ENABLE_PROBES_INJECTION": "False"}, "enable_probes_injection", False),
        ({"ENABLE_PROBES_INJECTION": "no"}, "enable_probes_injection", True),  # only "false" disables
        ({"ENABLE_INIT_CONTAINER_INJECTION": "false"}, "enable_init_container_injection", False),
        ({"ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE": "TRUE"}, "enable_ray_head_cluster_ip_service", True),
        (
            {"ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE": "1"},
            "enable_ray_head_cluster_ip_service",
            False,
        ),  # only "true"
        ({"ENABLE_LOGIN_SHELL": "true"}, "enable_login_shell", True),
        ({"ENABLE_RANDOM_POD_DELETE": "true"}, "enable_random_pod_delete", True),
        ({"ENABLE_DETERMINISTIC_HEAD_POD_NAME": "true"}, "enable_deterministic_head_pod_name", True),
        ({"ENABLE_GCS_FT_REDIS_CLEANUP": "false"}, "enable_gcs_ft_redis_cleanup", False),
        ({"USE_INGRESS_ON_OPENSHIFT": "true"}, "use_ingress_on_openshift", True),
        ({"CLUSTER_DOMAIN": "corp.local"}, "cluster_domain", "corp.local"),
        ({"RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV": "60"}, "raycluster_default_requeue_seconds", 60),
        ({"RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV": "x"}, "raycluster_default_requeue_seconds", 300),
    ],
)
def test_from_env(env: dict[str, str], field: str, expected: object) -> None:
    assert getattr(OperatorSettings.from_env(env), field) == expected


def test_feature_gates_and_overrides() -> None:
    s = OperatorSettings.from_env(
        {}, feature_gates="RayMultiHostIndexing=false,RayCronJob=true", kuberay_version="x"
    )
    assert s.feature_gates.ray_multi_host_indexing is False
    assert s.feature_gates.ray_cron_job is True
    assert s.kuberay_version == "x"
    with pytest.raises(ValueError):
        OperatorSettings.from_env({}, feature_gates="NoSuchGate=true")


def test_frozen_and_strict() -> None:
    s = OperatorSettings()
    with pytest.raises(ValidationError):
        s.enable_login_shell = True  # type: ignore[misc]
    with pytest.raises(ValidationError):
        OperatorSettings(no_such_knob=True)  # type: ignore[call-arg]


# --- defaultPodAnnotations / defaultPodLabels (v1.7 operator config) ---------------------------------------
def _with_template_metadata() -> RayCluster:
    from tests.unit.decisions.cluster.test_pod_fixtures import INSTANCE

    data = copy.deepcopy(INSTANCE)
    head_meta = data["spec"]["headGroupSpec"]["template"].setdefault("metadata", {})
    head_meta["annotations"] = {"shared-annotation": "head", "user-annotation": "head-only"}
    head_meta["labels"] = {"shared-label": "head", "user-label": "head-only"}
    worker_meta = data["spec"]["workerGroupSpecs"][0]["template"].setdefault("metadata", {})
    worker_meta["annotations"] = {"shared-annotation": "worker", "user-annotation": "worker-only"}
    worker_meta["labels"] = {"shared-label": "worker", "user-label": "worker-only"}
    return RayCluster.from_dict(data)


@pytest.mark.parametrize(("defaults", "expected"), [
    # TestBuildPodsInjectDefaultPodMetadata: defaults fill gaps, the template's own keys win
    ({"default_pod_annotations": {"monitoring.example.com/scrape": "true", "shared-annotation": "default"},
      "default_pod_labels": {"fleet": "managed", "shared-label": "default"}},
     {"annotations": {"monitoring.example.com/scrape": "true", "shared-annotation": "{role}",
                      "user-annotation": "{role}-only"},
      "labels": {"fleet": "managed", "shared-label": "{role}", "user-label": "{role}-only"}}),
    # TestBuildPodsWithoutDefaultPodMetadata
    ({}, {"annotations": {"shared-annotation": "{role}", "user-annotation": "{role}-only"},
          "labels": {"shared-label": "{role}", "user-label": "{role}-only"}}),
])
def test_default_pod_metadata(defaults: dict[str, dict[str, str]], expected: dict[str, dict[str, str]]) -> None:
    from tests.unit.decisions.cluster.test_pod_fixtures import head, worker

    settings = OperatorSettings(**defaults)
    rc = _with_template_metadata()
    for role, pod in (("head", head(rc, settings)), ("worker", worker(rc, settings))):
        for field, want in expected.items():
            got = pod["metadata"].get(field) or {}
            for key, value in want.items():
                assert got.get(key) == value.format(role=role), (role, field, key)
            if not defaults:
                assert "monitoring.example.com/scrape" not in got and "fleet" not in got
        # KubeRay's own labels are never replaced by a default
        assert pod["metadata"]["labels"]["ray.io/node-type"] == role


def test_default_pod_metadata_never_overrides_kuberay_labels() -> None:
    from tests.unit.decisions.cluster.test_pod_fixtures import cluster, head

    pod = head(cluster(), OperatorSettings(default_pod_labels={"ray.io/node-type": "x", "ray.io/cluster": "y"}))
    assert pod["metadata"]["labels"]["ray.io/node-type"] == "head"
    assert pod["metadata"]["labels"]["ray.io/cluster"] == "raycluster-sample"


@pytest.mark.parametrize(("env", "field", "expected"), [
    ({"RAYBUS_DEFAULT_POD_ANNOTATIONS": '{"a": "1"}'}, "default_pod_annotations", {"a": "1"}),
    ({"RAYBUS_DEFAULT_POD_LABELS": '{"team": "ml"}'}, "default_pod_labels", {"team": "ml"}),
    ({}, "default_pod_labels", {}),
])
def test_default_pod_metadata_from_env(env: dict[str, str], field: str, expected: dict[str, str]) -> None:
    assert getattr(OperatorSettings.from_env(env), field) == expected


@pytest.mark.parametrize("raw", ["not json", '["a"]', '{"a": 1}'])
def test_default_pod_metadata_from_env_rejects_bad_values(raw: str) -> None:
    with pytest.raises(ValueError, match="RAYBUS_DEFAULT_POD_LABELS"):
        OperatorSettings.from_env({"RAYBUS_DEFAULT_POD_LABELS": raw})
