"""Helpers for the dashboard-poller tests: start pollers against the simulator on a real
nats-server, declare interests and commands as a reconciler would, and watch what is published."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from dashboard_poller.app import DashboardPollerService
from dashboard_poller.settings import PollerSettings
from raybus.adapters.kube import KubeClient, resource_for
from raybus.bus import subjects as s
from raybus.bus.envelopes import (
    DashboardCommandMessage,
    DashboardObservation,
    DashboardResultMessage,
    ObjectEvent,
    ObjectKey,
    Trigger,
)
from raybus.bus.publish import DashboardInterestPublisher, publish_dashboard_command, publish_object
from raybus.decisions.dashboard_contract import DashboardCommand, DashboardInterest
from tests.integration.dashboard.conftest import Sim

NS, CLUSTER = "ns", "rc"
RAYJOB = resource_for("ray.io/v1", "RayJob")
RAY_CLUSTER_SPEC: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
    {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}
# Fast cadence so each test runs in seconds; backoff and the safety net still apply.
FAST_POLLER: dict[str, Any] = {
    "fast_interval_s": 0.2, "slow_interval_s": 1.0, "fresh_window_s": 2.0, "backoff_cap_s": 1.6,
    "read_timeout_s": 0.5, "ack_wait_s": 2.0, "lease_ttl_s": 3.0,
    # These tests drive the command mechanics against simulated heads with no API server; the
    # poller's admission is tested on one (tests/integration/dashboard/test_admission.py).
    "admission": False,
}


def poller_settings(nats_url: str, sim: Sim, replica: str = "p0", **overrides: Any) -> PollerSettings:
    return PollerSettings(
        nats_url=nats_url, replica_id=replica, dashboard_url_template=sim.template,
        proxy_url_template=sim.root + "/{namespace}/{cluster}/serve", **{**FAST_POLLER, **overrides})


async def start_poller(nats_url: str, sim: Sim, replica: str = "p0", **overrides: Any) -> DashboardPollerService:
    service = DashboardPollerService(poller_settings(nats_url, sim, replica, **overrides))
    await service.start()
    return service


async def until(check: Callable[[], Awaitable[Any]], *, timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class ObservationTap:
    """Every observation published from now on (RAYBUS_DASHBOARD keeps only the last one)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, DashboardObservation]] = []
        self._sub: Any = None

    async def start(self, nc: NATS) -> None:
        async def on_msg(msg: Msg) -> None:
            seq = msg.metadata.sequence.stream if msg.metadata else 0
            self.seen.append((seq, DashboardObservation.model_validate_json(msg.data)))

        self._sub = await nc.jetstream().subscribe(s.dashboard_filter(), ordered_consumer=True, cb=on_msg,
                                                   deliver_policy=DeliverPolicy.NEW)

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    def jobs(self, job_id: str) -> list[str]:
        return [o.observation.jobs[job_id].status if job_id in o.observation.jobs else "missing"
                for _, o in self.seen]

    def last(self) -> DashboardObservation | None:
        return self.seen[-1][1] if self.seen else None


