"""One simulated node as a unit: its API client and caches, the kubelet, and optionally the
simulated Ray dashboards following its head Pods. `raybus_sim` runs one against its own local API
server (in-process, over HTTP) or against a real kube-apiserver (`--apiserver-kubeconfig`)."""

from __future__ import annotations

from aiohttp import web

from raybus_sim.dashboard import DashboardRegistry
from raybus_sim.heads import HeadDashboardSync

from .client import ClusterView
from .kubelet import Kubelet, KubeletConfig

# The kubelet's fault API (faults.py) under /sim/ on the dashboards' port, next to
# /sim/dashboards/..., so tests reach it the same way whichever API server the node serves.
FAULT_ROUTE = "/sim/{what:pods|readiness-holds|image-pull-failures|delays}{tail:.*}"


class SimNode:
    def __init__(self, api: ClusterView, config: KubeletConfig) -> None:
        self.api = api
        self.kubelet = Kubelet(api, config)

    @classmethod
    async def start(cls, api: ClusterView, config: KubeletConfig | None = None) -> SimNode:
        node = cls(api, config or KubeletConfig())
        await api.start()
        await node.kubelet.start()
        return node

    async def stop(self) -> None:
        await self.kubelet.stop()
        await self.api.stop()

    def attach_dashboards(self, registry: DashboardRegistry) -> None:
        """Dashboards answer while their head Pod is ready; submitter containers call them."""
        self.api.pods.subscribe(HeadDashboardSync(registry))
        self.kubelet.programs.attach(registry)

    def add_fault_routes(self, app: web.Application) -> None:
        async def handle(request: web.Request) -> web.StreamResponse:
            segs = [s for s in request.path.split("/")[2:] if s]
            return await self.kubelet.handle_http(request, segs)

        app.router.add_route("*", FAULT_ROUTE, handle)
