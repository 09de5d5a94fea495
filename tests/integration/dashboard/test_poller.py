"""The dashboard-poller on a real nats-server against the simulated dashboards: interests in,
observations (only changes) and command results out; faults, ghosts, leadership."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.js.errors import NoStreamResponseError

from dashboard_poller.commands import already_done
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.bus import subjects as s
from raybus.bus.codec import encode
from raybus.bus.envelopes import DashboardCommandMessage, DashboardObservation, ObjectKey
from raybus.bus.ledger import BatchLedger, digest_of
from raybus.bus.publish import DASHBOARD_KIND, DASHBOARD_RESULT_KIND, dashboard_ledger_key
from raybus.decisions.dashboard_contract import DeleteJob, PutServeConfig, StopJob, SubmitJob
from raybus.runtime.cache import ObjectCache
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.conftest import Sim
from tests.integration.dashboard.poller_kit import (
    CLUSTER,
    NS,
    ObservationTap,
    Reconciler,
    last_dashboard_seq,
    requests,
    start_poller,
    until,
)

pytestmark = pytest.mark.integration


async def test_interest_to_observations_once_per_change(nats_server: NatsServer, sim: Sim, nc: NATS,
                                                        tap: ObservationTap) -> None:
    await sim.client().submit_job(JobSubmitRequest(entrypoint="sleep 1", submission_id="j1"))
    owner = Reconciler(nc)
    await owner.tap_triggers()
    assert await owner.want(jobs=["j1"], serve=True)
    assert not await owner.want(jobs=["j1"], serve=True)  # unchanged: not republished
    poller = await start_poller(nats_server.url, sim)
    try:
        await until(lambda: _status(tap, "j1", "SUCCEEDED"), what="j1 SUCCEEDED observed")
        rounds = poller.heads.requests if poller.heads else 0
        await until(lambda: _more(poller, rounds + 4), what="more poll rounds")  # Serve keeps polling
        observations = [o.observation for _, o in tap.seen]
        assert all(a != b for a, b in itertools.pairwise(observations)), "republished"
        statuses = tap.jobs("j1")
        assert statuses[-1] == "SUCCEEDED" and "FAILED" not in statuses
        assert statuses == sorted(statuses, key=["PENDING", "RUNNING", "SUCCEEDED"].index)
        seq, last = tap.seen[-1]
        assert last.observation.serve_apps == {} and last.observation.reachable
        # the owner was triggered with the observation's sequence, for its cache's wait_for
        await until(lambda: owner.triggered(DASHBOARD_KIND, seq), what="observation trigger")
    finally:
        await poller.stop()


async def test_command_executed_once_despite_duplicates(nats_server: NatsServer, sim: Sim, nc: NATS) -> None:
    owner = Reconciler(nc)
    await owner.want(jobs=["j2"])
    poller = await start_poller(nats_server.url, sim)
    try:
        submit = SubmitJob(reason="HTTPMode submission", cluster=CLUSTER, job_id="j2", entrypoint="sleep 30",
                           metadata={"k": "v"})
        first = await owner.send("cmd-submit-j2", submit)
        assert await owner.send("cmd-submit-j2", submit) == first  # Nats-Msg-Id: stored once
        result = await until(lambda: owner.result("cmd-submit-j2"), what="result")
        # Redelivered after a crash / republished past the duplicate window: same command_id,
        # another stream message. The ledger answers it; nothing is sent to the head again.
        await nc.jetstream().publish(s.dashboard_command_subject(s.Controller.JOB, NS, "rj"),
                                     _raw_command(owner, submit), headers={"Nats-Msg-Id": "again"})
        await until(lambda: _answered(poller, 1), what="duplicate answered from the ledger")
        assert result.result.state == "ok" and result.command_seq == first
        assert (await requests(sim))["POST /api/jobs/"] == 1
        assert result.observation_seq > 0  # the read-back observation (job PENDING/RUNNING)
        got = await nc.jetstream().get_msg(s.STREAM_DASHBOARD, result.observation_seq)
        assert '"j2"' in (got.data or b"").decode()
        assert await owner.trigger_seq() is not None
    finally:
        await poller.stop()


async def test_a_failed_read_back_publish_never_executes_the_write_again(nats_server: NatsServer, sim: Sim,
                                                                         nc: NATS) -> None:
    """Found by the chaos soak (seed 5, tests/chaos/invariants_ray.py): a Serve config PUT sent
    twice to one head. The PUT was done, then the read-back's observation publish failed (a NATS
    node killed: NoStreamResponseError); the command failed with it, was redelivered, and once
    the claim's lease lapsed it was executed again. The write's result must reach the ledger."""
    owner = Reconciler(nc)
    await owner.want(jobs=["j9"])
    poller = await start_poller(nats_server.url, sim)
    assert poller.heads is not None and poller.commands is not None
    real, failed = poller.heads.observe, []

    async def publish_lost_once(*args: Any, **kwargs: Any) -> int:
        if str(kwargs.get("reason", "")).startswith("read back") and not failed:
            failed.append(kwargs["reason"])
            raise NoStreamResponseError
        return await real(*args, **kwargs)

    poller.heads.observe = publish_lost_once  # type: ignore[method-assign]
    try:
        submit = SubmitJob(reason="HTTPMode submission", cluster=CLUSTER, job_id="j9", entrypoint="sleep 30")
        await owner.send("cmd-submit-j9", submit)
        result = await until(lambda: owner.result("cmd-submit-j9"), what="result")
        assert failed and result.result.state == "ok"
        assert (await requests(sim))["POST /api/jobs/"] == 1
        # ... and the result points at the read-back (retried), not at an observation from before
        # the write: an owner deciding on that one wrote again (the 2-minute soak: a Serve PUT
        # repeated on "No Serve application found" while the head timed out the next reads).
        got = await nc.jetstream().get_msg(s.STREAM_DASHBOARD, result.observation_seq)
        seen = DashboardObservation.model_validate_json(got.data or b"").observation
        assert "j9" in seen.jobs and "j9" not in seen.jobs_missing, seen
        # Done in the ledger: any redelivery is answered from it, never executed again.
        record, _ = await (await BatchLedger.open(nc.jetstream())).get(dashboard_ledger_key("cmd-submit-j9"))
        assert record is not None and record.state == "done" and poller.commands.executed == 1
    finally:
        await poller.stop()


@pytest.mark.parametrize("op", ["submit", "put"])
async def test_a_takeover_looks_before_executing_again(nats_server: NatsServer, sim: Sim, nc: NATS, op: str) -> None:
    """The second half of the soak's Serve-PUT-twice: the first holder's ledger finish stalled
    past its lease (a NATS election) and the redelivery took the claim over. A takeover finds the
    submission / the Serve config on the head and reports ok without sending it again."""
    config = {"applications": [{"name": "a1", "route_prefix": "/", "import_path": "hello:app"}]}
    head = sim.client(CLUSTER, namespace=NS)
    if op == "submit":  # what the lapsed holder did before it stalled
        await head.submit_job(JobSubmitRequest(entrypoint="sleep 30", submission_id="j7"))
        command: Any = SubmitJob(reason="HTTPMode submission", cluster=CLUSTER, job_id="j7", entrypoint="sleep 30")
        owner, counted = Reconciler(nc), "POST /api/jobs/"
        await owner.want(jobs=["j7"])
    else:
        await head.update_deployments(config)
        command = PutServeConfig(reason="deploy", cluster=CLUSTER, config=config, config_hash="h1")
        owner, counted = Reconciler(nc, "svc", s.Controller.SERVICE), "PUT /api/serve/applications/"
        await owner.want(serve=True)
    ledger = await BatchLedger.open(nc.jetstream())
    # claimed for the very message the owner sends (its digest): a takeover, not a foreign body
    digest = digest_of(encode(owner.message(f"cmd-{op}", command)))
    lapsed = await ledger.claim(dashboard_ledger_key(f"cmd-{op}"), controller=owner.controller.value, digest=digest,
                                holder="p-dead/1", lease_s=0.01, now=0.0)
    assert lapsed.won and not lapsed.taken_over
    poller = await start_poller(nats_server.url, sim)
    try:
        await owner.send(f"cmd-{op}", command)
        result = await until(lambda: owner.result(f"cmd-{op}"), what="result")
        assert result.result.state == "ok" and "not sent again" in result.result.message
        assert (await requests(sim))[counted] == 1  # the lapsed holder's only
    finally:
        await poller.stop()


async def test_a_takeover_asks_a_silent_head_again_and_never_sends_blind(sim: Sim) -> None:
    """The soak's third Serve-PUT-twice: the poller was SIGKILLed right after its PUT, and the
    head timed out when the next poller took the command over and looked. It looks again until
    the head answers; a head that never answers gets nothing sent (`unknown`)."""
    config = {"applications": [{"name": "a1", "route_prefix": "/", "import_path": "hello:app"}]}
    head = sim.client(CLUSTER, namespace=NS)
    await head.update_deployments(config)  # what the killed holder sent
    command = DashboardCommandMessage(
        key=ObjectKey(namespace=NS, name="svc"), kind="rayservice", controller=s.Controller.SERVICE.value,
        command_id="cmd-look", command=PutServeConfig(reason="deploy", cluster=CLUSTER, config=config,
                                                      config_hash="h1"))
    looking = sim.client(CLUSTER, namespace=NS, timeout_s=0.2, get_attempts=1)
    apps = "/api/serve/applications"
    await sim.control("POST", f"/{NS}/{CLUSTER}/faults",
                      {"kind": "timeout", "count": 2, "sleep_s": 1.0, "path_contains": apps})
    found = await already_done(looking, command, look_s=10.0)
    assert found is not None and found[0] == "ok" and "not sent again" in found[1], found
    assert (await requests(sim))[f"GET {apps}/"] >= 3  # two timeouts, then the answer
    await sim.control("POST", f"/{NS}/{CLUSTER}/faults",
                      {"kind": "timeout", "count": 1000, "sleep_s": 1.0, "path_contains": apps})
    silent = await already_done(looking, command, look_s=0.5)
    assert silent is not None and silent[0] == "unknown" and "not sent" in silent[1], silent
    assert (await requests(sim))[f"PUT {apps}/"] == 1  # the killed holder's only


async def test_idempotent_and_refused_commands(nats_server: NatsServer, sim: Sim, nc: NATS) -> None:
    owner = Reconciler(nc)
    poller = await start_poller(nats_server.url, sim)
    try:
        await owner.send("del-missing", DeleteJob(reason="cleanup", cluster=CLUSTER, job_id="ghost"))
        assert (await until(lambda: owner.result("del-missing"))).result.state == "ok"
        await owner.send("sub", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 60"))
        await until(lambda: owner.result("sub"))
        await owner.send("sub-again", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 60"))
        again = await until(lambda: owner.result("sub-again"))
        assert again.result.state == "ok" and "already exists" in again.result.message
        await owner.send("del-running", DeleteJob(reason="r", cluster=CLUSTER, job_id="j"))
        refused = await until(lambda: owner.result("del-running"))
        assert refused.result.state == "failed" and "non-terminal" in refused.result.message
        await owner.send("stop", StopJob(reason="r", cluster=CLUSTER, job_id="j"))
        assert (await until(lambda: owner.result("stop"))).result.state == "ok"
    finally:
        await poller.stop()


async def test_timed_out_write_is_unknown_and_read_back(nats_server: NatsServer, sim: Sim, nc: NATS,
                                                        tap: ObservationTap) -> None:
    await sim.control("PUT", f"/{NS}/{CLUSTER}/settings", {"serve_first_put_s": 1.5})
    owner = Reconciler(nc, "svc", s.Controller.SERVICE)
    await owner.tap_triggers()
    await owner.want(serve=True)
    poller = await start_poller(nats_server.url, sim, serve_put_timeout_s=0.5)
    config = {"applications": [{"name": "a1", "route_prefix": "/", "import_path": "hello:app"}]}
    try:
        await owner.send("put-1", PutServeConfig(reason="deploy", cluster=CLUSTER, config=config,
                                                 config_hash="h1"))
        result = await until(lambda: owner.result("put-1"))
        assert result.result.state == "unknown"  # never "failed": the PUT may have landed
        seq = await _result_seq(nc)
        await until(lambda: owner.triggered(DASHBOARD_RESULT_KIND, seq), what="result trigger")
        # ... and it did: the observation (never an assumption) shows the app.
        await until(lambda: _app(tap, "a1", "RUNNING"), what="a1 RUNNING")
    finally:
        await poller.stop()


@pytest.mark.parametrize("fault", ["html_502", "invalid_json", "timeout"])
async def test_faults_back_off_and_keep_the_last_observation(nats_server: NatsServer, sim: Sim, nc: NATS,
                                                             tap: ObservationTap, fault: str) -> None:
    owner = Reconciler(nc)
    await owner.send("sub", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 120"))
    await owner.want(jobs=["j"], expect_change=True)  # fast cadence: 0.2 s
    poller = await start_poller(nats_server.url, sim)
    try:
        await until(lambda: _status(tap, "j", "RUNNING"))
        await sim.control("POST", f"/{NS}/{CLUSTER}/faults",
                          {"kind": fault, "count": 1000, "sleep_s": 1.0, "path_contains": "/api/jobs"})
        await sim.control("DELETE", f"/{NS}/{CLUSTER}/requests")
        seen, started = len(tap.seen), time.monotonic()
        await until(lambda: _unreachable(tap), what="reachable False after repeated faults")
        await until(lambda: _failures(poller, 4), what="4 failed rounds")
        # Without backoff 4 rounds at the 0.2 s cadence take 0.8 s; with it 0.4+0.8+1.6 s at least.
        assert time.monotonic() - started >= 2.5
        attempts = (await requests(sim)).get("GET /api/jobs/{id}", 0)
        assert attempts <= _failures_now(poller) + 1, attempts  # one request per round, no retries
        assert all(o.observation.jobs["j"].status == "RUNNING" for _, o in tap.seen[seen:])
        await sim.control("DELETE", f"/{NS}/{CLUSTER}/faults")
        await sim.control("PUT", f"/{NS}/{CLUSTER}/jobs/j/plan", {"finish_now": True})
        await until(lambda: _status(tap, "j", "SUCCEEDED"), what="change after the faults")
        assert tap.seen[-1][1].observation.reachable
    finally:
        await poller.stop()


async def test_ghost_after_delete_never_becomes_failed(nats_server: NatsServer, sim: Sim, nc: NATS,
                                                       tap: ObservationTap) -> None:
    owner = Reconciler(nc)
    await owner.want(jobs=["j"], expect_change=True)
    poller = await start_poller(nats_server.url, sim)
    try:
        await owner.send("sub", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 0.3"))
        await until(lambda: _status(tap, "j", "SUCCEEDED"))
        await owner.send("del", DeleteJob(reason="r", cluster=CLUSTER, job_id="j"))  # within the ghost window
        assert (await until(lambda: owner.result("del"))).result.state == "ok"
        await until(lambda: _ghost_in_sim(sim), what="the sim's ghost record")
        rounds = poller.heads.requests if poller.heads else 0
        await until(lambda: _more(poller, rounds + 2), what="two reads of the ghost")
        assert "FAILED" not in tap.jobs("j")
        final = tap.seen[-1][1].observation
        assert "j" in final.jobs_missing or final.jobs["j"].ghost
    finally:
        await poller.stop()


async def test_second_replica_stands_by_and_takes_over_without_republishing(
        nats_server: NatsServer, sim: Sim, nc: NATS, tap: ObservationTap) -> None:
    owner = Reconciler(nc)
    await owner.send("sub", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 120"))
    await owner.want(jobs=["j"], expect_change=True)
    a = await start_poller(nats_server.url, sim, "a")
    b = await start_poller(nats_server.url, sim, "b")
    try:
        assert a.active and not b.active
        await until(lambda: _status(tap, "j", "RUNNING"))
        seq = await last_dashboard_seq(nc)
        await a.stop()  # releases the lease: b takes over at its next lease round
        await until(lambda: _active(b), what="standby took over")
        before = (await requests(sim))["total"]
        await until(lambda: _requests_above(sim, before + 5), what="b polling")
        assert await last_dashboard_seq(nc) == seq  # nothing unchanged was republished
        await sim.control("PUT", f"/{NS}/{CLUSTER}/jobs/j/plan", {"finish_now": True})
        await until(lambda: _status(tap, "j", "SUCCEEDED"))
    finally:
        await b.stop()


async def test_reconciler_cache_reads_observations_and_results(nats_server: NatsServer, sim: Sim,
                                                               nc: NATS) -> None:
    owner = Reconciler(nc)
    cache = ObjectCache(nc, kinds=[s.Kind.RAYJOB], dashboard=True, dashboard_results=s.Controller.JOB)
    await cache.start()
    poller = await start_poller(nats_server.url, sim)
    try:
        await owner.want(jobs=["j"])
        await owner.send("sub", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 60"))
        result = await until(lambda: owner.result("sub"))
        kind, seq = await until(owner.trigger_seq)
        assert await cache.wait_for(seq, kind=kind, timeout=5)
        assert await cache.wait_for(result.observation_seq, kind=DASHBOARD_KIND, timeout=5)
        assert cache.dashboard_result(NS, "rj", "sub") is not None
        observed = cache.dashboard(NS, CLUSTER)
        assert observed is not None and observed.jobs["j"].status in ("PENDING", "RUNNING")
        assert cache.applied(DASHBOARD_KIND) >= result.observation_seq
        # a second cache started later loads the same snapshot
        late = ObjectCache(nc, kinds=[], dashboard=True, dashboard_results=s.Controller.JOB)
        await late.start()
        assert late.dashboard(NS, CLUSTER) == cache.dashboard(NS, CLUSTER)
        assert [r.result.command_id for r in late.dashboard_results(NS, "rj")] == ["sub"]
        await late.stop()
    finally:
        await poller.stop()
        await cache.stop()


# --- helpers ------------------------------------------------------------------------------------------
def _raw_command(owner: Reconciler, command: SubmitJob) -> bytes:
    return encode(DashboardCommandMessage(key=owner.key, kind=owner.kind, controller=owner.controller.value,
                                          command_id="cmd-submit-j2", command=command))


async def _status(tap: ObservationTap, job: str, status: str) -> bool:
    return bool(tap.jobs(job)) and tap.jobs(job)[-1] == status


async def _app(tap: ObservationTap, name: str, status: str) -> bool:
    last = tap.last()
    apps = last.observation.serve_apps if last else None
    return bool(apps) and name in apps and apps[name].status == status  # type: ignore[index,operator]


async def _unreachable(tap: ObservationTap) -> bool:
    last = tap.last()
    return last is not None and not last.observation.reachable


async def _more(poller: object, n: int) -> bool:
    heads = getattr(poller, "heads", None)
    return heads is not None and heads.requests >= n


async def _answered(poller: object, n: int) -> bool:
    commands = getattr(poller, "commands", None)
    return commands is not None and commands.answered_from_ledger >= n


async def _active(poller: object) -> bool:
    return bool(getattr(poller, "active", False))


async def _requests_above(sim: Sim, n: int) -> bool:
    return (await requests(sim))["total"] >= n


async def _ghost_in_sim(sim: Sim) -> bool:
    state = sim.registry.get(NS, CLUSTER)
    return state is not None and any(j.ghost_at is not None for j in state.jobs.jobs.values())


async def _failures(poller: object, n: int) -> bool:
    return _failures_now(poller) >= n


def _failures_now(poller: object) -> int:
    heads = getattr(poller, "heads", None)
    state = heads.states.get((NS, CLUSTER)) if heads is not None else None
    return state.failures if state is not None else 0


async def _result_seq(nc: NATS) -> int:
    return int((await nc.jetstream().stream_info(s.STREAM_DASHBOARD_RESULTS)).state.last_seq)


async def test_a_failed_activation_is_tried_again_and_commands_flow(nats_server: NatsServer, sim: Sim,
                                                                     nc: NATS) -> None:
    """The 20-minute soak (seed 12): the poller got the lease back during a NATS election, its
    commands consumer's creation timed out, and the exception ended the lease loop: it polled on
    but never executed a dashboard command again. Activation failing now leaves it on standby
    and the next lease round activates it."""
    owner = Reconciler(nc)
    poller = await start_poller(nats_server.url, sim)
    try:
        assert poller.active
        await poller._deactivate()
        js = nc.jetstream()
        config = (await js.stream_info(s.STREAM_DASHBOARD_COMMANDS)).config
        await js.delete_stream(s.STREAM_DASHBOARD_COMMANDS)  # the consumer cannot be created
        await poller._lease_round()  # must not raise
        assert not poller.active
        await js.add_stream(config)
        await poller._lease_round()
        assert poller.active
        await owner.send("sub-after", SubmitJob(reason="r", cluster=CLUSTER, job_id="ja", entrypoint="sleep 1"))
        result = await until(lambda: owner.result("sub-after"), what="result")
        assert result.result.state == "ok"
    finally:
        await poller.stop()
