"""Command executor against the local API server and a real nats-server: batches on the bus become
pods and Events; AlreadyExists/NotFound are tolerated; status conflicts retried; garbage -> DLQ."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import nats
from nats.js import JetStreamContext

from command_executor.app import CommandExecutorService, ExecutorSettings
from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectKey, Outcome
from raybus.bus.publish import publish_commands
from raybus.bus.streams import ensure_streams
from raybus.decisions.commands import CreateObject, DeleteObject, ObjectRef, UpdateStatus
from raybus.observability.metrics import COMMANDS
from raybus.observability.tracing import setup_tracing
from raybus_sim.apiserver import start_apiserver, write_kubeconfig
from raybus_sim.testing.servers import NatsServer, free_port
from tests.integration.boundary.conftest import last_msg, sample_raycluster, until

POD = resource_for("v1", "Pod")
EVENT = resource_for("v1", "Event")
RAYCLUSTER = resource_for("ray.io/v1", "RayCluster")
_ids = itertools.count()


def worker_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"ray.io/cluster": "rc", "ray.io/node-type": "worker"}},
            "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}}


def batch(*commands: Any, reconcile_id: str | None = None, uid: str | None = None) -> CommandBatch:
    return CommandBatch(key=ObjectKey(namespace="default", name="rc"), kind="raycluster", uid=uid,
                        controller="cluster", reconcile_id=reconcile_id or f"r-{next(_ids)}",
                        commands=list(commands))


async def outcome(js: JetStreamContext, reconcile_id: str) -> Outcome:
    async def get() -> Outcome | None:
        for status in (False, True):  # a status write's Outcome has its own subject
            raw = await last_msg(js, s.STREAM_OUTCOMES,
                                 s.outcome_subject("cluster", "default", "rc", status=status))
            out = Outcome.model_validate_json(raw.data) if raw is not None else None
            if out is not None and out.reconcile_id == reconcile_id:
                return out
        return None
    return await until(get, what=f"outcome of {reconcile_id}")  # type: ignore[no-any-return]


async def start_executor(nats_url: str, kubeconfig: Path, kube: KubeClient | None = None) -> CommandExecutorService:
    service = CommandExecutorService(
        ExecutorSettings(nats_url=nats_url, kubeconfig=str(kubeconfig), replica_id="x0", nak_delay_s=0.2,
                         admission=False),
        kube=kube)
    await service.start()
    return service


async def test_batches_create_and_delete_pods_idempotently_with_events(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    cluster = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
    uid = cluster["metadata"]["uid"]
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        create = CreateObject(reason="Created worker Pod default/rc-worker-a", object=worker_pod("rc-worker-a"),
                              event_reason="CreatedWorkerPod")
        first = batch(create, uid=uid)
        await publish_commands(js, first)
        await publish_commands(js, first)  # same reconcile_id: JetStream stores it once
        again = batch(create, uid=uid)  # a new reconcile asking for the same pod: AlreadyExists
        out1 = await outcome(js, first.reconcile_id)
        await publish_commands(js, again)
        out2 = await outcome(js, again.reconcile_id)
        assert out1.results[0].ok and out1.results[0].code == 201
        assert out2.results[0].ok and out2.results[0].code == 409
        pods = await kube.list_page(POD, namespace="default", label_selector="ray.io/cluster=rc")
        assert [p["metadata"]["name"] for p in pods["items"]] == ["rc-worker-a"]
        events = (await kube.list_page(EVENT, namespace="default"))["items"]
        created = [e for e in events if e["reason"] == "CreatedWorkerPod"]
        assert created and created[0]["involvedObject"]["kind"] == "RayCluster"
        assert created[0]["involvedObject"]["uid"] == uid and created[0]["type"] == "Normal"
        # events.k8s.io/v1 as KubeRay v1.7 records it, read back through the core/v1 view.
        assert created[0]["reportingComponent"] == "raycluster-controller" and created[0]["action"] == "Create"
        assert created[0]["message"] == "Created worker Pod default/rc-worker-a"
        assert created[0]["series"]["count"] == 2  # the repeat became a series, like client-go's events/v1
        pod_uid = pods["items"][0]["metadata"]["uid"]
        delete = DeleteObject(reason="Deleted worker Pod default/rc-worker-a", event_reason="DeletedWorkerPod",
                              target=ObjectRef(api_version="v1", kind="Pod", namespace="default",
                                               name="rc-worker-a", uid=pod_uid))
        d1, d2 = batch(delete, uid=uid), batch(delete, uid=uid)
        await publish_commands(js, d1)
        assert (await outcome(js, d1.reconcile_id)).results[0].code == 200
        await publish_commands(js, d2)
        assert (await outcome(js, d2.reconcile_id)).results[0].code == 404  # NotFound tolerated
        assert not (await kube.list_page(POD, namespace="default", label_selector="ray.io/cluster=rc"))["items"]
        assert (await js.stream_info(s.STREAM_COMMANDS)).state.messages == 0
    finally:
        await service.stop()
        await kube.close()
        await nc.close()


class ConflictingKube(KubeClient):
    """Writes the object between the executor's GET and its PUT, once: a real 409 from the server."""

    interfered = 0

    async def get(self, res: Any, *, namespace: str | None, name: str) -> dict[str, Any]:
        fresh = await super().get(res, namespace=namespace, name=name)
        if res is RAYCLUSTER and not self.interfered:
            self.interfered += 1
            await self.merge_patch(res, namespace=namespace, name=name,
                                   patch={"metadata": {"annotations": {"someone": "else"}}})
        return fresh


