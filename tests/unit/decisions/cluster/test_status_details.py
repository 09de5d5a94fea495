"""Issue 13 item 5 (HeadPodReady message, GPU keys, serve-* ports, login shell) and the history
server collector sidecar of item 4, mirroring KubeRay's util_test.go / history_server_test.go."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from raybus.api.raycluster import RayCluster
from raybus.api.settings import FeatureGates
from raybus.decisions.cluster.history_server import inject_history_server_collector
from raybus.decisions.cluster.k8s_services import build_serve_service
from raybus.decisions.cluster.pod_template import build_head_pod, build_worker_pod
from raybus.decisions.cluster.quantity import format_quantity, parse_quantity
from raybus.decisions.cluster.ray_start import container_command
from raybus.decisions.cluster.replicas import is_gpu_resource_key, sum_gpus
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.cluster.status import head_pod_ready_condition
from tests.conftest import SAMPLES
from tests.unit.decisions.cluster.test_reconcile_helpers import make_cluster

# --- FindHeadPodReadyCondition: KubeRay's TestFindHeadPodReadyMessage table --------------------------------
IMAGE_MSG = "Back-off pulling image royproject/roy:latest: ErrImagePull: rpc error: code = NotFound"


def head(message: str, statuses: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": {"phase": "Pending", "conditions": [
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": message}],
        "containerStatuses": statuses}}


@pytest.mark.parametrize(
    ("message", "statuses", "reason", "want"),
    [
        ("", [], "ContainersNotReady", ""),
        ("TooEarlyInTheMorning", [], "ContainersNotReady", "TooEarlyInTheMorning"),
        ("containers not ready",
         [{"name": "ray", "state": {"waiting": {"reason": "ImagePullBackOff", "message": IMAGE_MSG}}}],
         "ImagePullBackOff", f"containers not ready; ray: {IMAGE_MSG}"),
        ("aesthetic problems",
         [{"name": "indigo", "state": {"waiting": {"reason": "BadColor", "message": "too blue"}}},
          {"name": "circle", "state": {"terminated": {"reason": "BadGeometry", "message": "too round"}}}],
         "BadColor", "aesthetic problems; indigo: too blue"),
        ("", [{"name": "my-image", "state": {"terminated": {"reason": "Crashed", "message": "bash not found"}}}],
         "Crashed", "my-image: bash not found"),
    ],
    ids=["no-message-no-status", "no-status", "one-status", "only-first", "no-reason-one-status"],
)
def test_head_pod_ready_message(message: str, statuses: list[dict[str, Any]], reason: str, want: str) -> None:
    assert head_pod_ready_condition(head(message, statuses)) == ("False", reason, want)


def test_ready_containers_are_skipped_and_ready_head_is_running_and_ready() -> None:
    pod = head("m", [{"name": "a", "ready": True, "state": {"running": {}}},
                     {"name": "b", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}}])
    assert head_pod_ready_condition(pod) == ("False", "CrashLoopBackOff", "m; b: back-off")
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert head_pod_ready_condition(ready) == ("True", "HeadPodRunningAndReady", "")


# --- desired GPUs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "gpu"),
    [("nvidia.com/gpu", True), ("amd.com/gpu", True), ("gpu", True), ("nvidia.com/mig-1g.5gb", True),
     ("nvidia.com/mig-2g.32gb", True), ("google.com/tpu", False), ("cpu", False), ("nvidia.com/gpus", False)],
)
def test_gpu_resource_keys(name: str, gpu: bool) -> None:
    assert is_gpu_resource_key(name) is gpu


@given(counts=st.dictionaries(st.sampled_from(["nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-1g.5gb",
                                               "nvidia.com/mig-3g.20gb", "google.com/tpu", "cpu"]),
                              st.integers(0, 64)))
def test_sum_gpus_counts_every_gpu_key(counts: dict[str, int]) -> None:
    total = sum_gpus({name: parse_quantity(str(n)) for name, n in counts.items()})
    assert format_quantity(total) == str(sum(n for name, n in counts.items() if is_gpu_resource_key(name)))


def test_desired_gpu_status_includes_mig() -> None:
    from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
    from tests.unit.decisions.cluster.test_reconcile_helpers import SETTINGS, later, worker_group

    group = worker_group(replicas=2)
    group["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/mig-1g.5gb": "1", "nvidia.com/gpu": "1"}}
    d = reconcile_cluster(ClusterSnapshot(cluster=make_cluster(groups=[group])), settings=SETTINGS,
                          now=later(0), entropy="e")
    assert d.status is not None and d.status["desiredGPU"] == "4"


# --- serve Service ports ---------------------------------------------------------------------------------
def test_serve_star_ports_are_serving_ports() -> None:
    ports = [{"name": "serve", "containerPort": 8000}, {"name": "serve-grpc", "containerPort": 9000},
             {"name": "dashboard", "containerPort": 8265}, {"name": "server", "containerPort": 1}]
    rc = make_cluster(annotations={"ray.io/enable-serve-service": "true"})
    body = rc.to_manifest()
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = ports
    svc = build_serve_service(RayCluster.model_validate(body))
    assert svc["spec"]["ports"] == [{"name": "serve", "port": 8000}, {"name": "serve-grpc", "port": 9000}]
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = ports[1:]
    assert build_serve_service(RayCluster.model_validate(body))["spec"]["ports"] == [
        {"name": "serve-grpc", "port": 9000}]
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = ports[2:]
    with pytest.raises(ValueError, match="port named 'serve'"):
        build_serve_service(RayCluster.model_validate(body))


# --- ENABLE_LOGIN_SHELL: KubeRay's TestGetContainerCommand -------------------------------------------------
@pytest.mark.parametrize(
    ("login", "options", "want"),
    [(False, "", "-c"), (True, "", "-cl"), (False, "e", "-ce"), (True, "e", "-cel")],
)
def test_container_command(login: bool, options: str, want: str) -> None:
    assert container_command(login_shell=login, additional_options=options) == ["/bin/bash", want, "--"]


def test_login_shell_reaches_ray_and_init_containers() -> None:
    s = OperatorSettings.from_env({"ENABLE_LOGIN_SHELL": "true"})
    rc = make_cluster()
    worker = build_worker_pod(rc, rc.spec.worker_group_specs[0], settings=s, name="w")  # type: ignore[index]
    assert worker["spec"]["containers"][0]["command"] == ["/bin/bash", "-cl", "--"]
    assert worker["spec"]["initContainers"][0]["command"] == ["/bin/bash", "-cl", "--"]


# --- history server collector ----------------------------------------------------------------------------
HISTORY = OperatorSettings(feature_gates=FeatureGates(ray_cluster_history_server=True))


def history_cluster() -> RayCluster:
    body = next(d for d in yaml.safe_load_all((SAMPLES / "ray-cluster.historyserver.yaml").read_text())
                if isinstance(d, dict) and d.get("kind") == "RayCluster")
    body["metadata"].update(namespace="ns", uid="u")
    return RayCluster.model_validate(body)


def test_collector_is_injected_in_head_and_workers_with_the_gate() -> None:
    rc = history_cluster()
    for pod, role in ((build_head_pod(rc, settings=HISTORY, name="h"), "Head"),
                      (build_worker_pod(rc, rc.spec.worker_group_specs[0], settings=HISTORY, name="w"),  # type: ignore[index]
                       "Worker")):
        containers = pod["spec"]["containers"]
        collector = containers[-1]
        assert collector["name"] == "collector" and collector["command"] == ["collector"]
        assert f"--role={role}" in collector["args"] and f"--ray-cluster-name={rc.name}" in collector["args"]
        assert "--events-port=8084" in collector["args"]
        ray = containers[0]
        mount = next(m for m in ray["volumeMounts"] if m["mountPath"] == "/tmp/ray")
        assert collector["volumeMounts"] == [{"name": mount["name"], "mountPath": "/tmp/ray"}]
        env = {e["name"]: e.get("value") for e in ray["env"]}
        assert env["RAY_enable_ray_event"] == "true"
        assert env["RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR"] == "http://localhost:8084/v1/events"
        assert ray["lifecycle"]["postStart"]["exec"]["command"][:2] == ["/bin/sh", "-c"]
    plain = build_head_pod(rc, settings=OperatorSettings(), name="h")
    assert all(c["name"] != "collector" for c in plain["spec"]["containers"])


def test_collector_keeps_a_user_post_start_and_existing_tmp_ray_volume() -> None:
    rc = make_cluster(historyServerOptions={"collectorOptions": {"image": "c:1"}})
    spec: dict[str, Any] = {"containers": [{"name": "ray", "lifecycle": {"postStart": {"exec": {"command": ["x"]}}},
                                            "volumeMounts": [{"name": "mine", "mountPath": "/tmp/ray"}]}],
                            "volumes": [{"name": "mine", "emptyDir": {}}]}
    inject_history_server_collector(spec, rc, node_type="head", settings=HISTORY)
    assert spec["containers"][0]["lifecycle"]["postStart"] == {"exec": {"command": ["x"]}}
    assert spec["containers"][1]["volumeMounts"][0]["name"] == "mine" and len(spec["volumes"]) == 1
    assert spec["containers"][1]["image"] == "c:1"
    assert spec["containers"][1]["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                  "limits": {"cpu": "200m", "memory": "256Mi"}}
