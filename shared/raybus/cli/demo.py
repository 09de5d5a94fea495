"""`raybus up --demo`: apply the sample RayCluster and follow it until it is ready."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client, config

SAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "samples" / "ray-cluster.sample.yaml"


def follow_sample(*, kubeconfig: Path, timeout_s: float = 120.0) -> bool:
    return asyncio.run(_follow(kubeconfig=kubeconfig, timeout_s=timeout_s))


def _pod_line(pod: Any) -> str:
    ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
    return f"{pod.metadata.name}:{pod.status.phase}{'/Ready' if ready else ''}"


async def _follow(*, kubeconfig: Path, timeout_s: float) -> bool:
    await config.load_kube_config(config_file=str(kubeconfig))
    async with client.ApiClient() as api:
        custom = client.CustomObjectsApi(api)
        core = client.CoreV1Api(api)
        doc: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
        name = doc["metadata"]["name"]
        ns = doc["metadata"].get("namespace", "default")
        try:
            await custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", doc)
            print(f"demo: applied RayCluster {ns}/{name} from {SAMPLE.name}", flush=True)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            print(f"demo: RayCluster {ns}/{name} already exists", flush=True)
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            rc = await custom.get_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", name)
            status = rc.get("status") or {}
            pods = await core.list_namespaced_pod(ns, label_selector=f"ray.io/cluster={name}")
            line = (f"state={status.get('state', '-')} ready_workers="
                    f"{status.get('readyWorkerReplicas', 0)}/{status.get('desiredWorkerReplicas', '?')} "
                    f"pods=[{', '.join(sorted(_pod_line(p) for p in pods.items))}]")
            if line != last:
                print(f"demo: {line}", flush=True)
                last = line
            if status.get("state") == "ready":
                print(f"demo: RayCluster {ns}/{name} is ready "
                      f"(head {status.get('head', {}).get('podName', '?')})", flush=True)
                return True
            await asyncio.sleep(0.5)
        print(f"demo: RayCluster {ns}/{name} not ready after {timeout_s:.0f}s", flush=True)
        return False
