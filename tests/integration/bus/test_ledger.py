"""The command ledger on a real nats-server: every transition is a compare-and-set, so a batch is
applied by at most one holder at a time, never after it was revoked, never twice once done, and a
record vouches only for the body it was claimed for."""

from __future__ import annotations

import asyncio

import nats

from raybus.bus.envelopes import CommandResult
from raybus.bus.ledger import BatchLedger, digest_of, with_landed
from raybus_sim.testing.servers import NatsServer

NOW = 1_000_000.0
D = digest_of(b"the batch")


async def _ledger(nats_server: NatsServer) -> tuple[nats.NATS, BatchLedger]:
    nc = await nats.connect(nats_server.url)
    return nc, await BatchLedger.open(nc.jetstream())


async def test_one_winner_among_concurrent_claims_and_no_takeover_under_a_live_lease(
        nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        claims = await asyncio.gather(*(ledger.claim("b1", controller="cluster", digest=D, holder=f"h{i}", lease_s=5, now=NOW)
                                        for i in range(8)))
        winners = [c for c in claims if c.won]
        assert len(winners) == 1
        losers = [c for c in claims if not c.won]
        assert all(c.record is not None and c.record.state == "applying" for c in losers)
        # Still leased: a redelivery to another replica must not start a second application.
        again = await ledger.claim("b1", controller="cluster", digest=D, holder="late", lease_s=5, now=NOW + 4.9)
        assert not again.won
    finally:
        await nc.close()


async def test_takeover_after_the_lease_lapses_fences_the_old_holder(nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        first = await ledger.claim("b2", controller="cluster", digest=D, holder="dead", lease_s=5, now=NOW)
        taken = await ledger.claim("b2", controller="cluster", digest=D, holder="alive", lease_s=5, now=NOW + 6)
        assert first.won and taken.won
        # The old holder comes back: its renewal and its finish both fail, so only one reports.
        assert await ledger.renew("b2", holder="dead", revision=first.revision, lease_s=5, now=NOW + 7,
                                  digest=D) is None
        assert not await ledger.finish("b2", digest=D, revision=first.revision, results=[], now=NOW + 7)
        assert await ledger.finish("b2", digest=D, revision=taken.revision, results=[], now=NOW + 7)
    finally:
        await nc.close()


async def test_revoke_wins_only_before_any_claim(nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        revoked = await ledger.revoke("b3", controller="cluster", now=NOW)
        assert revoked is not None and revoked.state == "revoked"
        late = await ledger.claim("b3", controller="cluster", digest=D, holder="executor", lease_s=5, now=NOW + 1)
        assert not late.won and late.record is not None and late.record.state == "revoked"

        claimed = await ledger.claim("b4", controller="cluster", digest=D, holder="executor", lease_s=5, now=NOW)
        assert claimed.won
        after = await ledger.revoke("b4", controller="cluster", now=NOW + 1)
        assert after is not None and after.state == "applying"  # too late: keep waiting
    finally:
        await nc.close()


async def test_done_batch_is_answered_from_the_record(nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        claim = await ledger.claim("b5", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW)
        results = [CommandResult(op="create", target="Pod/default/p", ok=True, code=201)]
        assert await ledger.finish("b5", digest=D, revision=claim.revision, results=results, now=NOW + 1)
        again = await ledger.claim("b5", controller="cluster", digest=D, holder="y", lease_s=5, now=NOW + 100)
        assert not again.won and again.record is not None
        assert again.record.state == "done" and again.record.results == results
        released = await ledger.claim("b6", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW)
        await ledger.release("b6", digest=D, revision=released.revision)
        retaken = await ledger.claim("b6", controller="cluster", digest=D, holder="z", lease_s=5, now=NOW + 0.1)
        assert retaken.won  # a released claim (transient error) is free at once
    finally:
        await nc.close()


def _create(name: str, *, ok: bool, code: int) -> CommandResult:
    return CommandResult(op="create", target=f"Pod/default/{name}", ok=ok, code=code)


async def test_what_an_earlier_delivery_landed_stays_on_record_through_later_errors(
        nats_server: NatsServer) -> None:
    """A worker batch of the 2-minute soak: delivery 1 created a and b and met an API 500 on c;
    delivery 2 created c (201) and met a 500 elsewhere; delivery 3 met a 500 on c itself. The
    record must still say c was created, through every claim, renewal and release."""
    nc, ledger = await _ledger(nats_server)
    try:
        first = await ledger.claim("b7", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW)
        assert first.landed == ()
        await ledger.release("b7", digest=D, revision=first.revision, applied=[
            _create("a", ok=True, code=201), _create("b", ok=True, code=201), _create("c", ok=False, code=500)])
        second = await ledger.claim("b7", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW + 1)
        assert [r.target for r in second.landed] == ["Pod/default/a", "Pod/default/b"]
        renewed = await ledger.renew("b7", holder="x", revision=second.revision, lease_s=5, now=NOW + 2, digest=D,
                                     landed=second.landed)
        assert renewed is not None
        applied = with_landed(second.landed, [_create("a", ok=True, code=409), _create("b", ok=True, code=409),
                                              _create("c", ok=True, code=201)])
        await ledger.release("b7", digest=D, revision=renewed, applied=applied)
        third = await ledger.claim("b7", controller="cluster", digest=D, holder="y", lease_s=5, now=NOW + 3)
        assert {r.target: r.code for r in third.landed} == {
            "Pod/default/a": 409, "Pod/default/b": 409, "Pod/default/c": 201}
        # delivery 3: a 500 on c, the rest skipped; admission then refuses the 4th (cluster deleted)
        await ledger.release("b7", digest=D, revision=third.revision, applied=with_landed(third.landed, [
            _create("a", ok=False, code=500), _create("b", ok=False, code=0), _create("c", ok=False, code=0)]))
        refused = await ledger.refuse("b7", digest=D, now=NOW + 4, answer=list)
        assert refused is not None and refused.state == "done"
        assert {r.target: (r.ok, r.code) for r in refused.results} == {
            "Pod/default/a": (True, 409), "Pod/default/b": (True, 409), "Pod/default/c": (True, 201)}
    finally:
        await nc.close()


async def test_finish_keeps_an_earlier_deliverys_create_that_now_failed(nats_server: NatsServer) -> None:
    nc, ledger = await _ledger(nats_server)
    try:
        first = await ledger.claim("b8", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW)
        await ledger.release("b8", digest=D, revision=first.revision, applied=[
            _create("a", ok=True, code=201), _create("b", ok=False, code=500)])
        last = await ledger.claim("b8", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW + 1)  # the last allowed delivery
        assert await ledger.finish("b8", digest=D, revision=last.revision, now=NOW + 2,
                                   results=with_landed(last.landed, [_create("a", ok=False, code=500),
                                                                     _create("b", ok=False, code=0)]))
        record, _ = await ledger.get("b8")
        assert record is not None and record.state == "done"
        assert [(r.target, r.ok, r.code) for r in record.results] == [
            ("Pod/default/a", True, 201), ("Pod/default/b", False, 0)]
    finally:
        await nc.close()


async def test_a_record_vouches_only_for_the_body_it_was_claimed_for(nats_server: NatsServer) -> None:
    """Another body under an admitted batch's id is `foreign`: never claimed, never taken over,
    not even once the first holder's lease lapsed; and a refusal leaves the real record alone."""
    nc, ledger = await _ledger(nats_server)
    forged = digest_of(b"a forged batch")
    try:
        first = await ledger.claim("b9", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW)
        assert first.won
        for now in (NOW + 1, NOW + 60):  # live lease, lapsed lease
            other = await ledger.claim("b9", controller="cluster", digest=forged, holder="y", lease_s=5, now=now)
            assert (other.won, other.foreign) == (False, True)
        standing = await ledger.refuse("b9", digest=forged, now=NOW + 61, answer=list)
        assert standing is not None and standing.digest == D  # returned unchanged, not answered for
        record, _ = await ledger.get("b9")
        assert record is not None and record.state == "applying" and record.digest == D and record.holder == "x"
        # A body refused by admission first: its refusal stands for every later copy.
        assert await ledger.refuse("b10", digest=forged, now=NOW, answer=lambda landed: []) is None
        again = await ledger.claim("b10", controller="cluster", digest=forged, holder="x", lease_s=5, now=NOW + 1)
        assert not again.won and again.record is not None and again.record.state == "done"
    finally:
        await nc.close()


async def test_the_revocation_register_is_per_controller_and_first_writer_wins(nats_server: NatsServer) -> None:
    """A reconciler's revoke and an applier's claim race on one register: whoever writes first
    decides. Another controller's revoke of the same key is its own register: it decides nothing."""
    nc, ledger = await _ledger(nats_server)
    try:
        other = await ledger.revoke("b11", controller="job", now=NOW)  # the job-reconciler's password
        assert other is not None and other.state == "revoked"
        mine = await ledger.claim("b11", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW)
        assert mine.won  # a cluster batch: the job-reconciler's register does not stop it
        late = await ledger.revoke("b11", controller="cluster", now=NOW + 1)
        assert late is not None and late.state == "applying"  # claimed first: the reconciler waits
        # claimed marker first, before the record: a revoke in between still loses
        first = await ledger.revoke("b12", controller="cluster", now=NOW)
        assert first is not None and first.state == "revoked"
        after = await ledger.claim("b12", controller="cluster", digest=D, holder="x", lease_s=5, now=NOW + 1)
        assert not after.won and after.record is not None and after.record.state == "revoked"
    finally:
        await nc.close()
