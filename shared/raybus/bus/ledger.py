"""The command ledger: at most one application of every command batch, and a way to take back a
batch that nobody has started.

Why (README "Redelivery invariant"): a reconciler publishes a batch and then waits for its effect.
KubeRay never waits for a queue, so its 30 s scale-expectation timeout only covers informer lag; ours
would also have to cover queueing behind the QPS limiter, executor crashes and redeliveries, and a
timeout cannot tell "late" from "lost". The ledger makes the difference explicit, per batch, in the
NATS KV bucket `raybus-batches` (compare-and-set on every transition):

    (absent) --executor claim--> applying --executor finish--> done (results kept)
    (absent) --reconciler revoke--> revoked       applying --lease lapses--> taken over by a claim
    applying --transient API error--> released (holder "", the commands that landed kept)
    released --admission refuses the redelivery--> done (what landed, the refusal for the rest)

- The executor claims a batch before touching the API server and records the results before it
  acks. A redelivered or duplicated batch that is `done` is answered from the record (no second
  application); a `revoked` one is answered "expired" and never applied.
- A reconciler may revoke only an absent record (create-if-absent): after a successful revoke no
  executor can ever apply the batch, so giving up on it is safe; if an executor claimed it first,
  the revoke fails and the reconciler keeps waiting for the result.
- A claim carries a lease (renewed with the message's in-progress acks); a replica whose executor
  died mid-batch takes the batch over once the lease lapses and re-applies it, which is safe
  because every create names its object (409 = already done) and deletes carry uid preconditions.
"""

from __future__ import annotations

import contextlib
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
from raybus.bus.streams import stream_replicas, wait_for_stream
from raybus.observability.metrics import LEDGER_TRANSITIONS

# Longer than any batch can wait in RAYBUS_COMMANDS (its max_age, streams.py), so a revoked
# marker outlives every copy of the batch it revokes.
LEDGER_TTL_S = 2 * 3600.0

State = Literal["applying", "done", "revoked"]


class BatchRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    state: State
    holder: str = ""  # executor replica applying it ("" = released, e.g. after a transient error)
    lease_until: float = 0.0  # epoch seconds; a claim older than this may be taken over
    finished_at: float = 0.0
    results: list[CommandResult] = Field(default_factory=list)


@dataclass(frozen=True)
class Claim:
    """What a claim attempt found. `won`: this holder now applies the batch (revision for renewals).
    Otherwise `record` says why not: done (answer from it), revoked (expired), or applying under a
    live lease held by someone else."""

    won: bool
    revision: int = 0
    record: BatchRecord | None = None
    # Won over a claim whose holder's lease lapsed: that holder may have applied it already (it
    # died, or stalled past its lease, e.g. its finish blocked by a NATS election).
    taken_over: bool = False
    # Commands that landed in earlier applications of the batch (released after a transient error):
    # kept through this claim's renewals and merged into its results (`with_landed`).
    landed: tuple[CommandResult, ...] = ()


def with_landed(landed: Iterable[CommandResult], results: list[CommandResult]) -> list[CommandResult]:
    """This application's results, where a command that failed (or was skipped) now but landed in
    an earlier application keeps that earlier result: the object was written then. Seen in the
    chaos soak: a create landed (201) on a batch's second delivery, the third met an API 500 on the
    same create, and the record said the Pod was never created. Landed commands the results do
    not name are kept too, so what a record says landed only grows."""
    earlier = {(r.op, r.target): r for r in landed if r.ok}
    merged = [r if r.ok else earlier.get((r.op, r.target), r) for r in results]
    named = {(r.op, r.target) for r in results}
    return merged + [r for key, r in earlier.items() if key not in named]


def _encode(record: BatchRecord) -> bytes:
    return record.model_dump_json().encode()


def _decode(raw: bytes | None) -> BatchRecord | None:
    if not raw:
        return None
    try:
        return BatchRecord.model_validate_json(raw)
    except ValueError:
        return None


