"""KubeRay's samples on the node, reconciled by raybus's Pods, running real Ray (samples.py: the
only edits). Each check removes its sample at the end, so the next one has the two cores."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

from tests.node import samples
from tests.node.install import NAMESPACE, all_ready, wait_until
from tests.node.node import Node

NODES_ALIVE = "import ray; ray.init(address='auto', logging_level='ERROR'); print('ALIVE', sum(n['Alive'] for n in ray.nodes()))"


def ray_pods(node: Node, cluster: str, node_type: str | None = None) -> list[dict[str, Any]]:
    selector = f"ray.io/cluster={cluster}" + (f",ray.io/node-type={node_type}" if node_type else "")
    return list(node.get("pods", "-l", selector)["items"])


def running_ready(pod: dict[str, Any]) -> bool:
    statuses = pod["status"].get("containerStatuses") or []
    return bool(pod["status"].get("phase") == "Running" and statuses and all(c["ready"] for c in statuses)
                and not pod["metadata"].get("deletionTimestamp"))


def alive_nodes(node: Node, cluster: str) -> int:
    head = ray_pods(node, cluster, "head")[0]["metadata"]["name"]
    out = node.kubectl("exec", head, "-c", "ray-head", "--", "python", "-c", NODES_ALIVE, timeout=120).stdout
    return int(next(ln for ln in out.splitlines() if ln.startswith("ALIVE ")).split()[1])


def delete_and_wait(node: Node, kind: str, name: str, cluster_prefix: str) -> None:
    node.kubectl("delete", kind, name, "--wait=false", check=False)
    wait_until(lambda: not [p for p in node.get("pods")["items"]
                            if p["metadata"].get("labels", {}).get("ray.io/cluster", "").startswith(cluster_prefix)],
               f"{kind} {name}'s Pods gone", 180)


def test_raycluster_sample_head_and_worker_run_real_ray(raybus: Node) -> None:
    raybus.kubectl("apply", "-f", "-", input_=samples.manifest("ray-cluster.sample.yaml"))
    name = "raycluster-kuberay"
    wait_until(lambda: len(ray_pods(raybus, name)) == 2 and all(running_ready(p) for p in ray_pods(raybus, name)),
               "head and worker Running and Ready", 420, interval=3)
    worker = ray_pods(raybus, name, "worker")[0]
    args = " ".join(worker["spec"]["containers"][0].get("args", []) + worker["spec"]["containers"][0].get("command", []))
    # The worker joins through the head Service's DNS name (cluster DNS), as KubeRay builds it.
    assert f"--address={name}-head-svc.default.svc.cluster.local:6379" in args, args
    assert wait_until(lambda: alive_nodes(raybus, name) == 2, "the head reports 2 alive nodes", 180) is True
    state = wait_until(lambda: raybus.get("raycluster", name).get("status", {}).get("state") == "ready"
                       and raybus.get("raycluster", name)["status"], "RayCluster state ready", 120)
    assert state["readyWorkerReplicas"] == 1 and state["availableWorkerReplicas"] == 1, state


def test_workload_survives_executor_and_nats_pod_kills(raybus: Node) -> None:
    """Scale the sample's workers 1 -> 3 and kill the command-executor Pod and nats-1 while raybus
    creates them: exactly 3 workers in the end (nothing created twice), every part Ready again."""
    name = "raycluster-kuberay"
    before = {p["metadata"]["uid"] for p in ray_pods(raybus, name, "worker")}
    executor = raybus.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=raybus-command-executor")["items"]
    patch = json.dumps([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3},
                        {"op": "replace", "path": "/spec/workerGroupSpecs/0/maxReplicas", "value": 5}])
    raybus.kubectl("patch", "raycluster", name, "--type=json", "-p", patch)
    raybus.kubectl("delete", "pod", "-n", NAMESPACE, executor[0]["metadata"]["name"], "nats-1",
                   "--grace-period=0", "--force", "--wait=false")
    wait_until(lambda: all(all_ready(raybus, kind, n) for kind, n in (
        ("statefulset", "nats"), ("deployment", "raybus-command-executor"))), "NATS and the executor Ready again", 300)
    wait_until(lambda: sum(running_ready(p) for p in ray_pods(raybus, name, "worker")) == 3,
               "3 workers Running and Ready", 420, interval=3)
    # Settled: no extra worker appears afterwards either.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        workers = ray_pods(raybus, name, "worker")
        assert len(workers) == 3, [p["metadata"]["name"] for p in workers]
        time.sleep(2)
    assert before <= {p["metadata"]["uid"] for p in ray_pods(raybus, name, "worker")}
    assert wait_until(lambda: alive_nodes(raybus, name) == 4, "the head reports 4 alive nodes", 240) is True
    delete_and_wait(raybus, "raycluster", name, name)


def test_rayjob_sample_succeeds_with_readable_logs(raybus: Node) -> None:
    raybus.kubectl("apply", "-f", "-", input_=samples.manifest("ray-job.sample.yaml"))
    name = "rayjob-sample"

    def finished() -> dict[str, Any] | None:
        status = raybus.get("rayjob", name).get("status", {})
        return status if status.get("jobDeploymentStatus") in ("Complete", "Failed") else None
    status = wait_until(finished, "RayJob finished", 900, interval=5)
    logs = raybus.kubectl("logs", f"job/{name}", check=False).stdout
    assert status["jobDeploymentStatus"] == "Complete" and status["jobStatus"] == "SUCCEEDED", (status, logs[-3000:])
    assert "test_counter got 5" in logs, logs[-3000:]
    delete_and_wait(raybus, "rayjob", name, name)


def _post(ip: str, path: str, body: Any, timeout: float = 10) -> str:
    req = urllib.request.Request(f"http://{ip}:8000{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read().decode()


def test_rayservice_answers_and_upgrades_without_downtime(raybus: Node) -> None:
    name = "rayservice-sample"
    try:
        _rayservice(raybus, name)
    finally:
        delete_and_wait(raybus, "rayservice", name, name)


def _rayservice(raybus: Node, name: str) -> None:
    raybus.kubectl("apply", "-f", "-", input_=samples.manifest("ray-service.sample.yaml"))

    def ready() -> bool:
        conds = {c["type"]: c["status"] for c in raybus.get("rayservice", name).get("status", {}).get("conditions", [])}
        return conds.get("Ready") == "True"
    wait_until(ready, "RayService Ready", 900, interval=5)
    ip = wait_until(lambda: raybus.get("service", f"{name}-serve-svc")["spec"]["clusterIP"], "serve Service", 60)
    assert wait_until(lambda: _post(ip, "/fruit", ["MANGO", 2]), "fruit app answers", 120) == "6"
    assert _post(ip, "/calc", ["MUL", 3]) == "15 pizzas please!"
    old = raybus.get("rayservice", name)["status"]["activeServiceStatus"]["rayClusterName"]

    answers: list[str] = []
    failures: list[str] = []
    latencies: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        # 30 s a request: two Ray clusters share two cores during the upgrade, so an answer can be
        # slow; a refused, reset or unanswered request is downtime.
        while not stop.is_set():
            started = time.monotonic()
            try:
                answers.append(_post(ip, "/fruit", ["MANGO", 2], timeout=30))
            except Exception as exc:  # noqa: BLE001 - every failure is a downtime, counted
                failures.append(repr(exc))
            latencies.append(time.monotonic() - started)
            time.sleep(0.2)
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        # A change of the cluster's Pod template: KubeRay's zero-downtime upgrade (a new cluster,
        # the Service switched once its Serve apps are healthy).
        patch = json.dumps([{"op": "add", "path": "/spec/rayClusterConfig/headGroupSpec/template/spec/containers/0/env",
                             "value": [{"name": "UPGRADE", "value": "1"}]}])
        raybus.kubectl("patch", "rayservice", name, "--type=json", "-p", patch)

        def switched() -> bool:
            status = raybus.get("rayservice", name)["status"]
            active = status["activeServiceStatus"].get("rayClusterName")
            return bool(active and active != old and not status.get("pendingServiceStatus", {}).get("rayClusterName"))
        wait_until(switched, "traffic switched to the new cluster", 900, interval=5)
        wait_until(lambda: not ray_pods(raybus, old), "the old cluster's Pods gone", 300)
    finally:
        stop.set()
        poller.join(15)
    print(f"upgrade: {len(answers)} answers, {len(failures)} failures, slowest {max(latencies):.1f} s")
    assert answers and not failures, f"{len(answers)} answers, failures: {failures[:5]}"
    assert set(answers) == {"6"}


def test_autoscaler_scales_up_on_demand_and_down_when_idle(raybus: Node) -> None:
    name = "raycluster-autoscaler"
    raybus.kubectl("apply", "-f", "-", input_=samples.manifest("ray-cluster.autoscaler.yaml"))
    wait_until(lambda: [p for p in ray_pods(raybus, name, "head") if running_ready(p)], "head Ready", 420, interval=3)
    assert not ray_pods(raybus, name, "worker")
    head = ray_pods(raybus, name, "head")[0]["metadata"]["name"]
    # KubeRay's autoscaling walkthrough: a detached actor needing 1 CPU (the head has num-cpus 0).
    raybus.kubectl("exec", head, "-c", "ray-head", "--", "python", "/home/ray/samples/detached_actor.py", "actor1",
                   timeout=120)
    wait_until(lambda: [p for p in ray_pods(raybus, name, "worker") if running_ready(p)],
               "the autoscaler's worker Running", 420, interval=3)
    assert len(ray_pods(raybus, name, "worker")) == 1
    raybus.kubectl("exec", head, "-c", "ray-head", "--", "python", "/home/ray/samples/terminate_detached_actor.py",
                   "actor1", timeout=120)
    # idleTimeoutSeconds: 60 in the sample: the idle worker goes.
    wait_until(lambda: not ray_pods(raybus, name, "worker"), "the idle worker removed", 420, interval=5)
    delete_and_wait(raybus, "raycluster", name, name)
