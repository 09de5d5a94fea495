"""What bench_dashboard watches: every RayJob/RayService status (a watch on the API server) and
every dashboard observation the poller publishes (the bus, as `raybus tap` reads it), each with
when it arrived."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from raybus.adapters.kube import KubeClient, KubeError, resource_for
from raybus.bus import subjects as s
from raybus.bus.envelopes import DashboardObservation
from raybus.bus.permissions import Role
from raybus_sim.devstack.stack import LocalStack

Json = dict[str, Any]
NS = "default"
APP = "fruit_app"
RJ = resource_for("ray.io/v1", "RayJob")
RS = resource_for("ray.io/v1", "RayService")


class StatusLog:
    """Every status each RayJob/RayService had, with when the watch delivered it."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube
        self.history: dict[tuple[str, str], list[tuple[float, Json]]] = {}
        self.changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for res, kind in ((RJ, "RayJob"), (RS, "RayService")):
            _, rv = await self._kube.list_all(res, namespace=NS)
            self._tasks.append(asyncio.create_task(self._run(res, kind, rv)))

    async def _run(self, res: Any, kind: str, rv: str) -> None:
        while True:
            try:
                async for event in self._kube.watch(res, resource_version=rv, namespace=NS, timeout_s=600):
                    meta = event.object.get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv)
                    if event.type in ("ADDED", "MODIFIED"):
                        entries = self.history.setdefault((kind, str(meta.get("name"))), [])
                        status = event.object.get("status") or {}
                        if not entries or entries[-1][1] != status:
                            entries.append((time.monotonic(), status))
                            self.changed.set()
            except KubeError:
                await asyncio.sleep(0.2)

    def first(self, kind: str, name: str, pred: Callable[[Json], bool], *, since: float) -> float | None:
        for at, status in self.history.get((kind, name), []):
            if at >= since and pred(status):
                return at
        return None

    def latest(self, kind: str, name: str) -> Json:
        entries = self.history.get((kind, name))
        return entries[-1][1] if entries else {}

    async def wait(self, kind: str, names: list[str], pred: Callable[[Json], bool], *, timeout: float,
                   what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            missing = [n for n in names if not pred(self.latest(kind, n))]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(missing)} {kind}s not {what} after {timeout:.0f}s, e.g. {missing[:3]}: "
                                   f"{self.latest(kind, missing[0])}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 1.0)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class BusTap:
    """Every dashboard observation the poller publishes, read as `raybus tap` reads them (the tap
    user's plain subscription): when each cluster's fruit_app status was published. The poller's
    own detection, apart from the RayService status write that follows it."""

    def __init__(self) -> None:
        self.history: dict[str, list[tuple[float, str | None]]] = {}
        self._nc: NATS | None = None

    async def start(self, stack: LocalStack) -> None:
        assert stack.nats is not None
        self._nc = await nats.connect(**stack.nats.options(Role.TAP.value))
        await self._nc.subscribe(s.dashboard_filter(), cb=self._on)

    async def _on(self, msg: Msg) -> None:
        obs = DashboardObservation.model_validate_json(msg.data).observation
        app = (obs.serve_apps or {}).get(APP)
        self.history.setdefault(obs.cluster, []).append((time.monotonic(), None if app is None else app.status))

    def first(self, cluster: str, status: str, *, since: float) -> float | None:
        return next((at for at, st in self.history.get(cluster, []) if at >= since and st == status), None)

    async def stop(self) -> None:
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.close()


def running(st: Json) -> bool:
    return st.get("jobDeploymentStatus") == "Running" and st.get("jobStatus") == "RUNNING"


def app_status(st: Json) -> str | None:
    apps = (st.get("activeServiceStatus") or {}).get("applicationStatuses") or {}
    return (apps.get(APP) or {}).get("status")


def service_ready(st: Json) -> bool:
    ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {})
    apps = (st.get("activeServiceStatus") or {}).get("applicationStatuses") or {}
    return ready.get("status") == "True" and bool(apps) and all(a.get("status") == "RUNNING" for a in apps.values())
