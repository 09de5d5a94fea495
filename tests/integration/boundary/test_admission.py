"""Executor admission on real servers: nats-server, the local API server and the real executor,
which learns what exists from its own informers (no watcher runs: nothing on the bus is trusted).
Forged batches of each kind are refused: none of their commands is applied (checked through the
API), each lands in raybus.dlq.command-executor with its reason, is counted, and answered with a
failed Outcome; a genuine batch next to them is applied."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import nats
from nats.js import JetStreamContext

from command_executor.admission import DLQ_REASON, REFUSED
from command_executor.app import CommandExecutorService, ExecutorSettings
from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.api.defaults import with_defaults
from raybus.api.raycluster import RayCluster
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectKey, Outcome
from raybus.bus.publish import publish_commands, publish_status
from raybus.bus.streams import ensure_streams
from raybus.decisions import admission as a
from raybus.decisions.cluster.pod_manifest import worker_pod_manifest
from raybus.decisions.cluster.pod_template import worker_pod_name_prefix
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, ObjectRef, PatchObject, UpdateStatus
from raybus.observability.metrics import COMMANDS, MESSAGES
from raybus.runtime.tasks import cancel_and_wait
from raybus_sim.testing.servers import NatsServer
from raybus_sim.testing.streams import stream_messages
from tests.integration.boundary.conftest import last_msg, sample_raycluster, until

POD = resource_for("v1", "Pod")
ROLE = resource_for("rbac.authorization.k8s.io/v1", "Role")
RAYCLUSTER = resource_for("ray.io/v1", "RayCluster")
_ids = itertools.count()


def batch(uid: str, *commands: Command, name: str = "rc") -> CommandBatch:
    return CommandBatch(key=ObjectKey(namespace="default", name=name), kind="raycluster", uid=uid,
                        controller="cluster", reconcile_id=f"adm-{next(_ids)}", commands=list(commands))


def built_worker(live: Any, suffix: str = "bbbbb") -> Any:
    """A worker Pod exactly as the RayCluster controller builds it for the live RayCluster."""
    cluster = with_defaults(RayCluster.model_validate(live))
    group = (cluster.spec.worker_group_specs or [])[0]
    name = worker_pod_name_prefix(cluster, group) + suffix
    return worker_pod_manifest(cluster, group, settings=OperatorSettings(), name=name, replica_index=0,
                               host_index=0)


def pod(name: str, *, namespace: str = "default", owner_uid: str | None = None, privileged: bool = False) -> Any:
    container: dict[str, Any] = {"name": "ray-worker", "image": "rayproject/ray:2.52.0"}
    if privileged:
        container["securityContext"] = {"privileged": True}
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "labels": {"ray.io/cluster": "rc", "ray.io/node-type": "worker"}}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc",
                                    "uid": owner_uid, "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


async def dead_letters(js: JetStreamContext) -> dict[str, Any]:
    """reconcile_id -> DLQ message, for every refused batch so far."""
    return {CommandBatch.model_validate_json(msg.data).reconcile_id: msg
            for msg in await stream_messages(js, s.STREAM_DEAD_LETTERS)}


async def outcome(js: JetStreamContext, name: str, reconcile_id: str) -> Outcome:
    async def get() -> Outcome | None:
        raw = await last_msg(js, s.STREAM_OUTCOMES, s.outcome_subject("cluster", "default", name))
        out = Outcome.model_validate_json(raw.data) if raw is not None else None
        return out if out is not None and out.reconcile_id == reconcile_id else None
    return await until(get, what=f"outcome of {reconcile_id}")  # type: ignore[no-any-return]


def attempted() -> float:
    return sum(COMMANDS.labels(op, result)._value.get() for op in ("create", "update_status")
               for result in ("ok", "failed", "transient"))


async def test_forged_batches_are_refused_and_none_of_them_applied(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    rc = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
    victim = await kube.create(RAYCLUSTER, sample_raycluster("victim"), namespace="default")
    uid = rc["metadata"]["uid"]
    service = CommandExecutorService(ExecutorSettings(nats_url=nats_server.url, kubeconfig=str(kubeconfig),
                                                      replica_id="x0", nak_delay_s=0.2, admission_wait_s=2.0))
    await service.start()
    try:
        victim_ref = ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace="default", name="victim",
                               uid=victim["metadata"]["uid"])
        forged = {
            a.NAMESPACE: batch(uid, CreateObject(reason="x", object=pod("rc-worker-x", namespace="kube-system",
                                                                        owner_uid=uid))),
            a.NOT_BUILT: batch(uid, CreateObject(reason="x", object=pod("rc-worker-priv", owner_uid=uid,
                                                                        privileged=True))),
            a.KIND: batch(uid, CreateObject(reason="x", object={
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "rc"},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})),
            a.PATCH_CONTENT: batch(uid, PatchObject(reason="x", target=ObjectRef(
                api_version="ray.io/v1", kind="RayCluster", namespace="default", name="rc", uid=uid),
                merge_patch={"spec": {"headGroupSpec": {"template": {"spec": {"hostPID": True}}}}})),
            a.FOREIGN_TARGET: batch(uid, PatchObject(reason="x", target=victim_ref, merge_patch={
                "metadata": {"labels": {"owned": "yes"}}})),
            a.FOREIGN_STATUS: batch(uid, UpdateStatus(reason="x", target=victim_ref, status={"state": "owned"})),
            a.OBJECT_NOT_LIVE: batch("uid-nobody", CreateObject(reason="x", object=pod("ghost-worker")),
                                     name="ghost"),
        }
        before = {reason: REFUSED.labels("cluster", reason)._value.get() for reason in forged}
        tried = attempted()
        for reason, b in forged.items():
            if reason == a.FOREIGN_STATUS:
                await publish_status(js, b.model_copy(update={"reconcile_id": s.status_batch_id(b.reconcile_id)}))
                forged[reason] = b.model_copy(update={"reconcile_id": s.status_batch_id(b.reconcile_id)})
            else:
                await publish_commands(js, b)
        # a genuine batch among them: the worker Pod the decision code builds for the live RayCluster
        good = batch(uid, CreateObject(reason="Created worker Pod", object=built_worker(rc)))
        await publish_commands(js, good)
        assert (await outcome(js, "rc", good.reconcile_id)).results[0].ok

        async def all_refused() -> dict[str, Any] | None:
            letters = await dead_letters(js)
            return letters if all(b.reconcile_id in letters for b in forged.values()) else None
        letters = await until(all_refused, timeout=20, what="every forged batch in the DLQ")
        for reason, b in forged.items():
            msg = letters[b.reconcile_id]
            assert msg.headers[DLQ_REASON] == reason, (reason, msg.headers)
            assert msg.headers["Raybus-Dlq-Error"].startswith(f"refused by admission: {reason}")
            assert REFUSED.labels("cluster", reason)._value.get() == before[reason] + 1
        # answered with a failed Outcome on its own subject, so a reconciler never waits for it
        ghost = await outcome(js, "ghost", forged[a.OBJECT_NOT_LIVE].reconcile_id)
        assert not ghost.results[0].ok and ghost.results[0].code == 403
        assert "admission (object_not_live)" in ghost.results[0].message
        # nothing of them was applied: only the genuine batch's one create reached the API server
        assert attempted() == tried + 1
        pods = {p["metadata"]["name"] for ns in ("default", "kube-system")
                for p in (await kube.list_page(POD, namespace=ns))["items"]}
        assert pods == {good.commands[0].object["metadata"]["name"]}  # type: ignore[union-attr]
        assert not (await kube.list_page(ROLE, namespace="default"))["items"]
        live_rc = await kube.get(RAYCLUSTER, namespace="default", name="rc")
        assert "hostPID" not in live_rc["spec"]["headGroupSpec"]["template"]["spec"]
        assert (await kube.get(RAYCLUSTER, namespace="default", name="victim")).get("status") != {"state": "owned"}
        assert (await js.stream_info(s.STREAM_COMMANDS)).state.messages == 0  # all acked
    finally:
        await service.stop()
        await kube.close()
        await nc.close()


async def test_a_batch_waits_for_the_informer_and_a_deleted_incarnation_is_refused_at_once(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    """The executor's informers trail the API server: a batch for a RayCluster they have not seen
    yet is retried (not refused) and applied once they do. A batch naming an incarnation the
    informers saw deleted is refused without waiting."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    service = CommandExecutorService(ExecutorSettings(nats_url=nats_server.url, kubeconfig=str(kubeconfig),
                                                      replica_id="x0", nak_delay_s=0.2, admission_wait_s=60.0))
    await service.start()
    assert service.admission is not None
    clusters = service.admission.view.informers[0]  # WATCHED order: RayCluster first, one namespace (all)
    assert clusters.spec.k8s_kind == "RayCluster"
    # Hold the RayCluster informer back (as a slow watch would) while rc is created.
    paused = service.admission.view.tasks[0]  # WATCHED order: RayCluster first
    await cancel_and_wait([paused])
    try:
        rc = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
        uid = rc["metadata"]["uid"]
        early = batch(uid, CreateObject(reason="Created worker Pod", object=built_worker(rc)))
        waits = MESSAGES.labels("command-executor", "command", "not_admitted")
        before = waits._value.get()
        await publish_commands(js, early)

        async def held() -> bool:
            return bool(waits._value.get() > before)
        await until(held, what="the batch held back while the informer has not seen rc")
        assert not (await kube.list_page(POD, namespace="default"))["items"]
        service.admission.view.tasks[0] = asyncio.create_task(clusters.run())
        out = await outcome(js, "rc", early.reconcile_id)  # well within the 60 s bound
        assert out.results[0].ok and out.results[0].code == 201
        assert service.admission.refused == 0

        await kube.delete(RAYCLUSTER, namespace="default", name="rc")

        async def seen_gone() -> bool:
            return service.admission is not None and service.admission.view.gone(uid)
        await until(seen_gone, what="the informer seeing rc deleted")
        late = batch(uid, CreateObject(reason="Created worker Pod", object=built_worker(rc, "ccccc")))
        await publish_commands(js, late)

        async def refused() -> Any:
            return (await dead_letters(js)).get(late.reconcile_id) if (
                await js.stream_info(s.STREAM_DEAD_LETTERS)).state.messages else None
        letter = await until(refused, timeout=10, what="the stale batch refused without the 60 s wait")
        assert letter.headers[DLQ_REASON] == a.OBJECT_DELETED and "was deleted" in letter.headers["Raybus-Dlq-Error"]
        names = {p["metadata"]["name"] for p in (await kube.list_page(POD, namespace="default"))["items"]}
        assert late.commands[0].object["metadata"]["name"] not in names  # type: ignore[union-attr]
    finally:
        await service.stop()
        await kube.close()
        await nc.close()
