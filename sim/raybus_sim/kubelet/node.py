"""One simulated node as a unit: its API client and caches, the Node object and its Lease, the
kubelet, and optionally the simulated Ray dashboards following its head Pods. `raybus_sim` runs one
against its own local API server (in-process, over HTTP) or against a real kube-apiserver
(`--apiserver-kubeconfig`)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from aiohttp import web

from raybus.adapters.kube import KubeError
from raybus_sim.apiserver.defaults import now_rfc3339
from raybus_sim.dashboard import DashboardRegistry
from raybus_sim.heads import HeadDashboardSync

from .client import LEASE_S, ClusterView, Obj
from .kubelet import Kubelet, KubeletConfig

log = logging.getLogger(__name__)
# The kubelet's fault API (faults.py) under /sim/ on the dashboards' port, next to
# /sim/dashboards/..., so tests reach it the same way whichever API server the node serves.
FAULT_ROUTE = "/sim/{what:pods|readiness-holds|image-pull-failures|delays}{tail:.*}"
CAPACITY = {"cpu": "1000", "memory": "4000Gi", "pods": "10000", "nvidia.com/gpu": "100",
            "ephemeral-storage": "10000Gi"}


def _micro_now() -> str:
    """A Lease's renewTime is a MicroTime."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_status(config: KubeletConfig) -> Obj:
    now = now_rfc3339()
    return {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}],
        "addresses": [{"type": "InternalIP", "address": config.host_ip},
                      {"type": "Hostname", "address": config.node_name}],
        "capacity": CAPACITY, "allocatable": CAPACITY,
        "nodeInfo": {"kubeletVersion": "v1.32.0", "kubeProxyVersion": "v1.32.0", "operatingSystem": "linux",
                     "architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.0",
                     "osImage": "raybus-sim", "kernelVersion": "6.0.0", "machineID": "", "systemUUID": "",
                     "bootID": ""}}


class SimNode:
    def __init__(self, api: ClusterView, config: KubeletConfig) -> None:
        self.api = api
        self.config = config
        self.kubelet = Kubelet(api, config)
        self._heartbeat: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, api: ClusterView, config: KubeletConfig | None = None) -> SimNode:
        node = cls(api, config or KubeletConfig())
        await api.start()
        await node._register()
        await node.kubelet.start()
        return node

    async def _register(self) -> None:
        """Like a kubelet registering itself: one Ready node, so `kubectl get nodes` looks normal,
        and its Lease renewed (a node lifecycle controller marks a silent node NotReady)."""
        name = self.config.node_name
        await self.api.register_node(name, {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                     "kubernetes.io/arch": "amd64", "node-role.kubernetes.io/control-plane": ""}},
            "spec": {}}, node_status(self.config))
        uid = await self.api.node_uid(name)
        await self.api.renew_lease(name, uid, _micro_now())
        self._heartbeat = asyncio.get_running_loop().create_task(self._renew(name, uid))

    async def _renew(self, name: str, uid: str) -> None:
        while True:
            await asyncio.sleep(LEASE_S / 4)
            try:
                await self.api.renew_lease(name, uid, _micro_now())
            except KubeError as err:
                log.warning("node lease renewal failed: %s", err)

    async def stop(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
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