class BatchLedger:
    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, *, declare: bool = True) -> BatchLedger:
        if not declare:  # a secured bus: bus-admin created it (streams.BusSettings.declare)
            await wait_for_stream(js, f"KV_{s.KV_BATCHES}")
            return cls(await js.key_value(s.KV_BATCHES))
        try:
            kv = await js.key_value(s.KV_BATCHES)
        except (NotFoundError, BadRequestError, Exception):  # noqa: BLE001 - bucket missing
            try:
                kv = await js.create_key_value(KeyValueConfig(
                    bucket=s.KV_BATCHES, history=1, ttl=LEDGER_TTL_S, storage=StorageType.FILE,
                    replicas=stream_replicas()))
            except BadRequestError:  # created concurrently by another process
                kv = await js.key_value(s.KV_BATCHES)
        return cls(kv)

    async def get(self, batch_id: str) -> tuple[BatchRecord | None, int]:
        try:
            entry = await self._kv.get(batch_id)
        except KeyNotFoundError:
            return None, 0
        return _decode(entry.value), int(entry.revision or 0)

    async def claim(self, batch_id: str, *, holder: str, lease_s: float, now: float) -> Claim:
        """Become the applier of `batch_id`, unless it is done, revoked or held under a live lease."""
        for _ in range(5):  # lost CAS races re-read; a handful is plenty with two replicas
            record, revision = await self.get(batch_id)
            if record is None:
                mine = _encode(BatchRecord(state="applying", holder=holder, lease_until=now + lease_s))
                with contextlib.suppress(KeyWrongLastSequenceError):
                    claim = Claim(won=True, revision=await self._kv.create(batch_id, mine))
                    LEDGER_TRANSITIONS.labels("claimed").inc()
                    return claim
                continue
            if record.state != "applying":
                return Claim(won=False, record=record)
            if record.holder and record.holder != holder and record.lease_until > now:
                return Claim(won=False, record=record)
            mine = _encode(BatchRecord(state="applying", holder=holder, lease_until=now + lease_s,
                                       results=record.results))  # what landed stays on record
            with contextlib.suppress(KeyWrongLastSequenceError):
                claim = Claim(won=True, revision=await self._kv.update(batch_id, mine, last=revision),
                              taken_over=bool(record.holder) and record.holder != holder,
                              landed=tuple(record.results))
                LEDGER_TRANSITIONS.labels("taken_over" if claim.taken_over else "claimed").inc()
                return claim
        record, _ = await self.get(batch_id)
        return Claim(won=False, record=record)

    async def renew(self, batch_id: str, *, holder: str, revision: int, lease_s: float,
                    now: float, landed: Iterable[CommandResult] = ()) -> int | None:
        """Extend our lease; None if the claim was lost (someone took the batch over)."""
        record = BatchRecord(state="applying", holder=holder, lease_until=now + lease_s,
                             results=list(landed))
        try:
            return await self._kv.update(batch_id, _encode(record), last=revision)
        except KeyWrongLastSequenceError:
            return None

    async def release(self, batch_id: str, *, revision: int, applied: list[CommandResult] | None = None) -> None:
        """Give the batch back (a transient API error: it will be redelivered) without revoking it.
        `applied`: the commands that landed so far (`with_landed`: earlier deliveries' included),
        so a refusal of the redelivery (`refuse`) can still say which of them took effect."""
        record = BatchRecord(state="applying", results=[r for r in applied or [] if r.ok])
        with contextlib.suppress(KeyWrongLastSequenceError):
            await self._kv.update(batch_id, _encode(record), last=revision)
            LEDGER_TRANSITIONS.labels("released").inc()

    async def finish(self, batch_id: str, *, revision: int, results: list[CommandResult],
                     now: float) -> bool:
        """Record the results (the executor merges earlier deliveries' in, `with_landed`); False
        if our claim was lost meanwhile (the new holder reports)."""
        record = BatchRecord(state="done", finished_at=now, results=results)
        try:
            await self._kv.update(batch_id, _encode(record), last=revision)
        except KeyWrongLastSequenceError:
            return False
        LEDGER_TRANSITIONS.labels("finished").inc()
        return True

    async def revoke(self, batch_id: str, *, now: float) -> BatchRecord | None:
        """Take back a batch no executor has claimed. Returns the record that now stands: `revoked`
        if we won, otherwise whatever the executor wrote (applying/done)."""
        try:
            await self._kv.create(batch_id, _encode(BatchRecord(state="revoked", finished_at=now)))
            LEDGER_TRANSITIONS.labels("revoked").inc()
            return BatchRecord(state="revoked", finished_at=now)
        except KeyWrongLastSequenceError:
            record, _ = await self.get(batch_id)
            return record


    async def refuse(self, batch_id: str, *, now: float,
                     answer: Callable[[list[CommandResult]], list[CommandResult]]) -> BatchRecord | None:
        """Admission refuses a batch (e.g. its RayCluster was deleted meanwhile): make that final.
        Absent: revoked (as `revoke`), nothing of it was applied. Released after a transient error
        (nobody holds it): done, with `answer(applied)` as its results, i.e. the commands that
        landed before the error and the refusal for the rest. Re-applying it instead would create
        a deleted cluster's Pods again under names already used (seen in the chaos soak: a worker
        batch retried through API 500s after its cluster's deletion). Done, or held by a replica
        (live or lapsed lease): returned unchanged, the claim path answers it."""
        for _ in range(5):  # lost CAS races re-read
            record, revision = await self.get(batch_id)
            if record is None:
                standing = await self.revoke(batch_id, now=now)
                if standing is not None and standing.state == "applying" and not standing.holder:
                    continue  # claimed and released in between: finish it as released
                return standing
            if record.state != "applying" or record.holder:
                return record
            finished = BatchRecord(state="done", finished_at=now, results=answer(record.results))
            with contextlib.suppress(KeyWrongLastSequenceError):
                await self._kv.update(batch_id, _encode(finished), last=revision)
                LEDGER_TRANSITIONS.labels("refused").inc()
                return finished
        record, _ = await self.get(batch_id)
        return record


def describe_record(record: BatchRecord | None) -> str:
    if record is None:
        return "absent"
    return json.dumps({"state": record.state, "holder": record.holder})
