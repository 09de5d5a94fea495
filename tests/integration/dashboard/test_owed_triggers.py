"""A trigger the poller could not publish is owed until NATS takes it, by the same replica or
by the one that takes over. Found by the 2-minute chaos soak beside two CPU hogs: a RayJob's end
was observed and published, the trigger to its owner failed (a NATS node killed), and every later
read equalled the published observation, so the job stayed Running for good.

The fault is real: the triggers stream is deleted, so the publish meets "no responders" exactly
as it did while the stream's node was down, and is created again afterwards."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NATS
from nats.js.api import StreamConfig

from dashboard_poller.heads import Heads
from raybus.adapters.dashboard_models import JobSubmitRequest
from raybus.bus import subjects as s
from raybus.bus.publish import DASHBOARD_KIND
from raybus_sim.testing.servers import NatsServer
from tests.integration.dashboard.conftest import Sim
from tests.integration.dashboard.poller_kit import (
    CLUSTER,
    NS,
    ObservationTap,
    Reconciler,
    start_poller,
    until,
)

pytestmark = pytest.mark.integration


async def _job_running_then_triggers_down(sim: Sim, nc: NATS, tap: ObservationTap, owner: Reconciler,
                                          job_id: str) -> StreamConfig:
    """Submit a short job, wait until the poller observed it RUNNING, then take the triggers
    stream away; returns its config to create it again."""
    await sim.client().submit_job(JobSubmitRequest(entrypoint="sleep 3", submission_id=job_id))
    assert await owner.want(jobs=[job_id])
    await until(lambda: _observed(tap, job_id, "RUNNING"), what=f"{job_id} RUNNING observed")
    config = (await nc.jetstream().stream_info(s.trigger_stream(s.Controller.JOB))).config
    await nc.jetstream().delete_stream(s.trigger_stream(s.Controller.JOB))
    return config


async def _observed(tap: ObservationTap, job_id: str, status: str) -> int:
    """The stream sequence of the first observation with the job in `status` (0: none yet)."""
    for seq, o in tap.seen:
        job = o.observation.jobs.get(job_id)
        if job is not None and job.status == status:
            return seq
    return 0


async def test_a_failed_trigger_is_published_once_nats_takes_it(nats_server: NatsServer, sim: Sim, nc: NATS,
                                                                tap: ObservationTap) -> None:
    owner = Reconciler(nc)
    poller = await start_poller(nats_server.url, sim)
    heads = poller.heads
    assert heads is not None
    try:
        config = await _job_running_then_triggers_down(sim, nc, tap, owner, "j-owed")
        ended = await until(lambda: _observed(tap, "j-owed", "SUCCEEDED"), what="the job's end observed")
        # Its trigger met the missing stream: owed, not forgotten.
        await until(lambda: _owed(heads, ended), what="the end's trigger owed")
        await nc.jetstream().add_stream(config)
        await until(lambda: _trigger_is(owner, ended), what="the owed trigger published")
        await until(lambda: _nothing_owed(heads), what="nothing owed any more")
    finally:
        await poller.stop()


async def test_a_takeover_triggers_owners_of_recent_observations_again(nats_server: NatsServer, sim: Sim,
                                                                         nc: NATS, tap: ObservationTap) -> None:
    """The leader that owed the trigger stops before NATS takes it (as if killed): the replica
    that takes over cannot know, so it triggers the owners of observations published within the
    window a dead leader could have left unannounced."""
    owner = Reconciler(nc)
    first = await start_poller(nats_server.url, sim, replica="p0")
    heads = first.heads
    assert heads is not None
    try:
        config = await _job_running_then_triggers_down(sim, nc, tap, owner, "j-handover")
        ended = await until(lambda: _observed(tap, "j-handover", "SUCCEEDED"), what="the job's end observed")
        await until(lambda: _owed(heads, ended), what="the end's trigger owed")
    finally:
        await first.stop()  # its owed trigger goes with it
    await nc.jetstream().add_stream(config)
    assert await owner.trigger_seq() is None
    second = await start_poller(nats_server.url, sim, replica="p1")
    try:
        await until(lambda: _trigger_is(owner, ended), what="the takeover's trigger")
    finally:
        await second.stop()


async def _owed(heads: Heads, seq: int) -> bool:
    return heads.owed.get((NS, CLUSTER), (0, "", ()))[0] == seq


async def _nothing_owed(heads: Heads) -> bool:
    return not heads.owed


async def _trigger_is(owner: Reconciler, seq: int) -> bool:
    return await owner.trigger_seq() == (DASHBOARD_KIND, seq)
