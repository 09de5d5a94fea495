"""Dashboard commands: submit/stop/delete a Ray job, PUT/DELETE the Serve config.

Consumed from RAYBUS_DASHBOARD_COMMANDS through the durable pull consumer `dashboard-poller`
(explicit acks, `runtime.pull.PullWorkers`: in-progress acks while a command waits for its head or
runs, so ack_wait stays short). Each command goes through the command ledger (`bus/ledger.py`,
key `dashboard_ledger_key(command_id)`) like the executor's batches, so whatever JetStream
redelivers or duplicates, and whichever replica gets it:
- a command is executed at most once while its record lives (a redelivered `done` command is
  answered from the record: the same result is published again, nothing is sent to the head);
- a command its reconciler revoked is answered `failed`/`expired` and never executed;
- a claim is a lease renewed while the command waits for the head's lock and runs; a replica that
  dies mid-command loses it and the next one executes it again, which is safe because every
  command is idempotent on the head (a duplicate submission id, a stop of a terminal job, a delete
  of a missing job are successes; PUT is declarative).
After the write the poller reads the affected part back under the same lock and publishes the
observation if it changed, then one DashboardResultMessage (carrying that observation's sequence)
and a trigger for the owner. A write that timed out is `unknown`, never assumed done or failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Literal

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from dashboard_poller.admission import DashboardAdmission
from dashboard_poller.heads import Heads
from raybus.adapters.dashboard import (
    DashboardError,
    DashboardGarbage,
    DashboardOutcomeUnknown,
    DashboardTransientError,
    JobAlreadyExists,
    JobNotFound,
    RayDashboardClient,
)
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.bus import subjects as s
from raybus.bus.codec import dead_letter, decode_or_dead_letter
from raybus.bus.envelopes import CommandResult, DashboardCommandMessage, DashboardResultMessage
from raybus.bus.ledger import BatchLedger, BatchRecord, digest_of
from raybus.bus.publish import (
    DASHBOARD_RESULT_KIND,
    dashboard_ledger_key,
    publish_dashboard_result,
    publish_trigger,
)
from raybus.decisions.dashboard_contract import (
    DashboardCommandResult,
    DeleteJob,
    DeleteServeApps,
    PutServeConfig,
    StopJob,
    SubmitJob,
)
from raybus.decisions.dashboard_poll import ClusterWant, JobsRequest, PollPlan, PollState
from raybus.observability.metrics import DASHBOARD_COMMANDS, MESSAGES
from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)
SERVICE = "dashboard-poller"
DLQ_REASON = "Raybus-Dlq-Reason"  # the refusal reason token, as the command-executor's
# CommandResult.error_reason values used to keep a DashboardCommandResult's state in the ledger.
_STATE_REASON = {"failed": "DashboardCommandFailed", "unknown": "DashboardOutcomeUnknown"}
State = Literal["ok", "failed", "unknown"]
Outcome = tuple[State, str]


# How long a takeover waits for the head to say whether the lapsed holder's write landed.
TAKEOVER_LOOK_S = 20.0
# How long a write's read-back observation publish is retried (a NATS election takes seconds;
# the soak restarts a killed node 2-8 s later).
READ_BACK_PUBLISH_S = 30.0


class _HeadCannotSay(Exception):
    pass


async def already_done(client: RayDashboardClient, command: DashboardCommandMessage, *,
                       look_s: float = TAKEOVER_LOOK_S) -> Outcome | None:
    """A command taken over from a holder whose claim lapsed may have been executed by it: look
    before sending it again (the chaos soak saw a Serve config PUT twice: the first holder's ledger
    finish was blocked by a NATS election past its lease). A submission the head knows, or a Serve
    config every app of which the head already runs as given, is done; None: send it.

    A head that cannot answer (times out, garbage) is asked again for up to `look_s`: sending
    blind is what put a config twice in the soak (the poller SIGKILLed right after its PUT, the
    head timing out when the next one took the command over). Still no answer: `unknown`, not
    sent; the owner decides again as after any write without a definite answer."""
    try:
        async for attempt in AsyncRetrying(stop=stop_after_delay(look_s),
                                           wait=wait_exponential(multiplier=0.25, min=0.25, max=4.0),
                                           retry=retry_if_exception_type(_HeadCannotSay), reraise=True):
            with attempt:
                return await _look(client, command)
    except _HeadCannotSay as exc:
        return "unknown", f"taken over from a holder that may have sent it; the head could not say ({exc}): not sent"
    raise AssertionError("unreachable: AsyncRetrying reraises")


async def _look(client: RayDashboardClient, command: DashboardCommandMessage) -> Outcome | None:
    c = command.command
    try:
        if isinstance(c, SubmitJob):
            try:
                await client.get_job_info(c.job_id)
            except JobNotFound:
                return None
            return "ok", f"submission id {c.job_id} found after a takeover: not sent again"
        if isinstance(c, PutServeConfig):
            deployed = {name: app.deployed_app_config
                        for name, app in (await client.get_serve_details()).applications.items()}
            wanted = c.config.get("applications") or []
            if wanted and all(_within(app, deployed.get(str(app.get("name", "default")))) for app in wanted):
                return "ok", "Serve config found on the head after a takeover: not sent again"
    except DashboardTransientError as exc:
        raise _HeadCannotSay(str(exc)[:200]) from exc
    except DashboardError:
        return None  # the head answered, without it (e.g. 400 on a head with no Serve): send it
    return None


def _within(want: object, have: object) -> bool:
    """Every field of `want` is in `have` with the same value (the head may add defaults)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_within(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_within, want, have))
    return want == have


