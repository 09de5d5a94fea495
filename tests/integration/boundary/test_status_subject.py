"""Status writes travel on a last-value subject: statuses queued for one object (say behind the
QPS limiter, or while no executor runs) collapse to the newest, so only it is written."""

from __future__ import annotations

from pathlib import Path

import nats

from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectKey
from raybus.bus.publish import publish_status
from raybus.bus.streams import ensure_streams
from raybus.decisions.commands import ObjectRef, UpdateStatus
from raybus_sim.testing.servers import NatsServer
from tests.integration.boundary.conftest import sample_raycluster, until
from tests.integration.boundary.test_executor import start_executor

RAYCLUSTER = resource_for("ray.io/v1", "RayCluster")


async def test_queued_statuses_collapse_to_the_newest(nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    cluster = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
    ref = ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace="default", name="rc",
                    uid=cluster["metadata"]["uid"])
    for ready in range(1, 6):  # five reconciles' statuses, no executor running yet
        await publish_status(js, CommandBatch(
            key=ObjectKey(namespace="default", name="rc"), kind="raycluster", controller="cluster",
            reconcile_id=s.status_batch_id(f"r{ready}"),
            commands=[UpdateStatus(reason="status changed", target=ref,
                                   status={"readyWorkerReplicas": ready})]))
    assert (await js.stream_info(s.STREAM_STATUS)).state.messages == 1
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        async def written() -> bool:
            got = await kube.get(RAYCLUSTER, namespace="default", name="rc")
            return (got.get("status") or {}).get("readyWorkerReplicas") == 5

        await until(written, what="the newest status written")

        async def reported() -> bool:  # Outcome published, then acked: wait for both
            outcomes = (await js.stream_info(s.STREAM_OUTCOMES)).state.messages
            return bool(outcomes >= 1 and service.applied >= 1)
        await until(reported, what="the Outcome")
        assert (await js.stream_info(s.STREAM_STATUS)).state.messages == 0
        assert service.applied == 1  # one write, not five
    finally:
        await service.stop()
        await kube.close()
        await nc.close()
