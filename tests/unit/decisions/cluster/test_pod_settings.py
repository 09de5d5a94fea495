"""OperatorSettings: KubeRay's env knob parsing and defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

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