async def execute(client: RayDashboardClient, command: DashboardCommandMessage) -> Outcome:
    """Send one command; map the head's answer to ok / failed / unknown (idempotent successes
    are ok). A refused connection is `failed` (nothing was sent); anything after sending without
    a definite answer is `unknown`."""
    c = command.command
    try:
        if isinstance(c, SubmitJob):
            try:
                await client.submit_job(JobSubmitRequest(
                    entrypoint=c.entrypoint, submission_id=c.job_id, runtime_env=c.runtime_env,
                    metadata=c.metadata, entrypoint_num_cpus=c.entrypoint_num_cpus,
                    entrypoint_num_gpus=c.entrypoint_num_gpus,
                    entrypoint_resources=c.entrypoint_resources))
                return "ok", f"submitted {c.job_id}"
            except JobAlreadyExists:
                return "ok", f"submission id {c.job_id} already exists"  # KubeRay: not an error
        if isinstance(c, StopJob):
            try:
                stopped = await client.stop_job(c.job_id)
                return "ok", "stop requested" if stopped else "job already terminal"
            except JobNotFound:
                return "ok", f"job {c.job_id} does not exist: nothing to stop"
        if isinstance(c, DeleteJob):
            try:
                await client.delete_job(c.job_id)
                return "ok", f"deleted {c.job_id}"
            except JobNotFound:
                return "ok", f"job {c.job_id} does not exist: nothing to delete"
        if isinstance(c, PutServeConfig):
            await client.update_deployments(c.config)
            return "ok", f"Serve config {c.config_hash} applied"
        if isinstance(c, DeleteServeApps):
            await client.shutdown_serve()
            return "ok", "Serve shut down"
    except (DashboardOutcomeUnknown, DashboardGarbage) as exc:
        return "unknown", f"no definite answer ({exc}); state read back into the observation"
    except DashboardError as exc:
        return "failed", str(exc)[:500]
    raise AssertionError(f"unknown dashboard command {type(c).__name__}")  # pragma: no cover


def read_back_plan(want: ClusterWant, command: DashboardCommandMessage) -> tuple[ClusterWant, PollPlan]:
    """Read back the part the command touched (its job, or the Serve apps), as declared plus it."""
    c = command.command
    if isinstance(c, SubmitJob | StopJob | DeleteJob):
        jobs = tuple(sorted({*want.jobs, c.job_id}))
        want = want.model_copy(update={"jobs": jobs})
        single = len(jobs) == 1
        return want, PollPlan(jobs=JobsRequest(job_id=jobs[0] if single else None, declared=jobs))
    return want.model_copy(update={"serve": True}), PollPlan(serve=True)


