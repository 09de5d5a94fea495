"""What the RayService e2e tests look at, as a user would with kubectl (plus the simulator's
dashboard counters): RayService status, its RayClusters' lifetimes, serve Service endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raybus.adapters.kube import KubeClient, KubeError, resource_for
from tests.integration.e2e.conftest import EVENT, NS, RC, Kube, WatchRecorder

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "deploy/samples/ray-service.sample.yaml"
RS = resource_for("ray.io/v1", "RayService")
SVC = resource_for("v1", "Service")
SLICE = resource_for("discovery.k8s.io/v1", "EndpointSlice")
Json = dict[str, Any]


def rayservice_doc(path: Path, name: str) -> Json:
    doc = next(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == "RayService")
    doc = copy.deepcopy(doc)
    doc["metadata"] = {**(doc.get("metadata") or {}), "name": name, "namespace": NS}
    return doc


def condition(rs: Json, type_: str) -> Json:
    return next((c for c in (rs.get("status") or {}).get("conditions") or [] if c.get("type") == type_), {})


def active_name(rs: Json) -> str:
    return str(((rs.get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName") or "")


def pending_name(rs: Json) -> str:
    return str(((rs.get("status") or {}).get("pendingServiceStatus") or {}).get("rayClusterName") or "")


def app_statuses(rs: Json) -> dict[str, str]:
    apps = ((rs.get("status") or {}).get("activeServiceStatus") or {}).get("applicationStatuses") or {}
    return {name: str(app.get("status")) for name, app in apps.items()}


def is_ready(rs: Json) -> bool:
    status = rs.get("status") or {}
    apps = app_statuses(rs)
    return (condition(rs, "Ready").get("status") == "True" and status.get("serviceStatus") == "Running"
            and int(status.get("numServeEndpoints") or 0) >= 1 and bool(apps)
            and all(s == "RUNNING" for s in apps.values()))


class Services:
    """RayService reads and writes over the Kubernetes API."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.c: KubeClient = kube.c
        self.created: set[str] = set()

    async def apply(self, doc: Json) -> Json:
        self.created.add(doc["metadata"]["name"])
        return await self.c.create(RS, doc, namespace=NS)

    async def get(self, name: str) -> Json:
        return await self.c.get(RS, namespace=NS, name=name)

    async def patch(self, name: str, patch: Json) -> Json:
        return await self.c.merge_patch(RS, namespace=NS, name=name, patch=patch)

    async def set_head_env(self, name: str, env_name: str, value: str) -> None:
        rs = await self.get(name)
        head = rs["spec"]["rayClusterConfig"]["headGroupSpec"]
        container = head["template"]["spec"]["containers"][0]
        container["env"] = [e for e in container.get("env") or [] if e.get("name") != env_name] + [
            {"name": env_name, "value": value}]
        await self.patch(name, {"spec": {"rayClusterConfig": {"headGroupSpec": head}}})

    async def wait(self, name: str, check: Any, *, timeout: float, what: str) -> Json:
        async def ok() -> bool:
            return bool(check(await self.get(name)))
        try:
            await self.kube.eventually(ok, timeout=timeout, what=f"{name}: {what}")
        except AssertionError as exc:  # say what the RayService looked like, and what raybus said
            rs = await self.get(name)
            events, _ = await self.c.list_all(EVENT, namespace=NS)
            said = [f"{e.get('reason')}: {e.get('message') or e.get('note')}" for e in events
                    if (e.get("involvedObject") or e.get("regarding") or {}).get("name") == name]
            raise AssertionError(f"{exc}\nstatus: {rs.get('status')}\nevents: {said}") from None
        return await self.get(name)

    async def wait_ready(self, name: str, *, timeout: float = 60.0) -> Json:
        return await self.wait(name, is_ready, timeout=timeout, what="Ready")

    async def clusters(self, name: str) -> list[str]:
        items, _ = await self.c.list_all(RC, namespace=NS, label_selector=f"ray.io/originated-from-cr-name={name}")
        return sorted(x["metadata"]["name"] for x in items if not x["metadata"].get("deletionTimestamp"))

    async def service(self, name: str) -> Json:
        return await self.c.get(SVC, namespace=NS, name=name)

    async def ready_endpoints(self, service: str) -> int:
        items, _ = await self.c.list_all(SLICE, namespace=NS, label_selector=f"kubernetes.io/service-name={service}")
        return len({(e.get("targetRef") or {}).get("uid") for s in items for e in s.get("endpoints") or []
                    if (e.get("conditions") or {}).get("ready") is True})

    async def head(self, cluster: str) -> Json:
        heads = await self.kube.pods(cluster, node_type="head")
        assert len(heads) == 1, [p["metadata"]["name"] for p in heads]
        return heads[0]

    async def serve_events(self, name: str) -> int:
        return await self.kube.event_count(name, "UpdatedServeApplications")

    async def holds_for(self, seconds: float, check: Any, *, what: str) -> None:
        """`check` stays true throughout (sampled every 0.2 s): for "exactly once" claims."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert await check(), what
            await asyncio.sleep(0.2)


@dataclass
class ClusterLife:
    created: float | None = None
    deleted: float | None = None  # deletionTimestamp set (or gone)


class ClusterWatch(WatchRecorder):
    """Every RayCluster a RayService ever had, from a watch started before the RayService exists:
    a pending cluster created and deleted between two polls still shows here."""

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client, RC, label_selector="ray.io/originated-from-crd=RayService")
        self.lives: dict[str, ClusterLife] = {}
        self.owners: dict[str, str] = {}  # cluster -> RayService

    def record(self, event_type: str, meta: dict[str, Any]) -> None:
        name = str(meta.get("name"))
        life = self.lives.setdefault(name, ClusterLife())
        self.owners[name] = str((meta.get("labels") or {}).get("ray.io/originated-from-cr-name"))
        now = time.monotonic()
        if life.created is None:
            life.created = now
        if (event_type == "DELETED" or meta.get("deletionTimestamp")) and life.deleted is None:
            life.deleted = now

    def of(self, service: str) -> list[str]:
        return sorted(c for c, owner in self.owners.items() if owner == service)


@dataclass
class EndpointSampler:
    """Ready endpoints of a Service every 0.2 s (the issue's zero-downtime check)."""

    services: Services
    service: str
    samples: list[tuple[float, int]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            with contextlib.suppress(KubeError):
                self.samples.append((started, await self.services.ready_endpoints(self.service)))
            await asyncio.sleep(max(0.0, 0.2 - (time.monotonic() - started)))

    async def stop(self) -> list[tuple[float, int]]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self.samples
