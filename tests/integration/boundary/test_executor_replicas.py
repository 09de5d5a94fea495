"""Two command-executor replicas at once on one command stream (issue 8: "support 2 executor
replicas running at once without double writes"). Every batch is also delivered a second time
(published again without its Nats-Msg-Id, so JetStream's de-duplication does not absorb it): the
copy may reach the other replica while the first is still applying, which is exactly the race the
command ledger's claim settles. Each Pod must be POSTed once, each batch applied once."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path
from typing import Any

import nats

from command_executor.app import CommandExecutorService, ExecutorSettings
from raybus.adapters.kube import KubeClient, Resource, new_api_client
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectKey, Outcome
from raybus.bus.publish import publish_commands
from raybus.bus.streams import ensure_streams
from raybus.decisions.commands import CreateObject
from raybus_sim.testing.servers import NatsServer
from tests.integration.boundary.conftest import sample_raycluster, until
from tests.integration.boundary.test_executor import POD, RAYCLUSTER, worker_pod

OBJECTS, BATCHES_PER_OBJECT, PODS_PER_BATCH = 8, 3, 2


class CountingKube(KubeClient):
    """Counts Pod POSTs (shared by both replicas) and makes each take a while, so that a batch's
    duplicate usually arrives while its first delivery is still being applied."""

    def __init__(self, api: Any, posts: collections.Counter[str]) -> None:
        super().__init__(api)
        self.posts = posts

    async def create(self, res: Resource, body: Any, *, namespace: str | None) -> Any:
        if res is POD:
            self.posts[body["metadata"]["name"]] += 1
            await asyncio.sleep(0.1)
        return await super().create(res, body, namespace=namespace)


async def test_two_replicas_apply_every_batch_once_even_when_it_is_delivered_twice(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    admin = KubeClient(await new_api_client(str(kubeconfig)))
    posts: collections.Counter[str] = collections.Counter()
    replicas: list[CommandExecutorService] = []
    outcomes: dict[str, Outcome] = {}

    async def on_outcome(msg: Any) -> None:
        out = Outcome.model_validate_json(msg.data)
        outcomes[out.reconcile_id] = out

    sub = await nc.subscribe(s.outcomes_filter("cluster"), cb=on_outcome)
    try:
        uids = {}
        for i in range(OBJECTS):
            created = await admin.create(RAYCLUSTER, sample_raycluster(f"rc{i}"), namespace="default")
            uids[f"rc{i}"] = created["metadata"]["uid"]
        for replica in ("x0", "x1"):
            kube = CountingKube(await new_api_client(str(kubeconfig)), posts)
            service = CommandExecutorService(ExecutorSettings(
                nats_url=nats_server.url, kubeconfig=str(kubeconfig), replica_id=replica,
                concurrency=4, ack_wait_s=1.0, nak_delay_s=0.2, admission=False), kube=kube)
            await service.start()
            replicas.append(service)

        batches: list[CommandBatch] = []
        for i in range(OBJECTS):
            for b in range(BATCHES_PER_OBJECT):
                names = [f"rc{i}-b{b}-w{p}" for p in range(PODS_PER_BATCH)]
                batches.append(CommandBatch(
                    key=ObjectKey(namespace="default", name=f"rc{i}"), kind="raycluster", uid=uids[f"rc{i}"],
                    controller="cluster", reconcile_id=f"rc{i}-r{b}",
                    commands=[CreateObject(reason=f"Created worker Pod default/{n}", object=worker_pod(n),
                                           event_reason="CreatedWorkerPod") for n in names]))
        for batch in batches:
            await publish_commands(js, batch)
        for batch in batches:  # the bus delivers each batch again: a copy JetStream cannot de-duplicate
            await js.publish(s.command_subject(batch.controller, batch.key.namespace, batch.key.name),
                             batch.model_dump_json().encode())

        want = len(batches)
        await until(lambda: _async(sum(r.applied for r in replicas) >= want
                                   and sum(r.answered_from_ledger for r in replicas) >= want),
                    timeout=60, what="every batch applied once and every copy answered from the ledger")
        assert sum(r.applied for r in replicas) == want
        assert all(r.applied > 0 for r in replicas), [r.applied for r in replicas]  # both did work
        expected = {f"rc{i}-b{b}-w{p}" for i in range(OBJECTS) for b in range(BATCHES_PER_OBJECT)
                    for p in range(PODS_PER_BATCH)}
        assert set(posts) == expected and set(posts.values()) == {1}, posts  # never a second POST
        pods = (await admin.list_page(POD, namespace="default"))["items"]
        assert sorted(p["metadata"]["name"] for p in pods) == sorted(expected)
        await until(lambda: _async(len(outcomes) == want), timeout=10, what="an outcome per batch")
        assert all(r.ok and r.code == 201 for out in outcomes.values() for r in out.results)
    finally:
        await sub.unsubscribe()
        for service in replicas:
            await service.stop()
        await admin.close()
        await nc.close()


async def _async(value: bool) -> bool:
    return value