class CommandRunner:
    def __init__(self, heads: Heads, *, nc: NATS, ledger: BatchLedger, replica_id: str,
                 lease_s: float, admission: DashboardAdmission | None = None) -> None:
        self._heads = heads
        self._nc = nc
        self._ledger = ledger
        self._admission = admission
        self._replica = replica_id
        self._lease_s = lease_s
        self.executed = 0  # observable for tests
        self.answered_from_ledger = 0

    async def handle(self, msg: Msg) -> None:
        command = await decode_or_dead_letter(DashboardCommandMessage, data=msg.data, subject=msg.subject,
                                              nc=self._nc, service=SERVICE)
        if command is None:
            MESSAGES.labels(SERVICE, "dashcmd", "dead_letter").inc()
            await msg.ack()
            return
        seq = msg.metadata.sequence.stream if msg.metadata else 0
        key = dashboard_ledger_key(command.command_id)
        digest = digest_of(msg.data)
        if self._admission is not None and not await self._admitted(msg, command, key=key, digest=digest, seq=seq):
            return
        holder = f"{self._replica}/{uuid.uuid4().hex[:8]}"
        claim = await self._ledger.claim(key, controller=command.controller, digest=digest, holder=holder,
                                         lease_s=self._lease_s, now=time.time())
        if claim.foreign:  # a forged copy of a command id already recorded: never executed
            log.warning("dashboard command reuses the id of another command in the ledger; not executed",
                        extra={"command_id": command.command_id, "subject": msg.subject})
            await dead_letter(self._nc, service=SERVICE, subject=msg.subject, data=msg.data,
                              error="the command ledger holds another command under this id")
            await msg.ack()
            return
        if not claim.won:
            await self._answer_unclaimed(msg, command, claim.record, seq=seq)
            return
        task = asyncio.ensure_future(self._run(command, taken_over=claim.taken_over))
        revision = claim.revision
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self._lease_s / 3)
                if done:
                    break
                renewed = await self._ledger.renew(key, holder=holder, revision=revision,
                                                   lease_s=self._lease_s, now=time.time(), digest=digest)
                if renewed is None:
                    log.warning("lost the claim on a dashboard command; stopping",
                                extra={"command_id": command.command_id})
                    await cancel_and_wait([task])
                    return
                revision = renewed
        except BaseException:  # cancelled, or a renewal failed (NATS gone): no orphan write task
            await cancel_and_wait([task])
            raise
        result, obs_seq = task.result()
        record = CommandResult(op=result.op, target=result.cluster, ok=result.state == "ok",
                               error_reason=_STATE_REASON.get(result.state), message=result.message)
        if not await self._finish(key, revision=revision, record=record, digest=digest):
            return  # another replica took the claim over: it reports
        await self._report(command, result, seq=seq, observation_seq=obs_seq)
        await msg.ack()
        self.executed += 1

    async def _admitted(self, msg: Msg, command: DashboardCommandMessage, *, key: str, digest: str,
                        seq: int) -> bool:
        """Admission before any claim. A refusal is made final in the ledger, unless the ledger
        shows this very command claimed before (admitted then: a redelivery, answered the ledger's
        way by the claim path)."""
        assert self._admission is not None
        verdict = await self._admission.check(msg, command)
        if verdict is None:
            return False  # nak'ed: judged again later
        if verdict.admitted:
            return True
        c = command.command
        message = f"refused by the dashboard-poller's admission ({verdict.reason}): {verdict.detail}"[:1000]
        refusal = CommandResult(op=c.op, target=c.cluster, ok=False, error_reason=_STATE_REASON["failed"],
                                message=message)
        record = await self._ledger.refuse(key, digest=digest, now=time.time(), answer=lambda _: [refusal])
        if record is not None and record.digest == digest and record.state != "revoked":
            return True
        await dead_letter(self._nc, service=SERVICE, subject=msg.subject, data=msg.data,
                          error=f"refused by admission: {verdict.reason}: {verdict.detail}",
                          headers={DLQ_REASON: verdict.reason})
        if msg.subject == s.dashboard_command_subject(command.controller, command.key.namespace, command.key.name):
            # Only on the subject's own owner: a forged body never makes us publish elsewhere.
            result = DashboardCommandResult(command_id=command.command_id, op=c.op, cluster=c.cluster,
                                            state="failed", message=message)
            await self._report(command, result, seq=seq, observation_seq=0)
        await msg.ack()
        return False

    async def _finish(self, key: str, *, revision: int, record: CommandResult, digest: str) -> bool:
        """Record the executed write in the ledger, retried in place while NATS elects a leader
        (as the watcher's publishes, informer.py): a failure here would redeliver the command and,
        once the lease lapsed, execute the write again. Within half the lease the claim is ours."""
        async for attempt in AsyncRetrying(stop=stop_after_delay(self._lease_s / 2),
                                           wait=wait_exponential(multiplier=0.1, min=0.1, max=2.0),
                                           retry=retry_if_exception_type(NatsError), reraise=True):
            with attempt:
                return bool(await self._ledger.finish(key, revision=revision, results=[record], now=time.time(),
                                                      digest=digest))
        raise AssertionError("unreachable: AsyncRetrying reraises")

    async def _run(self, command: DashboardCommandMessage, *, taken_over: bool = False
                   ) -> tuple[DashboardCommandResult, int]:
        heads, c = self._heads, command.command
        namespace = command.key.namespace
        ck = (namespace, c.cluster)
        async with heads.locks[ck]:
            client = heads.client(namespace, c.cluster)
            found = await already_done(client, command) if taken_over else None
            state, message = found if found is not None else await execute(client, command)
            heads.requests += 1
            if isinstance(c, DeleteJob) and state == "ok":
                heads.deleted_jobs[ck].add(c.job_id)  # a FAILED record after this is the ghost
            elif isinstance(c, SubmitJob):
                heads.deleted_jobs[ck].discard(c.job_id)
            DASHBOARD_COMMANDS.labels(op=c.op, state=state).inc()
            log.info("dashboard command", extra={"command_id": command.command_id, "op": c.op,
                                                 "cluster": f"{namespace}/{c.cluster}", "state": state,
                                                 "reason": c.reason, "detail": message[:300]})
            want = heads.view.wants().get(ck) or ClusterWant(namespace=namespace, cluster=c.cluster)
            want, plan = read_back_plan(want, command)
            written_at = time.monotonic()
            round_result = await heads.read(want, plan)
            now = time.monotonic()
            prev = heads.states.get(ck, PollState())
            failed = round_result.failed
            # Fast cadence for a while after a write (things change now) until a read shows its
            # effect; the regular rounds keep their own bookkeeping (this read-back covered one
            # part only).
            new_state = prev.model_copy(update={
                "last_write_at": written_at, "write_seen": False,
                "failures": prev.failures + 1 if failed else 0,
                "last_success_at": prev.last_success_at if failed else now})
            heads.states[ck] = new_state
            try:
                # Retried in place (the claim is renewed meanwhile): the result must point at an
                # observation read after the write. Reported with the older one, the owner decided
                # on the state before it: the 2-minute soak saw a RayService PUT its config again
                # ("No Serve application found") when the read-back publish met a NATS election
                # and the next round's read met a head timeout, so nothing newer was published.
                async for attempt in AsyncRetrying(
                        stop=stop_after_delay(READ_BACK_PUBLISH_S), retry=retry_if_exception_type(NatsError),
                        wait=wait_exponential(multiplier=0.1, min=0.1, max=2.0), reraise=True):
                    with attempt:
                        obs_seq = await heads.observe(want, round_result, failures=new_state.failures,
                                                      reason=f"read back after {c.op}",
                                                      previous_success=prev.last_success_at,
                                                      read_at=written_at)
            except NatsError as err:
                # The write is done: a lost read-back publish must not fail the command, or its
                # redelivery executes the write again once the claim's lease lapses (the chaos
                # soak saw a Serve config PUT twice). The view keeps the older observation, so the
                # next poll round publishes the change.
                log.warning("read-back observation not published; the next round will",
                            extra={"command_id": command.command_id, "error": repr(err)})
                obs_seq = heads.view.observation(*ck)[1]
        result = DashboardCommandResult(command_id=command.command_id, op=c.op, cluster=c.cluster,
                                        state=state, message=message)
        return result, obs_seq

    async def _answer_unclaimed(self, msg: Msg, command: DashboardCommandMessage,
                                record: BatchRecord | None, *, seq: int) -> None:
        c = command.command
        if record is not None and record.state == "done" and record.results:
            done = record.results[0]
            state: State = "ok" if done.ok else (
                "unknown" if done.error_reason == _STATE_REASON["unknown"] else "failed")
            result = DashboardCommandResult(command_id=command.command_id, op=c.op, cluster=c.cluster,
                                            state=state, message=done.message)
            _, obs_seq = self._heads.view.observation(command.key.namespace, c.cluster)
            await self._report(command, result, seq=seq, observation_seq=obs_seq)
            await msg.ack()
            self.answered_from_ledger += 1
            return
        if record is not None and record.state == "revoked":
            log.info("dashboard command revoked by its reconciler; not executed",
                     extra={"command_id": command.command_id})
            result = DashboardCommandResult(
                command_id=command.command_id, op=c.op, cluster=c.cluster, state="failed", expired=True,
                message="revoked by the reconciler before the dashboard-poller executed it")
            await self._report(command, result, seq=seq, observation_seq=0)
            await msg.ack()
            return
        # Held under a live lease (another replica mid-takeover, or a duplicate delivery to us).
        wait = max(0.2, (record.lease_until - time.time()) if record is not None else 1.0)
        await msg.nak(delay=min(wait + 0.1, self._lease_s))

    async def _report(self, command: DashboardCommandMessage, result: DashboardCommandResult, *,
                      seq: int, observation_seq: int) -> None:
        js = self._nc.jetstream()
        message = DashboardResultMessage(
            key=command.key, kind=command.kind, uid=command.uid,
            resource_version=command.resource_version, controller=command.controller, result=result,
            finished_at=datetime.now(UTC), command_seq=seq, observation_seq=observation_seq)
        result_seq = await publish_dashboard_result(js, message)
        await publish_trigger(js, controller=s.Controller(command.controller), key=command.key,
                              kind=command.kind, cause=f"dashboard {result.op} {result.state}",
                              objects_seq=result_seq, cause_kind=DASHBOARD_RESULT_KIND,
                              partitions=self._heads.settings.partitions)
