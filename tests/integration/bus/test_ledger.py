"""The command ledger on a real nats-server: every transition is a compare-and-set, so a batch is
applied by at most one holder at a time, never after it was revoked, and never twice once done."""

from __future__ import annotations

import asyncio

import nats

from raybus.bus.envelopes import CommandResult
from raybus.bus.ledger import BatchLedger
from raybus.testing.servers import NatsServer

NOW = 1_000_000.0


async def _ledger(nats_server: NatsServer) -> tuple[nats.NATS, BatchLedger]:
    nc = await nats.connect(nats_server.url)
    return nc, await BatchLedger.open(nc.jetstream())


async def test_one_winner_among_concurrent_claims_and_no_takeover_under_a_live_lease(
        nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        claims = await asyncio.gather(*(ledger.claim("b1", holder=f"h{i}", lease_s=5, now=NOW)
                                        for i in range(8)))
        winners = [c for c in claims if c.won]
        assert len(winners) == 1
        losers = [c for c in claims if not c.won]
        assert all(c.record is not None and c.record.state == "applying" for c in losers)
        # Still leased: a redelivery to another replica must not start a second application.
        again = await ledger.claim("b1", holder="late", lease_s=5, now=NOW + 4.9)
        assert not again.won
    finally:
        await nc.close()


async def test_takeover_after_the_lease_lapses_fences_the_old_holder(nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        first = await ledger.claim("b2", holder="dead", lease_s=5, now=NOW)
        taken = await ledger.claim("b2", holder="alive", lease_s=5, now=NOW + 6)
        assert first.won and taken.won
        # The old holder comes back: its renewal and its finish both fail, so only one reports.
        assert await ledger.renew("b2", holder="dead", revision=first.revision, lease_s=5, now=NOW + 7) is None
        assert not await ledger.finish("b2", revision=first.revision, results=[], now=NOW + 7)
        assert await ledger.finish("b2", revision=taken.revision, results=[], now=NOW + 7)
    finally:
        await nc.close()


async def test_revoke_wins_only_before_any_claim(nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        revoked = await ledger.revoke("b3", now=NOW)
        assert revoked is not None and revoked.state == "revoked"
        late = await ledger.claim("b3", holder="executor", lease_s=5, now=NOW + 1)
        assert not late.won and late.record is not None and late.record.state == "revoked"

        claimed = await ledger.claim("b4", holder="executor", lease_s=5, now=NOW)
        assert claimed.won
        after = await ledger.revoke("b4", now=NOW + 1)
        assert after is not None and after.state == "applying"  # too late: keep waiting
    finally:
        await nc.close()


async def test_done_batch_is_answered_from_the_record(nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        claim = await ledger.claim("b5", holder="x", lease_s=5, now=NOW)
        results = [CommandResult(op="create", target="Pod/default/p", ok=True, code=201)]
        assert await ledger.finish("b5", revision=claim.revision, results=results, now=NOW + 1)
        again = await ledger.claim("b5", holder="y", lease_s=5, now=NOW + 100)
        assert not again.won and again.record is not None
        assert again.record.state == "done" and again.record.results == results
        released = await ledger.claim("b6", holder="x", lease_s=5, now=NOW)
        await ledger.release("b6", revision=released.revision)
        retaken = await ledger.claim("b6", holder="z", lease_s=5, now=NOW + 0.1)
        assert retaken.won  # a released claim (transient error) is free at once
    finally:
        await nc.close()
