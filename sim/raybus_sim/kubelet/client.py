"""The simulated node's only way to the cluster: a Kubernetes API client (kubernetes-asyncio through
raybus's KubeClient) with list+watch caches, like kwok's nodes. The same code drives raybus's local
API server (in-process, over its own HTTP endpoint) and a real kube-apiserver.

What a kubelet (and the scheduler part it plays) does over the API, and nothing else:
- reads: Pods (every namespace; a pod bound to another node is ignored), and the Services,
  Secrets and ConfigMaps its containers reference (informer caches, events to listeners);
- writes: the Node and its Lease, `pods/binding` (spec.nodeName, as a scheduler), `pods/status`
  (a JSON patch that tests the Pod's uid, so a write never lands on a same-named successor), and
  the final `DELETE gracePeriodSeconds=0` of a gracefully deleted Pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client as kclient

from raybus.adapters.kube import KubeClient, KubeError, Resource, new_api_client, no_env_lookups

log = logging.getLogger(__name__)
Obj = dict[str, Any]

POD = Resource(group="", version="v1", plural="pods", kind="Pod", namespaced=True)
SERVICE = Resource(group="", version="v1", plural="services", kind="Service", namespaced=True)
SECRET = Resource(group="", version="v1", plural="secrets", kind="Secret", namespaced=True)
CONFIGMAP = Resource(group="", version="v1", plural="configmaps", kind="ConfigMap", namespaced=True)
NODE = Resource(group="", version="v1", plural="nodes", kind="Node", namespaced=False)
LEASE = Resource(group="coordination.k8s.io", version="v1", plural="leases", kind="Lease", namespaced=True)
LEASE_NS = "kube-node-lease"
# Pod writes in flight at once (the client's pool holds 100 connections, four of them the
# informers' watches): a write waits here, not in the pool, where the request timeout runs.
WRITES_IN_FLIGHT = 32
LEASE_S = 40  # the kubelet's default node lease duration; renewed every quarter of it


class WriteSlots:
    """WRITES_IN_FLIGHT Pod writes at once, handed out oldest Pod first (lowest `order`).

    Each Pod here is a task stepping through bind, admitted, sandbox, init, started and ready,
    one write per step. With a plain FIFO semaphore every step of every Pod queues behind every
    other's: while writes are wanted faster than one process serves them (1,000 clusters applied
    at once, on the same two cores as the operator under test), all Pods advance in lock step
    and none turns Ready until the last one is created. Real kubelets on many nodes start each
    Pod in seconds whatever else the cluster does; serving the oldest Pod first keeps that per-Pod
    latency, and the Pods and their clusters turn Ready in the order they were created.
    """

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._tiebreak = itertools.count()

    @contextlib.asynccontextmanager
    async def slot(self, order: int) -> AsyncIterator[None]:
        if self._free > 0 and not self._waiting:
            self._free -= 1
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (order, next(self._tiebreak), future))
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._release()  # handed a slot just as it was cancelled: pass it on
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            _, _, future = heapq.heappop(self._waiting)
            if not future.done():  # a cancelled waiter stays in the heap until popped here
                future.set_result(None)
                return
        self._free += 1


@dataclass(frozen=True)
class ObjEvent:
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    old: Obj | None


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Informer:
    """list+watch of one kind into a dict; every change goes to the listeners (synchronous: they
    only schedule work), a relist after a broken or expired watch included."""

    def __init__(self, client: KubeClient, res: Resource) -> None:
        self._client = client
        self._res = res
        self.items: dict[tuple[str, str], Obj] = {}
        self.listeners: list[Callable[[ObjEvent], None]] = []
        self.synced = asyncio.Event()

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.items.get((namespace if self._res.namespaced else "", name))

    def objects(self) -> list[Obj]:
        return list(self.items.values())

    def subscribe(self, listener: Callable[[ObjEvent], None]) -> None:
        """Listen from now on, after an ADDED for every object already known."""
        self.listeners.append(listener)
        for obj in list(self.items.values()):
            listener(ObjEvent("ADDED", obj, None))

    def _emit(self, etype: str, obj: Obj, old: Obj | None) -> None:
        for listener in list(self.listeners):
            try:
                listener(ObjEvent(etype, obj, old))
            except Exception:  # one broken listener must not stop the cache
                log.exception("informer listener failed")

    def _apply(self, etype: str, obj: Obj) -> None:
        key = _key(obj)
        old = self.items.get(key)
        if etype == "DELETED":
            self.items.pop(key, None)
        else:
            self.items[key] = obj
        self._emit(etype if etype != "ADDED" or old is None else "MODIFIED", obj, old)

    def _replace(self, items: list[Obj]) -> None:
        fresh = {_key(o): o for o in items}
        for key, gone in list(self.items.items()):
            if key not in fresh:
                self.items.pop(key)
                self._emit("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = self.items.get(key)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if old is None or (old.get("metadata") or {}).get("resourceVersion") != rv:
                self.items[key] = obj
                self._emit("ADDED" if old is None else "MODIFIED", obj, old)

    async def run(self) -> None:
        while True:
            try:
                items, rv = await self._client.list_all(self._res)
                self._replace(items)
                self.synced.set()
                while True:  # re-watch from the last version; a 410 relists
                    async for event in self._client.watch(self._res, resource_version=rv, timeout_s=290):
                        rv = str((event.object.get("metadata") or {}).get("resourceVersion") or rv)
                        if event.type != "BOOKMARK":
                            self._apply(event.type, event.object)
            except KubeError as err:
                if not err.gone:
                    log.debug("watch %s: %s", self._res.plural, err)
                    await asyncio.sleep(0.2)


def api_client_for(url: str, token: str) -> kclient.ApiClient:
    """A client for a plain-HTTP API server (the local one) with a bearer token."""
    cfg = kclient.Configuration(host=url)
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    api = kclient.ApiClient(cfg)
    no_env_lookups(api)
    return api


class ClusterView:
    """The node's client and caches."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.pods = Informer(client, POD)
        self.services = Informer(client, SERVICE)
        self.secrets = Informer(client, SECRET)
        self.configmaps = Informer(client, CONFIGMAP)
        self._tasks: list[asyncio.Task[None]] = []
        self._writes = WriteSlots(WRITES_IN_FLIGHT)

    @classmethod
    async def from_kubeconfig(cls, path: str) -> ClusterView:
        return cls(KubeClient(await new_api_client(path)))

    @classmethod
    def from_url(cls, url: str, token: str) -> ClusterView:
        return cls(KubeClient(api_client_for(url, token)))

    def informers(self) -> list[Informer]:
        return [self.pods, self.services, self.secrets, self.configmaps]

    async def start(self, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(i.run()) for i in self.informers()]
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers())), timeout)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.close()

    def find(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A Secret / ConfigMap / Service from the caches (configrefs.py, submitter.py)."""
        informer = {"secret": self.secrets, "configmap": self.configmaps, "service": self.services}[kind]
        return informer.get(namespace, name)

    # --- writes ----------------------------------------------------------------------------------
    async def _retrying(self, method: str, path: str, *, body: object, order: int,
                        content_type: str = "application/json") -> None:
        """A Pod write retried while the failure is transient (a timeout, 429, 5xx), as the kubelet's
        status manager and the scheduler's binding cycle retry: a busy API server (1,000 clusters
        applied at once) must slow the node down, not leave Pods stuck half-started forever.
        Bounded in flight, so queued writes wait here rather than time out in the connection pool."""
        delay = 0.1
        while True:
            try:
                async with self._writes.slot(order):
                    await self.client.request(method, path, body=body, content_type=content_type)
                return
            except KubeError as err:
                if not err.transient:
                    raise
                log.debug("%s %s: %s; retrying", method, path, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def bind(self, namespace: str, name: str, uid: str, node: str, *, order: int = 0) -> bool:
        """The scheduler's pods/binding: spec.nodeName (and PodScheduled) for this incarnation."""
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            await self._retrying("POST", POD.path(namespace=namespace, name=name, subresource="binding"),
                                 body=body, order=order)
        except KubeError as err:
            log.debug("bind %s/%s: %s", namespace, name, err)
            return False
        return True

    async def write_pod_status(self, namespace: str, name: str, uid: str, status: Obj, *,
                               order: int = 0) -> bool:
        """The whole status, only onto the Pod with this uid; False when it is gone or replaced."""
        ops = [{"op": "test", "path": "/metadata/uid", "value": uid},
               {"op": "add", "path": "/status", "value": status}]
        try:
            await self._retrying("PATCH", POD.path(namespace=namespace, name=name, subresource="status"),
                                 body=ops, order=order, content_type="application/json-patch+json")
        except KubeError as err:
            if not err.not_found:
                log.warning("pod status %s/%s: %s %s", namespace, name, err.code, err)
            return False
        return True

    async def delete_pod(self, namespace: str, name: str, *, uid: str | None = None,
                         grace_s: int | None = None) -> None:
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_s is not None:
            body["gracePeriodSeconds"] = grace_s
        await self.client.request("DELETE", POD.path(namespace=namespace, name=name), body=body)

    async def register_node(self, name: str, node: Obj, status: Obj) -> None:
        with contextlib.suppress(KubeError):  # 409: registered by an earlier run
            await self.client.create(NODE, node, namespace=None)
        await self.client.request("PATCH", NODE.path(name=name, subresource="status"), body={"status": status},
                                  content_type="application/merge-patch+json")

    async def renew_lease(self, node: str, node_uid: str, now: str) -> None:
        """The node's heartbeat (kube-node-lease/<node>), so a node lifecycle controller keeps it Ready."""
        spec = {"holderIdentity": node, "leaseDurationSeconds": LEASE_S, "renewTime": now}
        try:
            await self.client.merge_patch(LEASE, namespace=LEASE_NS, name=node, patch={"spec": spec})
        except KubeError as err:
            if not err.not_found:
                raise
            await self.client.create(LEASE, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
                "name": node, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                   "uid": node_uid}]}, "spec": spec}, namespace=LEASE_NS)

    async def node_uid(self, name: str) -> str:
        return str(((await self.client.get(NODE, namespace=None, name=name)).get("metadata") or {}).get("uid") or "")
