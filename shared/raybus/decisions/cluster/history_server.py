"""History server collector sidecar (``common/history_server.go``, gate RayClusterHistoryServer).

With ``historyServerOptions.collectorOptions`` every head and worker Pod gets, in BuildPod:
a shared ``/tmp/ray`` volume on the Ray container (the autoscaler's ``ray-logs`` one when present),
a postStart hook writing the raylet node id to ``/tmp/ray/raylet_node_id``, the Ray event export
env vars pointing at the collector (localhost:8084), and the ``collector`` container (default image
``kuberay/collector:latest``, IfNotPresent, 100m/128Mi requests, 200m/256Mi limits, the user's env).

v1.7's CRD has image, imagePullPolicy, resources and env only, so the runtime class argument is
always the default ``s3``. Not reproduced: the collector's auth token wiring for token-auth
clusters (v1.7 release notes; the exact env is not in the source we checked).
"""

from __future__ import annotations

import copy
from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.dicts import ensure_dict, ensure_list
from raybus.decisions.cluster.pod_env import env_var_exists
from raybus.decisions.cluster.pod_parts import add_empty_dir
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.ray_events import EXPORT_ADDR_ENV, ExportSettings, export_env

COLLECTOR_CONTAINER_NAME = "collector"
COLLECTOR_DEFAULT_IMAGE = "kuberay/collector:latest"
DEFAULT_RUNTIME_CLASS = "s3"
EVENTS_PORT = "8084"
EVENTS_EXPORT_ADDR = f"http://localhost:{EVENTS_PORT}/v1/events"
NODE_ID_EXTRACTION_SCRIPT = """
while true; do
  node_id=$(ps -eo args 2>/dev/null | awk '/raylet\\/raylet.*--node_id=/{
    for(i=1;i<=NF;i++){
      if(match($i,/^--node_id=/)){
        print substr($i,RSTART+10)
      }
    }
  }')
  if [ -n "$node_id" ]; then
    echo "$node_id" > /tmp/ray/raylet_node_id
    break
  fi
  sleep 1
done"""


def history_server_enabled(cluster: RayCluster, settings: OperatorSettings) -> bool:
    options = cluster.spec.history_server_options
    return (
        settings.feature_gates.ray_cluster_history_server
        and options is not None
        and options.collector_options is not None
    )


def _env_if_missing(container: dict[str, Any], name: str, value: str) -> None:
    env: list[dict[str, Any]] = ensure_list(container, "env")
    if not env_var_exists(name, env):
        env.append({"name": name, "value": value})


def inject_history_server_collector(
    pod_spec: dict[str, Any], cluster: RayCluster, *, node_type: str, settings: OperatorSettings
) -> None:
    """InjectHistoryServerCollector (no-op unless enabled)."""
    if not history_server_enabled(cluster, settings):
        return
    options = cluster.spec.history_server_options
    assert options is not None and options.collector_options is not None
    collector = options.collector_options
    ray: dict[str, Any] = pod_spec["containers"][k.RAY_CONTAINER_INDEX]
    add_empty_dir(ray, pod_spec, name=k.RAY_LOG_VOLUME_NAME, path=k.RAY_LOG_VOLUME_MOUNT_PATH, medium="")
    shared = next(
        (m.get("name") for m in ray.get("volumeMounts") or [] if m.get("mountPath") == k.RAY_LOG_VOLUME_MOUNT_PATH),
        None,
    )
    if not shared:
        return  # KubeRay logs "Unable to resolve shared volume name" and skips the injection
    lifecycle: dict[str, Any] = ensure_dict(ray, "lifecycle")
    if not lifecycle.get("postStart"):
        lifecycle["postStart"] = {"exec": {"command": ["/bin/sh", "-c", NODE_ID_EXTRACTION_SCRIPT]}}
    _env_if_missing(ray, "RAY_enable_ray_event", "true")
    _env_if_missing(ray, "RAY_enable_core_worker_ray_event_to_aggregator", "true")
    _env_if_missing(ray, "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR", EVENTS_EXPORT_ADDR)
    role = "Head" if node_type == k.HEAD_NODE else "Worker"
    container: dict[str, Any] = {
        "name": COLLECTOR_CONTAINER_NAME,
        "image": collector.image or COLLECTOR_DEFAULT_IMAGE,
        "imagePullPolicy": collector.image_pull_policy or "IfNotPresent",
        "command": ["collector"],
        "args": [
            f"--role={role}",
            f"--runtime-class-name={DEFAULT_RUNTIME_CLASS}",
            f"--ray-cluster-name={cluster.name}",
            f"--ray-cluster-namespace={cluster.namespace}",
            f"--ray-root-dir={k.RAY_LOG_VOLUME_MOUNT_PATH}",
            f"--events-port={EVENTS_PORT}",
        ],
        "volumeMounts": [{"name": shared, "mountPath": k.RAY_LOG_VOLUME_MOUNT_PATH}],
        "resources": copy.deepcopy(dict(collector.resources))
        if collector.resources is not None
        else {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}},
    }
    if collector.env:
        container["env"] = [copy.deepcopy(dict(e)) for e in collector.env]
    pod_spec["containers"].append(container)


def inject_ray_events_export(ray: dict[str, Any], settings: ExportSettings, *, namespace: str, cluster: str,
                             uid: str) -> None:
    """raybus's job-end push (not KubeRay's): the export env on the head's Ray container, unless an
    export address is already there (the user's, or the collector's injected just before)."""
    env: list[dict[str, Any]] = ray.get("env") or []
    if not settings.enabled or env_var_exists(EXPORT_ADDR_ENV, env):
        return
    for var in export_env(settings, namespace=namespace, cluster=cluster, uid=uid):
        _env_if_missing(ray, var["name"], var["value"])
