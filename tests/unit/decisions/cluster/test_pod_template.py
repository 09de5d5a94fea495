"""Head/worker Pods, mirroring KubeRay pod_test.go (TestBuildPod*, TestHeadPodTemplate*, ...)."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.decisions.cluster.pod_template import head_pod_name_prefix, worker_pod_name_prefix
from raybus.decisions.cluster.settings import OperatorSettings
from tests.unit.decisions.cluster.test_pod_fixtures import (
    FQDN,
    cluster,
    env,
    env_value,
    first_group,
    head,
    ray_container,
    split_and_sort,
    worker,
)

ULIMIT = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536};"


def test_build_pod_head() -> None:  # TestBuildPod (head half)
    pod = head(cluster())
    ray = ray_container(pod)
    assert env_value(ray, "RAY_ADDRESS") == "127.0.0.1:6379"
    assert env_value(ray, "RAY_USAGE_STATS_KUBERAY_IN_USE") == "1"
    assert env_value(ray, "RAY_CLUSTER_NAME") == "metadata.labels['ray.io/cluster']"
    assert env_value(ray, "RAY_CLUSTER_NAMESPACE") == "metadata.namespace"
    assert env_value(ray, "RAY_CLOUD_INSTANCE_ID") == "metadata.name"
    assert env_value(ray, "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE") == "1"
    assert env_value(ray, "RAY_NODE_TYPE_NAME") == "metadata.labels['ray.io/group']"
    assert env_value(ray, "RAY_USAGE_STATS_EXTRA_TAGS") == "kuberay_version=v1.7.0;kuberay_crd=RayCluster"
    assert env_value(ray, "RAY_PORT") == "6379"
    assert env(ray, "FQ_RAY_IP") is None  # the head uses 127.0.0.1
    gen = env_value(ray, "KUBERAY_GEN_RAY_START_CMD")
    assert gen == (
        "ray start --head  --block  --dashboard-agent-listen-port=52365  --dashboard-host=0.0.0.0 "
        " --memory=1073741824  --metrics-export-port=8080  --num-cpus=1 "
    )
    assert ray["command"] == ["/bin/bash", "-c", "--"]
    assert ray["args"] == [f"{ULIMIT} {gen}"]
    labels = pod["metadata"]["labels"]
    assert labels == {
        "ray.io/is-ray-node": "yes",
        "ray.io/cluster": "raycluster-sample",
        "ray.io/node-type": "head",
        "ray.io/group": "headgroup",
        "ray.io/identifier": "raycluster-sample-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    assert pod["spec"]["volumes"] == [
        {"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
    ]
    assert ray["volumeMounts"] == [{"mountPath": "/dev/shm", "name": "shared-mem"}]
    assert {"name": "metrics", "containerPort": 8080} in ray["ports"]
    assert pod["metadata"]["annotations"] == {"ray.io/ft-enabled": "false"}
    assert "initContainers" not in pod["spec"]


def test_build_pod_worker() -> None:  # TestBuildPod (worker half)
    pod = worker(cluster())
    ray = ray_container(pod)
    assert ray["resources"]["limits"] == {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "3"}
    assert env_value(ray, "RAY_ADDRESS") == f"{FQDN}:6379"
    assert env_value(ray, "FQ_RAY_IP") == FQDN
    assert env_value(ray, "RAY_IP") == "raycluster-sample-head-svc"
    assert env_value(ray, "TEST_ENV_NAME") == "TEST_ENV_VALUE"
    assert env(ray, "RAY_USAGE_STATS_EXTRA_TAGS") is None
    expected = (
        f"{ULIMIT} ray start --block --dashboard-agent-listen-port=52365 --memory=1073741824 --num-cpus=1 "
        f"--num-gpus=3 --address={FQDN}:6379 --port=6379 --metrics-export-port=8080"
    )
    assert split_and_sort(ray["args"][0]) == split_and_sort(expected)
    assert pod["metadata"]["labels"]["ray.io/group"] == "small-group"
    assert pod["metadata"]["labels"]["ray.io/identifier"] == "raycluster-sample-worker"
    assert pod["metadata"]["annotations"] == {}  # ft-enabled is head-only


def test_env_var_order_is_kuberays() -> None:
    names = [item["name"] for item in ray_container(worker(cluster()))["env"]]
    assert names == [
        "TEST_ENV_NAME",
        "FQ_RAY_IP",
        "RAY_IP",
        "RAY_CLUSTER_NAME",
        "RAY_CLUSTER_NAMESPACE",
        "RAY_CLOUD_INSTANCE_ID",
        "RAY_NODE_TYPE_NAME",
        "KUBERAY_GEN_RAY_START_CMD",
        "RAY_PORT",
        "RAY_ADDRESS",
        "RAY_USAGE_STATS_KUBERAY_IN_USE",
        "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE",
    ]


def test_build_pod_with_no_cpu_limits() -> None:  # TestBuildPod_WithNoCPULimits
    rc = cluster()
    rc.spec.head_group_spec.template["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "2", "memory": "1Gi"},
        "limits": {"memory": "1Gi"},
    }
    expected = (
        f"{ULIMIT} ray start --head --block --dashboard-agent-listen-port=52365 --memory=1073741824 "
        "--num-cpus=2 --metrics-export-port=8080 --dashboard-host=0.0.0.0"
    )
    assert split_and_sort(ray_container(head(rc))["args"][0]) == split_and_sort(expected)


def test_build_pod_with_overwrite_command() -> None:  # TestBuildPod_WithOverwriteCommand
    rc = cluster()
    rc.metadata.annotations = {"ray.io/overwrite-container-cmd": "true"}
    rc.spec.head_group_spec.template["spec"]["containers"][0].update(command=["I am head"], args=["again"])
    pod = head(rc)
    ray = ray_container(pod)
    assert ray["command"] == ["I am head"]
    assert ray["args"] == ["again"]
    assert pod["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] == "true"
    assert "ray start --head" in str(env_value(ray, "KUBERAY_GEN_RAY_START_CMD"))


@pytest.mark.parametrize(
    ("command", "args", "expected_prefix"),
    [
        (["echo"], ["hi"], " echo  hi  && "),
        ([], ["sleep 1"], " sleep 1  && "),
        (["ray start --head --custom"], [], None),  # user already runs `ray start`: untouched
    ],
)
def test_user_command_runs_before_ray_start(
    command: list[str], args: list[str], expected_prefix: str | None
) -> None:
    rc = cluster()
    container = rc.spec.head_group_spec.template["spec"]["containers"][0]
    container.update(command=command, args=args)
    ray = ray_container(head(rc))
    if expected_prefix is None:
        assert ray["command"] == command
    else:
        assert ray["command"] == ["/bin/bash", "-c", "--"]
        assert ray["args"][0].startswith(expected_prefix + ULIMIT)


def test_build_pod_with_autoscaler_enabled() -> None:  # TestBuildPod_WithAutoscalerEnabled
    pod = head(cluster(enableInTreeAutoscaling=True))
    ray = ray_container(pod)
    assert "--no-monitor" in ray["args"][0]
    assert pod["spec"]["volumes"] == [
        {"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        {"name": "ray-logs", "emptyDir": {}},
    ]
    assert ray["volumeMounts"] == [
        {"mountPath": "/dev/shm", "name": "shared-mem"},
        {"mountPath": "/tmp/ray", "name": "ray-logs"},
    ]
    assert len(pod["spec"]["containers"]) == 2
    assert pod["spec"]["containers"][1] == {
        "name": "autoscaler",
        "image": "repo/image:custom",
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {
                "name": "RAY_CLUSTER_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}},
            },
            {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "RAY_HEAD_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
            {
                "name": "KUBERAY_GEN_AUTOSCALER_START_CMD",
                "value": "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
                "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)",
            },
        ],
        "command": ["/bin/bash", "-c", "--"],
        "args": [
            "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
        ],
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "500m", "memory": "512Mi"},
        },
        "volumeMounts": [{"mountPath": "/tmp/ray", "name": "ray-logs"}],
    }
    assert pod["spec"]["serviceAccountName"] == "raycluster-sample"
    assert "restartPolicy" not in pod["spec"]  # v1 / unset version: KubeRay keeps the template's
    assert env(ray, "RAY_enable_autoscaler_v2") is None  # version unset: Ray decides (kuberay#4810)


@pytest.mark.parametrize(
    ("version", "env_value_expected", "restart_policy"),
    [("v2", "true", "Never"), ("v1", "false", None), (None, None, None)],
)
def test_autoscaler_versions(
    version: str | None, env_value_expected: str | None, restart_policy: str | None
) -> None:
    options = {"version": version} if version else {}
    rc = cluster(enableInTreeAutoscaling=True, autoscalerOptions=options)
    h, w = head(rc), worker(rc)
    assert env_value(ray_container(h), "RAY_enable_autoscaler_v2") == env_value_expected
    assert h["spec"].get("restartPolicy") == restart_policy
    assert w["spec"].get("restartPolicy") == restart_policy
    assert env(ray_container(w), "RAY_enable_autoscaler_v2") is None


def test_v2_restart_policy_needs_autoscaling_enabled() -> None:
    rc = cluster(enableInTreeAutoscaling=False, autoscalerOptions={"version": "v2"})
    assert "restartPolicy" not in worker(rc)["spec"]
    assert len(head(rc)["spec"]["containers"]) == 1


def test_build_pod_with_autoscaler_options() -> None:  # TestBuildPodWithAutoscalerOptions
    security = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
    options: dict[str, Any] = {
        "image": "custom-autoscaler-xxx",
        "imagePullPolicy": "Always",
        "idleTimeoutSeconds": 100,
        "upscalingMode": "Aggressive",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "env": [{"name": "fooEnv", "value": "fooValue"}],
        "envFrom": [{"prefix": "Pre"}],
        "volumeMounts": [{"name": "ca-tls", "mountPath": "/etc/ca/tls", "readOnly": True}],
        "securityContext": security,
    }
    pod = head(cluster(enableInTreeAutoscaling=True, autoscalerOptions=options))
    autoscaler = pod["spec"]["containers"][1]
    assert autoscaler["image"] == "custom-autoscaler-xxx"
    assert autoscaler["imagePullPolicy"] == "Always"
    assert autoscaler["resources"] == options["resources"]
    assert autoscaler["env"][-1] == {"name": "fooEnv", "value": "fooValue"}
    assert len(autoscaler["env"]) == 6  # appended, not replaced
    assert autoscaler["envFrom"] == [{"prefix": "Pre"}]
    assert autoscaler["volumeMounts"] == [
        {"name": "ca-tls", "mountPath": "/etc/ca/tls", "readOnly": True},
        {"mountPath": "/tmp/ray", "name": "ray-logs"},
    ]
    assert autoscaler["securityContext"] == security


def test_autoscaler_command_args_override() -> None:
    options = {"command": ["/bin/sh", "-c"], "args": ["ulimit -n 65536; $KUBERAY_GEN_AUTOSCALER_START_CMD"]}
    autoscaler = head(cluster(enableInTreeAutoscaling=True, autoscalerOptions=options))["spec"]["containers"][
        1
    ]
    assert autoscaler["command"] == ["/bin/sh", "-c"]
    assert autoscaler["args"] == ["ulimit -n 65536; $KUBERAY_GEN_AUTOSCALER_START_CMD"]


def test_autoscaler_service_account_is_clipped() -> None:
    rc = cluster(enableInTreeAutoscaling=True)
    rc.metadata.name = "x" * 60
    assert head(rc)["spec"]["serviceAccountName"] == "x" * 50
    rc.spec.head_group_spec.template["spec"]["serviceAccountName"] = "my-sa"
    assert head(rc)["spec"]["serviceAccountName"] == "my-sa"


def test_default_autoscaler_image_setting() -> None:
    settings = OperatorSettings(default_autoscaler_image="autoscaler:1")
    pod = head(cluster(enableInTreeAutoscaling=True), settings)
    assert pod["spec"]["containers"][1]["image"] == "autoscaler:1"
    pod = head(cluster(enableInTreeAutoscaling=True, autoscalerOptions={"image": "opt:2"}), settings)
    assert pod["spec"]["containers"][1]["image"] == "opt:2"


def test_build_pod_created_by_ray_service() -> None:  # TestBuildPod_WithCreatedByRayService
    rc = cluster(enableInTreeAutoscaling=True)
    rc.metadata.labels = {"ray.io/originated-from-crd": "RayService"}
    h, w = head(rc), worker(rc)
    assert h["metadata"]["labels"]["ray.io/serve"] == "false"
    assert w["metadata"]["labels"]["ray.io/serve"] == "true"
    for pod in (h, w):
        ray = ray_container(pod)
        assert env_value(ray, "RAY_timeout_ms_task_wait_for_death_info") == "0"
        assert env_value(ray, "RAY_gcs_server_request_timeout_seconds") == "5"
        assert env_value(ray, "RAY_SERVE_KV_TIMEOUT_S") == "5"
    assert (
        env_value(ray_container(h), "RAY_USAGE_STATS_EXTRA_TAGS")
        == "kuberay_version=v1.7.0;kuberay_crd=RayService"
    )


def test_ray_service_env_not_overridden() -> None:
    rc = cluster()
    rc.metadata.labels = {"ray.io/originated-from-crd": "RayService"}
    rc.spec.head_group_spec.template["spec"]["containers"][0]["env"].append(
        {"name": "RAY_SERVE_KV_TIMEOUT_S", "value": "30"}
    )
    ray = ray_container(head(rc))
    assert [e["value"] for e in ray["env"] if e["name"] == "RAY_SERVE_KV_TIMEOUT_S"] == ["30"]


def test_plasma_directory_skips_dev_shm() -> None:
    rc = cluster()
    rc.spec.head_group_spec.ray_start_params = {"plasma-directory": "/mnt/plasma"}
    pod = head(rc)
    assert "volumes" not in pod["spec"] or pod["spec"]["volumes"] == []


def test_existing_dev_shm_mount_is_respected() -> None:  # TestAddEmptyDirVolumes
    rc = cluster()
    rc.spec.head_group_spec.template["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "my-shm", "mountPath": "/dev/shm"}
    ]
    rc.spec.head_group_spec.template["spec"]["volumes"] = [{"name": "my-shm", "emptyDir": {}}]
    pod = head(rc)
    assert pod["spec"]["volumes"] == [{"name": "my-shm", "emptyDir": {}}]


def test_dev_shm_sized_from_request_without_limit() -> None:
    rc = cluster()
    rc.spec.head_group_spec.template["spec"]["containers"][0]["resources"] = {"requests": {"memory": "2Gi"}}
    assert head(rc)["spec"]["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}
    rc.spec.head_group_spec.template["spec"]["containers"][0]["resources"] = {}
    assert head(rc)["spec"]["volumes"][0]["emptyDir"] == {"medium": "Memory"}


def test_metrics_port_not_duplicated() -> None:
    rc = cluster()
    rc.spec.head_group_spec.template["spec"]["containers"][0]["ports"] = [
        {"name": "metrics", "containerPort": 9090}
    ]
    assert ray_container(head(rc))["ports"] == [{"name": "metrics", "containerPort": 9090}]


def test_pod_metadata_and_owner_reference() -> None:
    pod = worker(cluster())
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert pod["metadata"]["name"] == "raycluster-sample-small-group-worker-abcde"
    assert "generateName" not in pod["metadata"]
    assert pod["metadata"]["namespace"] == "default"
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "name": "raycluster-sample",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_input_cluster_not_mutated() -> None:
    rc = cluster(
        enableInTreeAutoscaling=True,
        gcsFaultToleranceOptions={"redisAddress": "r:6379", "redisPassword": {"value": "p"}},
    )
    before = rc.model_dump()
    head(rc)
    worker(rc)
    assert rc.model_dump() == before


@pytest.mark.parametrize(
    ("name", "deterministic", "expected"),
    [
        ("raycluster-sample", False, "raycluster-sample-head-"),
        ("raycluster-sample", True, "raycluster-sample-head"),
        ("A" * 60, False, "a" * 50 + "-head-"),
    ],
)
def test_head_pod_name_prefix(name: str, deterministic: bool, expected: str) -> None:
    rc = cluster()
    rc.metadata.name = name
    settings = OperatorSettings(enable_deterministic_head_pod_name=deterministic)
    assert head_pod_name_prefix(rc, settings=settings) == expected


def test_worker_pod_name_prefix_truncates_to_50() -> None:
    rc = cluster()
    assert rc.spec.worker_group_specs
    group = first_group(rc)
    assert worker_pod_name_prefix(rc, group) == "raycluster-sample-small-group-worker-"
    rc.metadata.name = "c" * 45
    assert worker_pod_name_prefix(rc, group) == "c" * 45 + "-smal" + "-worker-"


def test_sidecars_from_settings() -> None:
    settings = OperatorSettings(
        head_sidecar_containers=({"name": "fluentbit", "image": "fb"},),
        worker_sidecar_containers=({"name": "w-side", "image": "ws"},),
        default_container_envs=(
            {"name": "DEFAULT_ENV", "value": "1"},
            {"name": "TEST_ENV_NAME", "value": "x"},
        ),
    )
    h = head(cluster(enableInTreeAutoscaling=True), settings)
    assert [c["name"] for c in h["spec"]["containers"]] == ["ray-head", "autoscaler", "fluentbit"]
    w = worker(cluster(), settings)
    assert [c["name"] for c in w["spec"]["containers"]] == ["ray-worker", "w-side"]
    ray = ray_container(w)
    assert env_value(ray, "DEFAULT_ENV") == "1"
    assert env_value(ray, "TEST_ENV_NAME") == "TEST_ENV_VALUE"  # user env wins over defaults


def test_login_shell_setting() -> None:
    settings = OperatorSettings(enable_login_shell=True)
    w = worker(cluster(), settings)
    assert ray_container(w)["command"] == ["/bin/bash", "-cl", "--"]
    assert w["spec"]["initContainers"][0]["command"] == ["/bin/bash", "-cl", "--"]
