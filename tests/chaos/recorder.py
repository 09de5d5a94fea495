"""The soak's recorder: a watch of every ray Pod for the whole run (listed first, then watched
from that resourceVersion, so a Pod created and deleted between two reads is still seen), and the
invariants that can only be checked from such a recording."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from raybus.adapters.kube import KubeClient, Resource, resource_for

POD = resource_for("v1", "Pod")
RC = resource_for("ray.io/v1", "RayCluster")
NS = "default"


@dataclass
class Violation:
    invariant: str
    evidence: str


@dataclass
class PodRecorder:
    client: KubeClient
    prefix: str
    # cluster -> live head Pod names (created, not yet deleting); any moment with two is a breach
    live_heads: dict[str, set[str]] = field(default_factory=dict)
    created: dict[str, set[str]] = field(default_factory=dict)
    heads_created: dict[str, set[str]] = field(default_factory=dict)
    pod_uids: dict[str, set[str]] = field(default_factory=dict)  # Pod name -> uids ever ADDED
    # head Pod -> the resourceVersion it was first seen with (its create's, when watched); the
    # API server's resourceVersion is one global counter (etcd's revision), so comparing it with
    # the RayCluster's deletion orders the two exactly, whatever order the watches deliver them.
    head_rv: dict[str, int] = field(default_factory=dict)
    cluster_deleted_rv: dict[str, int] = field(default_factory=dict)
    events: int = 0
    watch_breaks: int = 0
    violations: list[Violation] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    _rc_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        rv = await self._relist(POD)
        self._task = asyncio.create_task(self._run(POD, rv))
        self._rc_task = asyncio.create_task(self._run(RC, await self._relist(RC)))

    async def _relist(self, res: Resource) -> str:
        """List (at start, and after a watch broke: the API server restarted, or 410 Gone), then
        watch on from the list's version; the live heads are what the list shows."""
        if res is RC:
            _, rv = await self.client.list_all(RC, namespace=NS)
            return str(rv)  # (a RayCluster deleted during the break: its heads count as before)
        items, rv = await self.client.list_all(POD, namespace=NS, label_selector="ray.io/cluster")
        self.live_heads = {}
        for item in items:
            self._record("ADDED", item.get("metadata") or {})
        return str(rv)

    async def _run(self, res: Resource, rv: str) -> None:
        selector = "ray.io/cluster" if res is POD else None
        while True:
            try:
                async for event in self.client.watch(res, resource_version=rv, namespace=NS,
                                                     label_selector=selector, timeout_s=300):
                    meta = event.object.get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv)
                    if event.type == "BOOKMARK":
                        continue
                    if res is POD:
                        self._record(event.type, meta)
                    elif event.type == "DELETED" and str(meta.get("name", "")).startswith(self.prefix):
                        self.cluster_deleted_rv[str(meta["name"])] = int(rv)
                continue  # the server ended this watch (timeout): go on from rv
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the API server is down or restarted (a fault)
                self.watch_breaks += 1
            while True:
                await asyncio.sleep(0.2)
                try:
                    rv = await self._relist(res)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001, S112 - still down
                    continue

    def _record(self, kind: str, meta: dict[str, Any]) -> None:
        labels = meta.get("labels") or {}
        cluster = labels.get("ray.io/cluster", "")
        if not cluster.startswith(self.prefix):
            return
        self.events += 1
        name = meta.get("name", "")
        if kind == "ADDED":
            self.created.setdefault(cluster, set()).add(name)
            self.pod_uids.setdefault(name, set()).add(str(meta.get("uid")))  # checks_ray: the ledger
        if labels.get("ray.io/node-type") != "head":
            return
        if kind == "ADDED":
            self.heads_created.setdefault(cluster, set()).add(name)
            self.head_rv.setdefault(name, int(meta.get("resourceVersion") or 0))
        heads = self.live_heads.setdefault(cluster, set())
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            heads.discard(name)
        elif kind in ("ADDED", "MODIFIED"):
            heads.add(name)
            if len(heads) > 1:
                self.violations.append(Violation(
                    "never two head Pods of one cluster",
                    f"{time.strftime('%H:%M:%S')} {cluster}: live heads {sorted(heads)}"))

    def duplicate_heads(self) -> list[Violation]:
        """The soak never deletes a head Pod, and no fault removes one (the simulated kubelet keeps
        Pods across API server restarts): a second head created while its RayCluster still
        existed can only be a create applied twice (a batch redelivered past the ledger) or a
        decision on a cache missing the first head."""
        out = []
        for cluster, names in self.heads_created.items():
            alive = sorted(n for n in names if not self._after_delete(cluster, n))
            if len(alive) > 1:
                out.append(Violation("no batch applied twice (one head Pod created per cluster while it exists)",
                                     f"{cluster}: {alive}"))
        return out

    def heads_after_delete(self) -> dict[str, list[str]]:
        """Heads created after their RayCluster was deleted (the GC removes them): KubeRay's
        informer lags a deletion too, so one such head can happen; more means the reconciler
        kept deciding on a RayCluster it should have seen go (the watcher's RayCluster stream
        stuck behind its Pod stream: the seed-7 bug)."""
        out: dict[str, list[str]] = {}
        for cluster, names in self.heads_created.items():
            late = sorted(n for n in names if self._after_delete(cluster, n))
            if late:
                out[cluster] = late
        return out

    def _after_delete(self, cluster: str, head: str) -> bool:
        deleted = self.cluster_deleted_rv.get(cluster)
        return deleted is not None and self.head_rv.get(head, 0) > deleted

    async def stop(self) -> None:
        for task in (self._task, self._rc_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
