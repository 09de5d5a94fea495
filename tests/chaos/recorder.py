"""The soak's recorder: a watch of every ray Pod for the whole run (listed first, then watched
from that resourceVersion, so a Pod created and deleted between two reads is still seen), and the
invariants that can only be checked from such a recording."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from raybus.adapters.kube import KubeClient, resource_for

POD = resource_for("v1", "Pod")
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
    events: int = 0
    watch_breaks: int = 0
    violations: list[Violation] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        rv = await self._relist()
        self._task = asyncio.create_task(self._run(rv))

    async def _relist(self) -> str:
        """List (at start, and after a watch broke: the API server restarted, or 410 Gone), then
        watch on from the list's version; the live heads are what the list shows."""
        items, rv = await self.client.list_all(POD, namespace=NS, label_selector="ray.io/cluster")
        self.live_heads = {}
        for item in items:
            self._record("ADDED", item.get("metadata") or {})
        return str(rv)

    async def _run(self, rv: str) -> None:
        while True:
            try:
                async for event in self.client.watch(POD, resource_version=rv, namespace=NS,
                                                     label_selector="ray.io/cluster", timeout_s=300):
                    meta = event.object.get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv)
                    if event.type != "BOOKMARK":
                        self._record(event.type, meta)
                continue  # the server ended this watch (timeout): go on from rv
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the API server is down or restarted (a fault)
                self.watch_breaks += 1
            while True:
                await asyncio.sleep(0.2)
                try:
                    rv = await self._relist()
                    break
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - still down
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
        if labels.get("ray.io/node-type") != "head":
            return
        if kind == "ADDED":
            self.heads_created.setdefault(cluster, set()).add(name)
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
        Pods across API server restarts): a second head ever created for one cluster can only be a
        create applied twice (a batch redelivered past the ledger)."""
        return [Violation("no batch applied twice (one head Pod ever created per cluster)",
                          f"{cluster}: {sorted(names)}")
                for cluster, names in self.heads_created.items() if len(names) > 1]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