class Reconciler:
    """What a reconciler does on the bus for one owner: declare interest, send commands, read
    results."""

    def __init__(self, nc: NATS, owner: str = "rj", controller: s.Controller = s.Controller.JOB) -> None:
        self.nc = nc
        self.key = ObjectKey(namespace=NS, name=owner)
        self.controller = controller
        self.kind = "rayjob" if controller is s.Controller.JOB else "rayservice"
        self.interests = DashboardInterestPublisher(nc.jetstream())
        self.triggers: list[tuple[str, int]] = []
        self._trigger_sub: Any = None

    async def want(self, **interest: Any) -> bool:
        return await self.interests.publish(controller=self.controller, key=self.key, kind=self.kind,
                                            interest=DashboardInterest(**{"cluster": CLUSTER, **interest}))

    def message(self, command_id: str, command: DashboardCommand) -> DashboardCommandMessage:
        return DashboardCommandMessage(key=self.key, kind=self.kind, controller=self.controller.value,
                                       command_id=command_id, command=command)

    async def send(self, command_id: str, command: DashboardCommand) -> int:
        return await publish_dashboard_command(self.nc.jetstream(), self.message(command_id, command))

    async def result(self, command_id: str) -> DashboardResultMessage | None:
        subject = s.dashboard_result_subject(self.controller, NS, self.key.name)
        try:
            raw = await self.nc.jetstream().get_last_msg(s.STREAM_DASHBOARD_RESULTS, subject)
        except NotFoundError:
            return None
        message = DashboardResultMessage.model_validate_json(raw.data or b"")
        return message if message.result.command_id == command_id else None

    async def tap_triggers(self) -> None:
        """Every trigger for this owner from now on: the stream keeps only the last one per
        subject, and a later observation's trigger may replace the one a test waits for."""
        async def on_msg(msg: Msg) -> None:
            trig = Trigger.model_validate_json(msg.data)
            self.triggers.append((trig.cause_kind, trig.objects_seq))

        subject = s.trigger_subject(self.controller, namespace=NS, name=self.key.name)
        self._trigger_sub = await self.nc.subscribe(subject, cb=on_msg)

    async def triggered(self, kind: str, seq: int) -> bool:
        return (kind, seq) in self.triggers

    async def trigger_seq(self) -> tuple[str, int] | None:
        subject = s.trigger_subject(self.controller, namespace=NS, name=self.key.name)
        try:
            raw = await self.nc.jetstream().get_last_msg(s.trigger_stream(self.controller), subject)
        except NotFoundError:
            return None
        trig = Trigger.model_validate_json(raw.data or b"")
        return trig.cause_kind, trig.objects_seq


async def create_rayjob_owner(kube: KubeClient, *, job_id: str, entrypoint: str) -> dict[str, Any]:
    """An HTTPMode RayJob `rj` whose status names job `job_id` on RayCluster `rc`, and `rc` owned
    by it, in the API server the poller's admission reads: the world its commands are judged in."""
    await kube.create(resource_for("v1", "Namespace"), {"metadata": {"name": NS}}, namespace=None)
    job = await kube.create(RAYJOB, {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"},
                                     "spec": {"entrypoint": entrypoint, "submissionMode": "HTTPMode",
                                              "rayClusterSpec": RAY_CLUSTER_SPEC}}, namespace=NS)
    job["status"] = {"jobId": job_id, "rayClusterName": CLUSTER, "jobDeploymentStatus": "Running"}
    job = await kube.replace_status(RAYJOB, job)
    owner = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": job["metadata"]["uid"],
             "controller": True}
    await kube.create(resource_for("ray.io/v1", "RayCluster"), {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": RAY_CLUSTER_SPEC,
        "metadata": {"name": CLUSTER, "ownerReferences": [owner]}}, namespace=NS)
    return job


async def last_dashboard_seq(nc: NATS) -> int:
    return int((await nc.jetstream().stream_info(s.STREAM_DASHBOARD)).state.last_seq)


async def requests(sim: Sim, cluster: str = CLUSTER) -> dict[str, int]:
    data: dict[str, int] = (await sim.control("GET", f"/{NS}/{cluster}/requests")).json()
    return data


async def publish_cluster(nc: NATS, name: str, uid: str, namespace: str = NS) -> None:
    """A RayCluster on the bus as the watcher publishes it: where the poller's admission is off,
    its receiver checks a head's events token against this copy's uid."""
    obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"},
           "status": {"conditions": [{"type": "HeadPodReady", "status": "True"}]}}  # the head is polled
    await publish_object(nc.jetstream(), ObjectEvent(key=ObjectKey(namespace=namespace, name=name),
                                                     kind=s.Kind.RAYCLUSTER.value, uid=uid, type="ADDED",
                                                     resource_version="1", object=obj))
