"""wait-gcs-ready, probes, GCS FT, token auth, multi-host and label rules (KubeRay pod_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api.settings import FeatureGates
from raybus.decisions.cluster.probes import supports_unified_health_check
from raybus.decisions.cluster.settings import OperatorSettings
from tests.unit.decisions.cluster.test_pod_fixtures import (
    FQDN,
    cluster,
    env,
    env_value,
    first_group,
    head,
    ray_container,
    worker,
)

# ---- wait-gcs-ready (TestDefaultInitContainer, TestDefaultInitContainerImagePullPolicy) ---------------


def test_default_init_container() -> None:
    rc = cluster()
    tmpl = first_group(rc).template["spec"]["containers"][0]
    tmpl["imagePullPolicy"] = "Always"
    tmpl["volumeMounts"] = [{"name": "tls", "mountPath": "/etc/tls"}]
    tmpl["securityContext"] = {"runAsUser": 1000}
    pod = worker(rc)
    assert len(pod["spec"]["initContainers"]) == 1
    init = pod["spec"]["initContainers"][0]
    assert init["name"] == "wait-gcs-ready"
    assert init["image"] == "repo/image:custom"
    assert init["imagePullPolicy"] == "Always"
    assert init["securityContext"] == {"runAsUser": 1000}
    assert init["volumeMounts"] == [{"name": "tls", "mountPath": "/etc/tls"}]
    assert init["resources"] == {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    }
    # The Ray container's user env is copied (for TLS), then FQ_RAY_IP / RAY_IP are appended.
    assert init["env"] == [
        {"name": "TEST_ENV_NAME", "value": "TEST_ENV_VALUE"},
        {"name": "FQ_RAY_IP", "value": FQDN},
        {"name": "RAY_IP", "value": "raycluster-sample-head-svc"},
    ]
    script = init["args"][0]
    assert f"ray health-check --address {FQDN}:6379 > /dev/null 2>&1" in script
    assert "if (( SECONDS <= 120 )); then" in script
    assert "sleep 5" in script
    assert script.startswith("\n\t\t\t\t\tSECONDS=0\n")


def test_init_container_injection_can_be_disabled() -> None:
    pod = worker(cluster(), OperatorSettings(enable_init_container_injection=False))
    assert "initContainers" not in pod["spec"]


def test_user_init_containers_come_first_and_get_fq_ray_ip() -> None:
    rc = cluster()
    rc.spec.head_group_spec.template["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]
    first_group(rc).template["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]
    h, w = head(rc), worker(rc)
    assert env_value(h["spec"]["initContainers"][0], "FQ_RAY_IP") == FQDN  # head init containers too
    assert [c["name"] for c in w["spec"]["initContainers"]] == ["setup", "wait-gcs-ready"]


def test_custom_head_port_and_service_name_flow_into_worker() -> None:
    rc = cluster(
        headGroupSpec={**cluster().spec.head_group_spec.to_dict(), "rayStartParams": {"port": "6380"}}
    )
    rc.spec.head_group_spec.head_service = {"metadata": {"name": "my-head"}}
    pod = worker(rc, OperatorSettings(cluster_domain="corp.local"))
    ray = ray_container(pod)
    assert env_value(ray, "RAY_ADDRESS") == "my-head.default.svc.corp.local:6380"
    assert "--address=my-head.default.svc.corp.local:6380" in ray["args"][0]
    assert "my-head.default.svc.corp.local:6380" in pod["spec"]["initContainers"][0]["args"][0]


# ---- probes (TestInitLivenessAndReadinessProbe, TestInitLivenessAndReadinessProbeUnified) ------------

RAYLET = "wget --tries 1 -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"
GCS = "wget --tries 1 -T 10 -q -O- http://localhost:8265/api/gcs_healthz | grep success"


@pytest.mark.parametrize(
    ("node", "crd", "liveness_cmd", "readiness_cmd", "timeout", "readiness_failure"),
    [
        ("head", "", f"{RAYLET} && {GCS}", f"{RAYLET} && {GCS}", 5, 10),
        ("worker", "", RAYLET, RAYLET, 2, 10),
        (
            "worker",
            "RayService",
            RAYLET,
            f"{RAYLET} && wget --tries 1 -T 10 -q -O- http://localhost:8000/-/healthz | grep success",
            2,
            1,
        ),
        ("head", "RayService", f"{RAYLET} && {GCS}", f"{RAYLET} && {GCS}", 5, 10),
    ],
)
def test_exec_probes_before_ray_2_53(
    node: str, crd: str, liveness_cmd: str, readiness_cmd: str, timeout: int, readiness_failure: int
) -> None:
    rc = cluster(rayVersion="2.52.0")
    if crd:
        rc.metadata.labels = {"ray.io/originated-from-crd": crd}
    ray = ray_container(head(rc) if node == "head" else worker(rc))
    live, ready = ray["livenessProbe"], ray["readinessProbe"]
    assert live == {
        "initialDelaySeconds": 30,
        "timeoutSeconds": timeout,
        "periodSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": 120,
        "exec": {"command": ["bash", "-c", liveness_cmd]},
    }
    assert ready == {
        "initialDelaySeconds": 10,
        "timeoutSeconds": timeout,
        "periodSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": readiness_failure,
        "exec": {"command": ["bash", "-c", readiness_cmd]},
    }


@pytest.mark.parametrize("node", ["head", "worker"])
def test_http_probes_from_ray_2_53(node: str) -> None:
    rc = cluster(rayVersion="2.53.0")
    rc.spec.head_group_spec.ray_start_params = {"dashboard-agent-listen-port": "12345"}
    first_group(rc).ray_start_params = {"dashboard-agent-listen-port": "12345"}
    ray = ray_container(head(rc) if node == "head" else worker(rc))
    for probe in (ray["livenessProbe"], ray["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/api/healthz", "port": 12345}
        assert "exec" not in probe


def test_ray_service_worker_readiness_stays_exec_on_new_ray() -> None:
    rc = cluster(rayVersion="2.54.1")
    rc.metadata.labels = {"ray.io/originated-from-crd": "RayService"}
    first_group(rc).template["spec"]["containers"][0]["ports"] = [{"name": "serve", "containerPort": 9000}]
    ray = ray_container(worker(rc))
    assert "httpGet" in ray["livenessProbe"]
    assert "httpGet" not in ray["readinessProbe"]
    assert ray["readinessProbe"]["failureThreshold"] == 1
    assert "http://localhost:9000/-/healthz" in ray["readinessProbe"]["exec"]["command"][2]


def test_user_probes_kept_and_injection_switch() -> None:
    rc = cluster()
    user_probe = {"tcpSocket": {"port": 6379}}
    rc.spec.head_group_spec.template["spec"]["containers"][0]["livenessProbe"] = user_probe
    ray = ray_container(head(rc))
    assert ray["livenessProbe"] == user_probe
    assert "readinessProbe" in ray
    ray = ray_container(head(cluster(), OperatorSettings(enable_probes_injection=False)))
    assert "livenessProbe" not in ray and "readinessProbe" not in ray


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2.53.0", True),
        ("2.53", True),
        ("v2.54.0", True),
        ("2.53.0rc1", True),
        ("3.0.0", True),
        ("2.52.9", False),
        ("2.9.0", False),
        ("", False),
        (None, False),
        ("nightly", False),
        ("2", False),
    ],
)
def test_supports_unified_health_check(version: str | None, expected: bool) -> None:
    assert supports_unified_health_check(version) is expected


# ---- GCS fault tolerance (TestConfigureGCSFaultToleranceWith{Annotations,GcsFTOptions}) ---------------


def _gcs_ft_cluster(annotations: dict[str, str] | None = None, options: dict[str, Any] | None = None) -> Any:
    rc = cluster(gcsFaultToleranceOptions=options) if options is not None else cluster()
    rc.metadata.annotations = annotations
    return rc


def test_gcs_ft_disabled() -> None:
    h, w = head(_gcs_ft_cluster({"ray.io/ft-enabled": "false"})), worker(_gcs_ft_cluster())
    assert h["metadata"]["annotations"]["ray.io/ft-enabled"] == "false"
    assert env(ray_container(w), "RAY_gcs_rpc_server_reconnect_timeout_s") is None


def test_gcs_ft_with_annotations_legacy_password_param() -> None:
    rc = _gcs_ft_cluster({"ray.io/ft-enabled": "TRUE", "ray.io/external-storage-namespace": "test-ns"})
    rc.spec.head_group_spec.ray_start_params = {"redis-password": "test-password"}
    h = head(rc)
    ray = ray_container(h)
    assert h["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    assert h["metadata"]["annotations"]["ray.io/external-storage-namespace"] == "test-ns"
    assert env_value(ray, "RAY_external_storage_namespace") == "test-ns"
    assert env_value(ray, "REDIS_PASSWORD") == "test-password"
    assert env(ray, "RAY_REDIS_ADDRESS") is None
    assert env(ray, "RAY_gcs_rpc_server_reconnect_timeout_s") is None  # workers only
    assert "--redis-password=test-password" in ray["args"][0]


def test_gcs_ft_user_redis_password_env_not_duplicated() -> None:
    rc = _gcs_ft_cluster({"ray.io/ft-enabled": "true"})
    rc.spec.head_group_spec.ray_start_params = {"redis-password": "$REDIS_PASSWORD"}
    secret_ref = {"secretKeyRef": {"name": "redis-password-secret", "key": "password"}}
    rc.spec.head_group_spec.template["spec"]["containers"][0]["env"].append(
        {"name": "REDIS_PASSWORD", "valueFrom": secret_ref}
    )
    ray = ray_container(head(rc))
    assert [e for e in ray["env"] if e["name"] == "REDIS_PASSWORD"] == [
        {"name": "REDIS_PASSWORD", "valueFrom": secret_ref}
    ]


def test_gcs_ft_storage_namespace_defaults_to_uid() -> None:
    ray = ray_container(head(_gcs_ft_cluster({"ray.io/ft-enabled": "true"})))
    assert env_value(ray, "RAY_external_storage_namespace") == "uid-1"


@pytest.mark.parametrize(
    ("options", "expected_env", "params_in_cmd"),
    [
        (
            {"redisAddress": "redis:6379"},
            {"RAY_REDIS_ADDRESS": {"name": "RAY_REDIS_ADDRESS", "value": "redis:6379"}},
            [],
        ),
        (
            {"redisAddress": "redis:6379", "redisPassword": {"value": "test-password"}},
            {"REDIS_PASSWORD": {"name": "REDIS_PASSWORD", "value": "test-password"}},
            ["--redis-password=$REDIS_PASSWORD"],
        ),
        (
            {
                "redisAddress": "redis:6379",
                "redisUsername": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "user"}}},
                "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
            },
            {
                "REDIS_USERNAME": {
                    "name": "REDIS_USERNAME",
                    "valueFrom": {"secretKeyRef": {"name": "s", "key": "user"}},
                },
                "REDIS_PASSWORD": {
                    "name": "REDIS_PASSWORD",
                    "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}},
                },
            },
            ["--redis-username=$REDIS_USERNAME", "--redis-password=$REDIS_PASSWORD"],
        ),
        (
            {"redisAddress": "redis:6379", "externalStorageNamespace": "from-options"},
            {
                "RAY_external_storage_namespace": {
                    "name": "RAY_external_storage_namespace",
                    "value": "from-options",
                }
            },
            [],
        ),
    ],
)
def test_gcs_ft_with_options(
    options: dict[str, Any], expected_env: dict[str, dict[str, Any]], params_in_cmd: list[str]
) -> None:
    rc = _gcs_ft_cluster({"ray.io/external-storage-namespace": "from-annotation"}, options)
    h = head(rc)
    ray = ray_container(h)
    assert h["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    for name, item in expected_env.items():
        assert env(ray, name) == item
    for flag in params_in_cmd:
        assert flag in ray["args"][0]
    expected_ns = options.get("externalStorageNamespace", "from-annotation")
    assert h["metadata"]["annotations"]["ray.io/external-storage-namespace"] == expected_ns
    w = worker(rc)
    assert env_value(ray_container(w), "RAY_gcs_rpc_server_reconnect_timeout_s") == "600"
    assert env(ray_container(w), "RAY_REDIS_ADDRESS") is None
    assert "ray.io/ft-enabled" not in w["metadata"]["annotations"]


def test_worker_reconnect_timeout_not_overridden() -> None:
    rc = _gcs_ft_cluster(None, {"redisAddress": "redis:6379"})
    first_group(rc).template["spec"]["containers"][0]["env"].append(
        {"name": "RAY_gcs_rpc_server_reconnect_timeout_s", "value": "60"}
    )
    ray = ray_container(worker(rc))
    assert [e["value"] for e in ray["env"] if e["name"] == "RAY_gcs_rpc_server_reconnect_timeout_s"] == ["60"]


# ---- token auth (TestConfigureTokenAuth*) --------------------------------------------------------------


def test_token_auth_from_generated_secret() -> None:
    rc = cluster(enableInTreeAutoscaling=True, authOptions={"mode": "token"})
    h, w = head(rc), worker(rc)
    token = {
        "name": "RAY_AUTH_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "raycluster-sample", "key": "auth_token"}},
    }
    for container in (
        ray_container(h),
        h["spec"]["containers"][1],
        ray_container(w),
        w["spec"]["initContainers"][0],
    ):
        assert env(container, "RAY_AUTH_MODE") == {"name": "RAY_AUTH_MODE", "value": "token"}
        assert env(container, "RAY_AUTH_TOKEN") == token


def test_token_auth_with_secret_name_and_disabled_mode() -> None:
    rc = cluster(authOptions={"mode": "token", "secretName": "my-token"})
    token = env(ray_container(head(rc)), "RAY_AUTH_TOKEN")
    assert token is not None and token["valueFrom"]["secretKeyRef"]["name"] == "my-token"
    rc = cluster(authOptions={"mode": "disabled"})
    assert env(ray_container(head(rc)), "RAY_AUTH_MODE") is None


def test_k8s_token_auth() -> None:
    rc = cluster(authOptions={"mode": "token", "enableK8sTokenAuth": True})
    pod = head(rc)
    ray = ray_container(pod)
    assert env_value(ray, "RAY_ENABLE_K8S_TOKEN_AUTH") == "true"
    assert env(ray, "RAY_AUTH_TOKEN") is None
    assert {
        "name": "ray-token",
        "mountPath": "/var/run/secrets/ray.io/serviceaccount",
        "readOnly": True,
    } in ray["volumeMounts"]
    assert {
        "name": "ray-token",
        "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
    } in pod["spec"]["volumes"]


# ---- labels (TestLabelPod*, multi-host indexing) --------------------------------------------------------


def test_user_labels_cannot_override_protected_system_labels() -> None:
    rc = cluster()
    rc.spec.head_group_spec.template["metadata"]["labels"] = {
        "ray.io/node-type": "worker",
        "ray.io/group": "evil",
        "ray.io/cluster": "other",
        "ray.io/identifier": "custom-id",
        "app.kubernetes.io/name": "my-app",
        "team": "a",
    }
    rc.spec.head_group_spec.labels = {"team": "b", "zone": "z1"}
    pod = head(rc)
    labels = pod["metadata"]["labels"]
    assert labels["ray.io/node-type"] == "head"
    assert labels["ray.io/group"] == "headgroup"
    assert labels["ray.io/cluster"] == "raycluster-sample"
    # labelPod protects only the three keys above; these are user-overridable in KubeRay.
    assert labels["ray.io/identifier"] == "custom-id"
    assert labels["app.kubernetes.io/name"] == "my-app"
    assert labels["team"] == "b"  # group labels win over the template's (mergeLabels)
    assert "--labels=team=b,zone=z1" in ray_container(pod)["args"][0]


def test_long_cluster_name_identifier_label_is_clipped() -> None:
    rc = cluster()
    rc.metadata.name = "n" * 60
    assert head(rc)["metadata"]["labels"]["ray.io/identifier"] == "n" * 58 + "-head"


@pytest.mark.parametrize(
    ("num_of_hosts", "gate", "expected"),
    [
        (1, True, {"ray.io/worker-group-replica-index": "2"}),
        (
            4,
            True,
            {
                "ray.io/worker-group-replica-index": "2",
                "ray.io/worker-group-replica-name": "small-group-abc",
                "ray.io/replica-host-index": "3",
            },
        ),
        (4, False, {}),
    ],
)
def test_multi_host_index_labels(num_of_hosts: int, gate: bool, expected: dict[str, str]) -> None:
    rc = cluster()
    first_group(rc).num_of_hosts = num_of_hosts
    settings = OperatorSettings(feature_gates=FeatureGates(ray_multi_host_indexing=gate))
    pod = worker(rc, settings, replica_group_name="small-group-abc", replica_index=2, host_index=3)
    keys = (
        "ray.io/worker-group-replica-index",
        "ray.io/worker-group-replica-name",
        "ray.io/replica-host-index",
    )
    assert {key: value for key, value in pod["metadata"]["labels"].items() if key in keys} == expected


def test_group_resources_override_ray_start_params() -> None:  # TestUpdateRayStartParamsResources (pod level)
    rc = cluster()
    group = first_group(rc)
    group.resources = {"CPU": "8", "memory": "2Gi", "GPU": "1", "TPU": "4"}
    args = ray_container(worker(rc))["args"][0]
    assert "--num-cpus=8" in args
    assert "--memory=2147483648" in args
    assert "--num-gpus=1" in args
    assert "--resources='{\"TPU\":4}'" in args
