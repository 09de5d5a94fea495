"""Partition leases in a NATS KV bucket: one replica owns a partition at a time.

Why leases over partitions (and not one leader, as KubeRay has): any number of reconciler
replicas share the work, each owning about partitions/replicas of it, and a key is only ever
reconciled by the owner of its partition. The bucket's TTL expires a dead owner's lease; a live
owner renews with compare-and-set on the revision it holds, so two replicas can't both hold one.
An owner that could not renew for half the TTL stops acting on the partition (self-fencing)
before anyone else can have acquired it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass, field

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from raybus.bus import subjects as s

log = logging.getLogger(__name__)


@dataclass
class LeaseChanges:
    acquired: set[int] = field(default_factory=set)
    lost: set[int] = field(default_factory=set)


class PartitionLeases:
    def __init__(self, kv: KeyValue, js: JetStreamContext, *, controller: s.Controller, replica_id: str,
                 partitions: int, ttl_s: float) -> None:
        self._kv = kv
        self._js = js
        self._controller = controller
        self._replica = replica_id
        self._partitions = partitions
        self._ttl = ttl_s
        self.held: dict[int, int] = {}  # partition -> KV revision we wrote last
        self._renewed_at: dict[int, float] = {}
        self._members_seen = 1

    def _preference(self) -> list[int]:
        # Rendezvous hashing: each replica prefers a different, stable subset of partitions, so
        # replicas starting together rarely contend for the same leases.
        def score(p: int) -> bytes:
            return hashlib.blake2b(f"{self._replica}/{p}".encode(), digest_size=8).digest()
        return sorted(range(self._partitions), key=score, reverse=True)

    async def _members(self) -> int:
        """Live replicas of this controller: the member keys (the bucket's TTL expires a dead
        one's), counted from the stream's per-subject state. Not `kv.keys()`: that creates an
        ephemeral consumer at every tick, which the server refuses right after SIGKILLs ("maximum
        consumers limit reached": the killed processes' consumers have not expired), and on a
        3-node cluster its listing
        can end empty (consumer info asked before the consumer knows its pending count)."""
        bucket = f"$KV.{s.KV_LEASES}."
        prefix = f"{bucket}{s.member_prefix(self._controller)}"
        try:
            info = await self._js.stream_info(f"KV_{s.KV_LEASES}", subjects_filter=f"{prefix}>")
        except (APIError, NatsTimeoutError) as exc:
            # e.g. a NATS node restart. The member count only sizes the fair share, so the last
            # one seen does until the next tick; failing here made a restarted replica exit.
            log.warning("lease members unknown, keeping the last count", extra={"error": str(exc)})
            return self._members_seen
        self._members_seen = max(1, sum(1 for subject in info.state.subjects or {} if subject.startswith(prefix)))
        return self._members_seen

    def valid(self, partition: int) -> bool:
        """False once a renewal has been missing for half the TTL (stop acting before expiry)."""
        renewed = self._renewed_at.get(partition)
        return renewed is not None and time.monotonic() - renewed < self._ttl / 2

    async def tick(self, *, releasable: set[int] | None = None) -> LeaseChanges:
        """Renew, rebalance to a fair share, acquire free partitions. Call every ttl/4 or so."""
        changes = LeaseChanges()
        await self._kv.put(s.member_key(self._controller, self._replica), self._replica.encode())
        for p, rev in list(self.held.items()):
            try:
                self.held[p] = await self._kv.update(s.lease_key(self._controller, p),
                                                     self._replica.encode(), last=rev)
                self._renewed_at[p] = time.monotonic()
            except (KeyWrongLastSequenceError, NotFoundError):
                log.warning("lost partition lease", extra={"partition": p})
                self.held.pop(p, None)
                self._renewed_at.pop(p, None)
                changes.lost.add(p)
        share = math.ceil(self._partitions / await self._members())
        if len(self.held) > share:
            extra = len(self.held) - share
            for p in [p for p in self._preference()[::-1] if p in self.held]:
                if extra == 0:
                    break
                if releasable is not None and p not in releasable:
                    continue
                await self.release(p)
                changes.lost.add(p)
                extra -= 1
        for p in self._preference():
            if len(self.held) >= share:
                break
            if p in self.held:
                continue
            try:
                self.held[p] = await self._kv.create(s.lease_key(self._controller, p),
                                                     self._replica.encode())
                self._renewed_at[p] = time.monotonic()
                changes.acquired.add(p)
            except (KeyWrongLastSequenceError, KeyNotFoundError):
                # Someone else holds it; or it changed under nats-py's create, which after a
                # "wrong last sequence" reads the key back and raises KeyNotFoundError when a
                # replica released it meanwhile (a replica restarting while others rebalance
                # meets it). Either way: not ours this tick.
                continue
        return changes

    async def release(self, partition: int) -> None:
        rev = self.held.pop(partition, None)
        self._renewed_at.pop(partition, None)
        if rev is None:
            return
        try:
            await self._kv.delete(s.lease_key(self._controller, partition), last=rev)
        except (KeyWrongLastSequenceError, NotFoundError):
            pass

    async def release_all(self) -> None:
        for p in list(self.held):
            await self.release(p)
        try:
            await self._kv.delete(s.member_key(self._controller, self._replica))
        except NotFoundError:
            pass