async def test_status_update_conflict_is_retried_against_fresh_state(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    cluster = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
    racing = ConflictingKube(await new_api_client(str(kubeconfig)))
    service = await start_executor(nats_server.url, kubeconfig, kube=racing)
    try:
        ref = ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace="default", name="rc",
                        uid=cluster["metadata"]["uid"])
        b = batch(UpdateStatus(reason="cluster ready", target=ref, status={"state": "ready"}))
        await publish_commands(js, b)
        result = (await outcome(js, b.reconcile_id)).results[0]
        assert result.ok and "2 attempt" in result.message and racing.interfered == 1
        fresh = await kube.get(RAYCLUSTER, namespace="default", name="rc")
        assert fresh["status"] == {"state": "ready"}
        assert fresh["metadata"]["annotations"] == {"someone": "else"}  # the other write survived
        assert fresh["spec"]["headGroupSpec"] == cluster["spec"]["headGroupSpec"]
    finally:
        await service.stop()
        await kube.close()
        await nc.close()


async def test_failed_command_reports_kuberay_reason_and_wording(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        bad = worker_pod("rc-worker-bad")
        bad["metadata"]["namespace"] = "no-such-namespace"
        # The batch stops at its first failed command: what follows is never attempted.
        b = batch(CreateObject(reason="Created worker Pod", object=bad, event_reason="CreatedWorkerPod"),
                  DeleteObject(reason="Deleted worker Pod", target=ObjectRef(
                      api_version="v1", kind="Pod", namespace="default", name="rc-worker-next")))
        await publish_commands(js, b)
        out = await outcome(js, b.reconcile_id)
        assert not out.results[0].ok and out.results[0].error_reason == "FailedCreateWorkerPod"
        assert out.results[0].code == 404 and not out.results[0].expired
        assert out.results[1].expired and "skipped" in out.results[1].message

        async def warning() -> dict[str, Any] | None:
            events = (await kube.list_page(EVENT, namespace="default"))["items"]
            return next((e for e in events if e["reason"] == "FailedToCreateWorkerPod"), None)
        event = await until(warning, what="the Warning event")
        # KubeRay's wording: the Event reads as a failure and carries the API server's message.
        assert event["type"] == "Warning"
        assert event["message"].startswith("Failed to create worker Pod for the cluster default/rc, ")
        assert "no-such-namespace" in event["message"]
    finally:
        await service.stop()
        await kube.close()
        await nc.close()


async def test_garbage_on_command_subject_ends_in_dead_letter_stream(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        subject = s.command_subject("cluster", "default", "rc")
        await js.publish(subject, b"\x00not a batch")
        raw = await until(lambda: last_msg(js, s.STREAM_DEAD_LETTERS, s.dead_letter_subject("command-executor")),
                          what="dead letter")
        assert raw.data == b"\x00not a batch" and raw.headers["Raybus-Dlq-Subject"] == subject
        await asyncio.sleep(0.3)
        assert (await js.stream_info(s.STREAM_COMMANDS)).state.messages == 0  # acked, not stuck
        good = batch(CreateObject(reason="r", object=worker_pod("rc-worker-after-garbage")))
        await publish_commands(js, good)
        assert (await outcome(js, good.reconcile_id)).results[0].ok
    finally:
        await service.stop()
        await nc.close()


async def test_batch_survives_api_server_outage(nats_server: NatsServer, crd_dir: Path, tmp_path: Path) -> None:
    """Connection errors are transient: the batch is nak'd with delay and redelivered, not dropped."""
    port, state = free_port(), tmp_path / "state.json"
    server = await start_apiserver(port=port, crd_dir=crd_dir, kubelet=False, state_file=state)
    kubeconfig = write_kubeconfig(tmp_path / "kc", server.url)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        await server.stop()
        b = batch(CreateObject(reason="r", object=worker_pod("rc-worker-outage")))
        await publish_commands(js, b)

        transient = COMMANDS.labels("create", "transient")
        before = transient._value.get()

        async def failed_twice() -> bool:  # delivered, nak'd, redelivered, nak'd again
            return bool(transient._value.get() - before >= 2)
        await until(failed_twice, what="batch retried while the API server is down")
        await asyncio.sleep(0.5)
        assert await last_msg(js, s.STREAM_OUTCOMES, s.outcome_subject("cluster", "default", "rc")) is None
        server = await start_apiserver(port=port, crd_dir=crd_dir, kubelet=False, state_file=state)
        out = await outcome(js, b.reconcile_id)
        assert out.results[0].ok and out.results[0].code == 201
    finally:
        await service.stop()
        await nc.close()
        await server.stop()


async def test_trace_continues_from_batch_to_outcome(nats_server: NatsServer, kubeconfig: Path) -> None:
    tracer = setup_tracing("test-boundary")
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        b = batch(CreateObject(reason="r", object=worker_pod("rc-worker-traced")))
        with tracer.start_as_current_span("reconcile") as span:
            trace_id = format(span.get_span_context().trace_id, "032x")
            await publish_commands(js, b)
        await outcome(js, b.reconcile_id)
        raw = await last_msg(js, s.STREAM_OUTCOMES, s.outcome_subject("cluster", "default", "rc"))
        assert raw.headers["traceparent"].split("-")[1] == trace_id
    finally:
        await service.stop()
        await nc.close()


async def test_status_written_over_the_version_it_was_computed_on(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    """One PUT over the decision's resourceVersion; if the object moved on, a level status
    (on_conflict=retry) is re-read and replaced, a state machine's (fail) is refused with 409."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    cluster = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        ref = ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace="default", name="rc",
                        uid=cluster["metadata"]["uid"])
        rv = cluster["metadata"]["resourceVersion"]
        b1 = batch(UpdateStatus(reason="r", target=ref, status={"state": "ready"}, resource_version=rv))
        await publish_commands(js, b1)
        first = (await outcome(js, b1.reconcile_id)).results[0]
        assert first.ok and first.resource_version and first.resource_version != rv
        # rv is stale now: a state machine's write is refused...
        b2 = batch(UpdateStatus(reason="r", target=ref, status={"state": "stale"}, resource_version=rv,
                                on_conflict="fail"))
        await publish_commands(js, b2)
        refused = (await outcome(js, b2.reconcile_id)).results[0]
        assert not refused.ok and refused.code == 409
        assert (await kube.get(RAYCLUSTER, namespace="default", name="rc"))["status"] == {"state": "ready"}
        # ...while a level status is re-read and replaced.
        b3 = batch(UpdateStatus(reason="r", target=ref, status={"state": "suspended"}, resource_version=rv))
        await publish_commands(js, b3)
        assert (await outcome(js, b3.reconcile_id)).results[0].ok
        assert (await kube.get(RAYCLUSTER, namespace="default", name="rc"))["status"] == {"state": "suspended"}
    finally:
        await service.stop()
        await kube.close()
        await nc.close()


async def test_the_next_batchs_outcome_does_not_replace_a_status_writes(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    """RAYBUS_OUTCOMES keeps the last Outcome per subject. A status write's and the next command
    batch's shared one: a reconciler whose ordered consumer was re-created between the two (a
    NATS node lost) never read the status write's, and held that RayCluster's status back as in
    flight for 300 s (make test beside two hogs). Each keeps its own now."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    cluster = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
    service = await start_executor(nats_server.url, kubeconfig)
    try:
        ref = ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace="default", name="rc",
                        uid=cluster["metadata"]["uid"])
        status = batch(UpdateStatus(reason="r", target=ref, status={"state": "ready"},
                                    resource_version=cluster["metadata"]["resourceVersion"]))
        await publish_commands(js, status)
        assert (await outcome(js, status.reconcile_id)).results[0].ok
        create = batch(CreateObject(reason="r", object=worker_pod("rc-w-outcomes")))
        await publish_commands(js, create)
        assert (await outcome(js, create.reconcile_id)).results[0].ok
        kept = await last_msg(js, s.STREAM_OUTCOMES,
                              s.outcome_subject("cluster", "default", "rc", status=True))
        assert kept is not None and Outcome.model_validate_json(kept.data).reconcile_id == status.reconcile_id
    finally:
        await service.stop()
        await kube.close()
        await nc.close()
