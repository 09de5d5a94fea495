"""The RayService state KubeRay keeps in process memory, kept in Redis instead (one document each
per RayService, written only by the replica holding its partition):

- `raybus:serve-config:<ns>/<rayservice>` = {"clusters": {<cluster>: ServeConfigCacheEntry},
  "inflight": [{"id": <dashboard command id>, "command": PutServeConfig}]}: KubeRay's ServeConfigs
  LRU (what each RayCluster was last given), plus the dashboard commands published in the last
  step, so a restarted or second replica still pairs their results with them (the decision caches
  a config only once the dashboard accepted it) instead of submitting again;
- `raybus:deletion-ts:<ns>/<rayservice>` = {<cluster>: RFC 3339 deadline}: KubeRay's
  RayClusterDeletionTimestamps of dangling clusters. A deadline is set once and never moved, so a
  restart can make the old cluster go neither early nor never.

Both are written before the step that relies on them is published (a crash in between leaves
state describing a step that never happened, which the next decision recomputes identically).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from raybus.adapters.redis_state import DELETION_TIMESTAMPS, SERVE_CONFIG, StateStore
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.dashboard_contract import DashboardCommand
from raybus.decisions.rayservice.model import ServeConfigCacheEntry, ServiceDecision


class InflightCommand(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    command: DashboardCommand


class ServiceState(BaseModel):
    model_config = ConfigDict(frozen=True)

    serve_configs: dict[str, ServeConfigCacheEntry] = Field(default_factory=dict)
    inflight: list[InflightCommand] = Field(default_factory=list)
    deadlines: dict[str, datetime] = Field(default_factory=dict)

    def after(self, decision: ServiceDecision, *, command_ids: list[str]) -> ServiceState:
        """The state once `decision` is published with these dashboard command ids."""
        configs = dict(self.serve_configs)
        for cluster, entry in decision.serve_config_cache.items():
            if entry is None:
                configs.pop(cluster, None)
            else:
                configs[cluster] = entry
        return ServiceState(serve_configs=configs, deadlines=merge_deadlines(self.deadlines, decision.deletion_deadlines),
                            inflight=[InflightCommand(id=i, command=c)
                                      for i, c in zip(command_ids, decision.dashboard_commands, strict=True)])


def merge_deadlines(stored: dict[str, datetime], updates: dict[str, datetime | None]) -> dict[str, datetime]:
    """None forgets a cluster's deadline (the cluster is gone); a new one is only ever added: a
    deadline already stored is never moved, whatever a later decision computed."""
    out = dict(stored)
    for cluster, deadline in updates.items():
        if deadline is None:
            out.pop(cluster, None)
        else:
            out.setdefault(cluster, deadline)
    return out


def _serve_doc(state: ServiceState) -> dict[str, Any]:
    return {"clusters": {k: v.model_dump(mode="json") for k, v in state.serve_configs.items()},
            "inflight": [x.model_dump(mode="json") for x in state.inflight]}


class ServiceStateStore:
    def __init__(self, store: StateStore) -> None:
        self._store = store

    async def load(self, key: ObjectKey) -> ServiceState:
        serve = await self._store.load(SERVE_CONFIG, namespace=key.namespace, name=key.name) or {}
        deadlines = await self._store.load(DELETION_TIMESTAMPS, namespace=key.namespace, name=key.name) or {}
        try:
            return ServiceState.model_validate({"serve_configs": serve.get("clusters") or {},
                                                "inflight": serve.get("inflight") or [], "deadlines": deadlines})
        except ValidationError:
            # Written by another version: keep the deadlines if they parse (losing one would make a
            # dangling cluster live a whole delay more), drop the rest (the cache only saves a PUT).
            try:
                return ServiceState(deadlines=ServiceState.model_validate({"deadlines": deadlines}).deadlines)
            except ValidationError:
                return ServiceState()

    async def save(self, key: ObjectKey, old: ServiceState, new: ServiceState) -> None:
        """Write what changed (no Redis write for a steady RayService)."""
        if (new.serve_configs, new.inflight) != (old.serve_configs, old.inflight):
            if new.serve_configs or new.inflight:
                await self._store.save(SERVE_CONFIG, namespace=key.namespace, name=key.name, value=_serve_doc(new))
            else:
                await self._store.delete(SERVE_CONFIG, namespace=key.namespace, name=key.name)
        if new.deadlines != old.deadlines:
            if new.deadlines:
                await self._store.save(DELETION_TIMESTAMPS, namespace=key.namespace, name=key.name,
                                       value={k: v.isoformat() for k, v in new.deadlines.items()})
            else:
                await self._store.delete(DELETION_TIMESTAMPS, namespace=key.namespace, name=key.name)

    async def delete(self, key: ObjectKey) -> None:
        """The RayService is gone: nothing of it is kept."""
        await self._store.delete(SERVE_CONFIG, namespace=key.namespace, name=key.name)
        await self._store.delete(DELETION_TIMESTAMPS, namespace=key.namespace, name=key.name)
