"""Both services ride out a nats-server restart (JetStream state on disk): the watcher's failed
publishes are retried by re-watching from the last resourceVersion it fully published, and the
executor's FastStream pull consumer resumes fetching."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats

from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectKey, Outcome
from raybus.bus.publish import publish_commands
from raybus.decisions.commands import CreateObject
from raybus_sim.testing.servers import NatsServer
from tests.integration.boundary.conftest import last_msg, until
from tests.integration.boundary.test_executor import start_executor, worker_pod
from tests.integration.boundary.test_watcher import object_event, pod, start_watcher

POD = resource_for("v1", "Pod")


async def test_watcher_and_executor_survive_nats_restart(nats_server: NatsServer, kubeconfig: Path) -> None:
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    watcher = await start_watcher(nats_server.url, kubeconfig)
    executor = await start_executor(nats_server.url, kubeconfig)
    nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    js = nc.jetstream()
    try:
        await kube.create(POD, pod("n-head", {"ray.io/cluster": "n", "ray.io/node-type": "head"}),
                          namespace="default")
        await object_event(js, s.Kind.POD, "n-head")
        nats_server.stop()
        # Changes while NATS is down: the watcher cannot publish them yet.
        await kube.create(POD, pod("n-worker", {"ray.io/cluster": "n", "ray.io/node-type": "worker"}),
                          namespace="default")
        await asyncio.sleep(1.0)
        nats_server.start()
        await object_event(js, s.Kind.POD, "n-worker")
        b = CommandBatch(key=ObjectKey(namespace="default", name="rc"), kind="raycluster", controller="cluster",
                         reconcile_id="after-restart",
                         commands=[CreateObject(reason="r", object=worker_pod("rc-worker-after-nats"))])
        await until(lambda: _publish(js, b), timeout=20, what="publish after reconnect")

        async def done() -> bool:
            raw = await last_msg(js, s.STREAM_OUTCOMES, s.outcome_subject("cluster", "default", "rc"))
            return raw is not None and Outcome.model_validate_json(raw.data).reconcile_id == "after-restart"
        await until(done, timeout=30, what="executor applies a batch after the restart")
    finally:
        await executor.stop()
        await watcher.stop()
        await kube.close()
        await nc.close()


async def _publish(js: nats.js.JetStreamContext, batch: CommandBatch) -> bool:
    try:
        await publish_commands(js, batch)
    except Exception:  # noqa: BLE001 - still reconnecting
        return False
    return True
