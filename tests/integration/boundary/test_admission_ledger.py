"""Admission and the command ledger agree (found in the code while chasing the 2-minute soak's
"two head Pods after a deletion"; the failure seen with logs was another cause, see README).

A command batch is redelivered when its handler failed after the API writes: the Outcome or the
ledger's `finish` publish failed during a NATS node restart ("handler failed; redelivering",
NoStreamResponseError), or a transient API error mid-batch released it after its first creates
landed. If its RayCluster was deleted meanwhile, admission refused the redelivery and answered
"403, not applied" for every command, although the ledger said the batch was done (or partly
applied). The reconciler believed it and dropped the batch's create expectations (their names
queued for reuse: the creates would be decided again). Now a refusal first revokes the batch in
the ledger (create-if-absent), and a batch the ledger already knows goes the ledger's way:
answered from its results when done; when a transient error released it, the ledger records what
landed plus the refusal for the rest (re-applying it created a deleted cluster's Pods again, seen
in the chaos soak); a lapsed claim is taken over and re-applied (idempotent, named creates). Only
a record claimed for the very same body counts: another body under a recorded id is never applied
nor answered. Real nats-server, local API server and executor.
"""

from __future__ import annotations

import time
from pathlib import Path

import nats

from command_executor.app import CommandExecutorService, ExecutorSettings
from raybus.adapters.kube import KubeClient, new_api_client
from raybus.bus import subjects as s
from raybus.bus.codec import encode
from raybus.bus.envelopes import CommandBatch, CommandResult, Outcome
from raybus.bus.ledger import BatchLedger, command_key, digest_of
from raybus.bus.publish import publish_commands
from raybus.bus.streams import ensure_streams
from raybus.decisions.commands import CreateObject
from raybus_sim.testing.servers import NatsServer
from tests.integration.boundary.conftest import last_msg, sample_raycluster, until
from tests.integration.boundary.test_admission import POD, RAYCLUSTER, batch, dead_letters, outcome, pod


def digest(batch: CommandBatch) -> str:
    """What the executor records a batch under: the digest of the bytes it receives."""
    return digest_of(encode(batch))


async def test_a_redelivered_batch_of_a_deleted_cluster_is_answered_as_the_ledger_says(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    rc = await kube.create(RAYCLUSTER, sample_raycluster("rc"), namespace="default")
    uid = rc["metadata"]["uid"]
    ledger = await BatchLedger.open(js)
    service = CommandExecutorService(ExecutorSettings(nats_url=nats_server.url, kubeconfig=str(kubeconfig),
                                                      replica_id="x0", nak_delay_s=0.2, ack_wait_s=1.0,
                                                      admission_wait_s=2.0))
    await service.start()
    try:
        # 1. Applied and recorded done, its Outcome never published (the executor's publish
        #    failed and the message came back): the create landed.
        done = batch(uid, CreateObject(reason="Created head Pod", object=pod("rc-head-a", owner_uid=uid)))
        await kube.create(POD, pod("rc-head-a", owner_uid=uid), namespace="default")
        claim = await ledger.claim(command_key(done.reconcile_id), controller="cluster", digest=digest(done),
                                   holder="x9/dead", lease_s=5.0, now=time.time())
        assert claim.won
        assert await ledger.finish(command_key(done.reconcile_id), revision=claim.revision, now=time.time(),
                                   digest=digest(done), results=[
            CommandResult(op="create", target="Pod/default/rc-head-a", ok=True, code=201, resource_version="1")])
        # 2. Claimed, its first create landed, then released after a transient API error (500
        #    on the second create).
        released = batch(uid, CreateObject(reason="Created worker Pod", object=pod("rc-worker-b", owner_uid=uid)),
                         CreateObject(reason="Created worker Pod", object=pod("rc-worker-b2", owner_uid=uid)))
        await kube.create(POD, pod("rc-worker-b", owner_uid=uid), namespace="default")
        claim = await ledger.claim(command_key(released.reconcile_id), controller="cluster",
                                   digest=digest(released), holder="x9/dead", lease_s=5.0, now=time.time())
        await ledger.release(command_key(released.reconcile_id), revision=claim.revision, digest=digest(released),
                             applied=[
            CommandResult(op="create", target="Pod/default/rc-worker-b", ok=True, code=201, resource_version="7"),
            CommandResult(op="create", target="Pod/default/rc-worker-b2", ok=False, code=500)])
        # 3. Never claimed: admission refuses it, and the refusal is now final in the ledger.
        fresh = batch(uid, CreateObject(reason="Created worker Pod", object=pod("rc-worker-c", owner_uid=uid)))

        await kube.delete(RAYCLUSTER, namespace="default", name="rc")

        async def seen_gone() -> bool:
            return service.admission is not None and service.admission.view.gone(uid)
        await until(seen_gone, what="the executor's informer seeing rc deleted")
        # (one at a time: the test reads each Outcome as the subject's last)
        await publish_commands(js, done)
        first = await outcome(js, "rc", done.reconcile_id)
        assert [(r.ok, r.code) for r in first.results] == [(True, 201)], first.results  # not "403, refused"
        await publish_commands(js, released)
        second = await outcome(js, "rc", released.reconcile_id)
        # Not re-applied (that would create a deleted cluster's Pod again): what landed stands,
        # the rest is refused, and the ledger says so for every later copy.
        assert [(r.ok, r.code, r.resource_version) for r in second.results] == [
            (True, 201, "7"), (False, 403, None)], second.results
        record, _ = await ledger.get(command_key(released.reconcile_id))
        assert record is not None and record.state == "done" and record.results == second.results
        pods, _ = await kube.list_all(POD, namespace="default")
        assert "rc-worker-b2" not in {p["metadata"]["name"] for p in pods}
        await publish_commands(js, fresh)
        third = await outcome(js, "rc", fresh.reconcile_id)
        assert not third.results[0].ok and third.results[0].code == 403
        record, _ = await ledger.get(command_key(fresh.reconcile_id))
        assert record is not None and record.state == "done" and not record.results[0].ok  # final
        letters = await dead_letters(js)
        assert fresh.reconcile_id in letters and done.reconcile_id not in letters
        assert released.reconcile_id not in letters
        # 4. Another body under the done batch's id (a forged copy): never applied, never answered.
        forged = done.model_copy(update={"commands": [CreateObject(reason="x", object=pod(
            "rc-worker-forged", owner_uid=uid, privileged=True))]})
        seq = (await js.stream_info(s.STREAM_DEAD_LETTERS)).state.last_seq
        await js.publish(s.command_subject("cluster", "default", "rc"), forged.model_dump_json().encode())

        async def foreign() -> bool:
            return (await js.stream_info(s.STREAM_DEAD_LETTERS)).state.last_seq > seq
        await until(foreign, what="the forged copy dead-lettered")
        last = await last_msg(js, s.STREAM_OUTCOMES, s.outcome_subject("cluster", "default", "rc"))
        assert last is not None and Outcome.model_validate_json(last.data).reconcile_id == fresh.reconcile_id
        pods, _ = await kube.list_all(POD, namespace="default")
        assert "rc-worker-forged" not in {p["metadata"]["name"] for p in pods}
    finally:
        await service.stop()
        await kube.close()
        await nc.close()
