"""What the RayService needs the dashboard gateway to observe (KubeRay polls inline every 2 s).

Per cluster: the head's Serve proxy health (updateHeadPodServeLabel, active and pending heads) and,
for the clusters reconcileServe looks at, the Serve applications. One ``DashboardInterest`` per
cluster; the list is the RayService's whole level state.
"""

from __future__ import annotations

from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.api.rayservice import RayService
from raybus.decisions.dashboard_contract import DashboardInterest
from raybus.decisions.rayservice.model import ServeConfigCacheEntry
from raybus.decisions.rayservice.services import serving_port

Json = dict[str, Any]


def cluster_interest(service: RayService, cluster: RayCluster, head_pods: list[Json], *, serve: bool,
                     expect_change: bool, cached: ServeConfigCacheEntry | None) -> DashboardInterest | None:
    """None when there is nothing to observe for this cluster."""
    proxy_pods: dict[str, str] = {}
    port = 8000
    if len(head_pods) == 1:
        pod = head_pods[0]
        port = serving_port(pod)
        ip = (pod.get("status") or {}).get("podIP")
        name = (pod.get("metadata") or {}).get("name")
        if ip and name and not service.spec.exclude_head_pod_from_serve_svc:
            proxy_pods[str(name)] = str(ip)
    if not serve and not proxy_pods:
        return None
    # A new token after every accepted submit: the poller reads the cluster at once.
    token = ""
    if serve and cached is not None and cached.submitted_at is not None:
        token = f"{cached.config_hash}@{cached.submitted_at.isoformat()}"
    return DashboardInterest(cluster=cluster.name, serve=serve, proxy_pods=proxy_pods, proxy_port=port,
                             expect_change=expect_change, poll_now=token)
