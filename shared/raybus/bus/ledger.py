"""The command ledger: at most one application of every command batch (and dashboard command), a
way to take back one that nobody has started, and records only the appliers write.

Why (docs/architecture.md "The redelivery invariant"): a reconciler publishes a batch and then waits
for its effect. KubeRay never waits for a queue, so its 30 s scale-expectation timeout only covers
informer lag; ours would also have to cover queueing behind the QPS limiter, executor crashes and
redeliveries, and a timeout cannot tell "late" from "lost". The ledger makes the difference
explicit, per batch.

Two NATS KV buckets, because NATS permissions are per subject and a KV write's header (create-if-
absent, compare-and-set) is not: whoever may write a key may write any record there.

- `raybus-batches`, the ledger, written only by the appliers: the command-executor under
  `cmd.<batch id>`, the dashboard-poller under `dash.<command id>`. Every record carries the
  SHA-256 digest of the message it was claimed for, so "admitted before" is proven only by a record
  the applier wrote for that very body.

      (absent) --claim--> applying --finish--> done (results kept)
      applying --lease lapses--> taken over by a claim
      applying --transient API error--> released (holder "", the commands that landed kept)
      (absent or released) --admission refuses--> done (what landed, the refusal for the rest)
      (absent) --revoked first--> revoked

- `raybus-revocations`, one register per batch under `<controller>.<ledger key>`, where the first
  writer wins (create-if-absent): a reconciler writes `revoked` (only under its own controller's
  prefix), an applier writes `claimed` before it first touches anything. A successful revoke means
  no applier has claimed the batch, nor ever will; a failed one means one has, and the reconciler
  waits for its record. A reconciler that writes `claimed` itself only gives up its own revoke.

A claim is a lease (renewed with the message's in-progress acks); a replica whose applier died
mid-batch takes it over once the lease lapses and re-applies it, which is safe because every
create names its object (409 = already done) and deletes carry uid preconditions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, Field

from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandResult
from raybus.bus.streams import wait_for_stream
from raybus.observability.metrics import LEDGER_TRANSITIONS

# Longer than any batch can wait in RAYBUS_COMMANDS (its max_age, streams.py), so a record
# outlives every copy of the batch it is about.
LEDGER_TTL_S = 2 * 3600.0

State = Literal["applying", "done", "revoked"]
REVOKED, CLAIMED = b"revoked", b"claimed"


def digest_of(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class BatchRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    state: State
    holder: str = ""  # applier replica applying it ("" = released, e.g. after a transient error)
    lease_until: float = 0.0  # epoch seconds; a claim older than this may be taken over
    finished_at: float = 0.0
    results: list[CommandResult] = Field(default_factory=list)
    digest: str = ""  # of the message claimed: a different body under the same id is not this batch


@dataclass(frozen=True)
class Claim:
    """What a claim attempt found. `won`: this holder now applies the batch (revision for renewals).
    Otherwise `record` says why not: done (answer from it), revoked (expired), applying under a
    live lease held by someone else, or (`foreign`) a record of another body under this id."""

    won: bool
    revision: int = 0
    record: BatchRecord | None = None
    # Won over a claim whose holder's lease lapsed: that holder may have applied it already (it
    # died, or stalled past its lease, e.g. its finish blocked by a NATS election).
    taken_over: bool = False
    # Commands that landed in earlier applications of the batch (released after a transient error):
    # kept through this claim's renewals and merged into its results (`with_landed`).
    landed: tuple[CommandResult, ...] = ()
    foreign: bool = False


def with_landed(landed: Iterable[CommandResult], results: list[CommandResult]) -> list[CommandResult]:
    """This application's results, where a command that failed (or was skipped) now but landed in
    an earlier application keeps that earlier result: the object was written then (a create that
    landed on a second delivery and met an API 500 on the third is still created). Landed commands
    the results do not name are kept too, so what a record says landed only grows."""
    earlier = {(r.op, r.target): r for r in landed if r.ok}
    merged = [r if r.ok else earlier.get((r.op, r.target), r) for r in results]
    named = {(r.op, r.target) for r in results}
    return merged + [r for key, r in earlier.items() if key not in named]


def command_key(batch_id: str) -> str:
    """The ledger key of a command batch."""
    return f"cmd.{batch_id}"


def _encode(record: BatchRecord) -> bytes:
    return record.model_dump_json().encode()


def _decode(raw: bytes | None) -> BatchRecord | None:
    if not raw:
        return None
    try:
        return BatchRecord.model_validate_json(raw)
    except ValueError:
        return None


async def _bucket(js: JetStreamContext, name: str, *, declare: bool, replicas: int) -> KeyValue:
    if not declare:  # a secured bus: bus-admin created it (streams.BusSettings.declare)
        await wait_for_stream(js, f"KV_{name}")
        return await js.key_value(name)
    try:
        return await js.key_value(name)
    except (NotFoundError, BadRequestError, Exception):  # noqa: BLE001 - bucket missing
        try:
            return await js.create_key_value(KeyValueConfig(
                bucket=name, history=1, ttl=LEDGER_TTL_S, storage=StorageType.FILE, replicas=replicas))
        except BadRequestError:  # created concurrently by another process
            return await js.key_value(name)


class BatchLedger:
    def __init__(self, kv: KeyValue, revocations: KeyValue) -> None:
        self._kv = kv
        self._revocations = revocations

    @classmethod
    async def open(cls, js: JetStreamContext, *, declare: bool = True, replicas: int = 1) -> BatchLedger:
        return cls(await _bucket(js, s.KV_BATCHES, declare=declare, replicas=replicas),
                   await _bucket(js, s.KV_REVOCATIONS, declare=declare, replicas=replicas))

    async def get(self, key: str) -> tuple[BatchRecord | None, int]:
        try:
            entry = await self._kv.get(key)
        except KeyNotFoundError:
            return None, 0
        return _decode(entry.value), int(entry.revision or 0)

    # --- the reconcilers' side ------------------------------------------------------------------
    async def revoke(self, key: str, *, controller: str, now: float) -> BatchRecord | None:
        """Take back a batch no applier has claimed. Returns the record that now stands: `revoked`
        if we won; otherwise the applier's record (`applying` while it has not written one yet)."""
        try:
            await self._revocations.create(f"{controller}.{key}", REVOKED)
            LEDGER_TRANSITIONS.labels("revoked").inc()
            return BatchRecord(state="revoked", finished_at=now)
        except KeyWrongLastSequenceError:
            pass
        if await self.register(key, controller=controller) == REVOKED:
            return BatchRecord(state="revoked", finished_at=now)
        record, _ = await self.get(key)
        return record or BatchRecord(state="applying")  # claimed; its record is on its way

    async def register(self, key: str, *, controller: str) -> bytes | None:
        """What won the batch's revocation register: REVOKED, CLAIMED, or None (nobody yet)."""
        try:
            return (await self._revocations.get(f"{controller}.{key}")).value
        except KeyNotFoundError:
            return None

    # --- the appliers' side ------------------------------------------------------------------------
    async def _mark_claimed(self, controller: str, key: str) -> bool:
        """Win the batch's register before touching anything; False: its reconciler revoked it."""
        with contextlib.suppress(KeyWrongLastSequenceError):
            await self._revocations.create(f"{controller}.{key}", CLAIMED)
            return True
        return await self.register(key, controller=controller) != REVOKED

    async def claim(self, key: str, *, controller: str, digest: str, holder: str, lease_s: float,
                    now: float) -> Claim:
        """Become the applier of `key`, unless it is done, revoked, held under a live lease, or
        recorded for another body."""
        for _ in range(5):  # lost CAS races re-read; a handful is plenty with two replicas
            record, revision = await self.get(key)
            if record is None:
                if not await self._mark_claimed(controller, key):
                    revoked = BatchRecord(state="revoked", finished_at=now, digest=digest)
                    with contextlib.suppress(KeyWrongLastSequenceError):
                        await self._kv.create(key, _encode(revoked))
                    return Claim(won=False, record=revoked)
                mine = _encode(BatchRecord(state="applying", holder=holder, lease_until=now + lease_s,
                                           digest=digest))
                with contextlib.suppress(KeyWrongLastSequenceError):
                    claim = Claim(won=True, revision=await self._kv.create(key, mine))
                    LEDGER_TRANSITIONS.labels("claimed").inc()
                    return claim
                continue
            if record.digest != digest:
                return Claim(won=False, record=record, foreign=True)
            if record.state != "applying":
                return Claim(won=False, record=record)
            if record.holder and record.holder != holder and record.lease_until > now:
                return Claim(won=False, record=record)
            mine = _encode(BatchRecord(state="applying", holder=holder, lease_until=now + lease_s,
                                       results=record.results, digest=digest))  # what landed stays
            with contextlib.suppress(KeyWrongLastSequenceError):
                claim = Claim(won=True, revision=await self._kv.update(key, mine, last=revision),
                              taken_over=bool(record.holder) and record.holder != holder,
                              landed=tuple(record.results))
                LEDGER_TRANSITIONS.labels("taken_over" if claim.taken_over else "claimed").inc()
                return claim
        record, _ = await self.get(key)
        return Claim(won=False, record=record)

    async def renew(self, key: str, *, holder: str, revision: int, lease_s: float, now: float,
                    digest: str, landed: Iterable[CommandResult] = ()) -> int | None:
        """Extend our lease; None if the claim was lost (someone took the batch over)."""
        record = BatchRecord(state="applying", holder=holder, lease_until=now + lease_s,
                             results=list(landed), digest=digest)
        try:
            return await self._kv.update(key, _encode(record), last=revision)
        except KeyWrongLastSequenceError:
            return None

    async def release(self, key: str, *, revision: int, digest: str,
                      applied: list[CommandResult] | None = None) -> None:
        """Give the batch back (a transient API error: it will be redelivered) without revoking it.
        `applied`: the commands that landed so far (`with_landed`: earlier deliveries' included),
        so a refusal of the redelivery (`refuse`) can still say which of them took effect."""
        record = BatchRecord(state="applying", results=[r for r in applied or [] if r.ok], digest=digest)
        with contextlib.suppress(KeyWrongLastSequenceError):
            await self._kv.update(key, _encode(record), last=revision)
            LEDGER_TRANSITIONS.labels("released").inc()

    async def finish(self, key: str, *, revision: int, results: list[CommandResult], now: float,
                     digest: str) -> bool:
        """Record the results (the applier merges earlier deliveries' in, `with_landed`); False
        if our claim was lost meanwhile (the new holder reports)."""
        record = BatchRecord(state="done", finished_at=now, results=results, digest=digest)
        try:
            await self._kv.update(key, _encode(record), last=revision)
        except KeyWrongLastSequenceError:
            return False
        LEDGER_TRANSITIONS.labels("finished").inc()
        return True

    async def refuse(self, key: str, *, digest: str, now: float,
                     answer: Callable[[list[CommandResult]], list[CommandResult]]) -> BatchRecord | None:
        """Admission refuses a batch: make that final, so no later copy is ever claimed. Absent:
        done with the refusal (nothing of it was applied). Released after a transient error, for
        this body (nobody holds it): done, with `answer(applied)`, i.e. the commands that landed
        before the error and the refusal for the rest (re-applying it would recreate a deleted
        cluster's Pods under names already used). Done, held by a replica (live or lapsed lease),
        or recorded for another body: returned unchanged, the caller answers it."""
        for _ in range(5):  # lost CAS races re-read
            record, revision = await self.get(key)
            if record is None:
                refused = BatchRecord(state="done", finished_at=now, results=answer([]), digest=digest)
                with contextlib.suppress(KeyWrongLastSequenceError):
                    await self._kv.create(key, _encode(refused))
                    LEDGER_TRANSITIONS.labels("refused").inc()
                    return None
                continue
            if record.digest != digest or record.state != "applying" or record.holder:
                return record
            finished = BatchRecord(state="done", finished_at=now, results=answer(record.results), digest=digest)
            with contextlib.suppress(KeyWrongLastSequenceError):
                await self._kv.update(key, _encode(finished), last=revision)
                LEDGER_TRANSITIONS.labels("refused").inc()
                return finished
        record, _ = await self.get(key)
        return record


def describe_record(record: BatchRecord | None) -> str:
    if record is None:
        return "absent"
    return json.dumps({"state": record.state, "holder": record.holder})
