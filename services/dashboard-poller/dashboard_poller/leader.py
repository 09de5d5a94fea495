"""One active dashboard-poller at a time: a lease in the `raybus-leases` KV bucket.

Why one active replica and not partitions (as the reconcilers have): the poller's point is that a
Ray head never sees two raybus requests at once, which needs one process to serialise a head's
polls and writes; a poller's work (a few hundred small GETs a minute) fits one process easily.
Standby replicas follow the same streams (BusView), so a takeover republishes nothing unchanged
and repeats no command that has a result. As with partition leases: create to acquire, renew
with compare-and-set on our revision, the bucket TTL expires a dead holder, and a holder that
could not renew for half the TTL stops acting before anyone else can acquire.
"""

from __future__ import annotations

import logging
import time

from nats.js.errors import KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from raybus.bus import subjects as s

log = logging.getLogger(__name__)
LEASE_KEY = s.POLLER_LEASE_KEY


class LeaderLease:
    def __init__(self, kv: KeyValue, *, replica_id: str, ttl_s: float, key: str = LEASE_KEY) -> None:
        self._kv = kv
        self._replica = replica_id
        self._ttl = ttl_s
        self._key = key
        self._revision: int | None = None
        self._renewed_at: float | None = None

    def valid(self) -> bool:
        return (self._revision is not None and self._renewed_at is not None
                and time.monotonic() - self._renewed_at < self._ttl / 2)

    async def tick(self) -> bool:
        """Renew or try to acquire; True while this replica may act. Call every ttl/5."""
        if self._revision is not None:
            try:
                self._revision = await self._kv.update(self._key, self._replica.encode(),
                                                       last=self._revision)
                self._renewed_at = time.monotonic()
            except (KeyWrongLastSequenceError, NotFoundError):
                log.warning("lost the dashboard-poller lease")
                self._revision = self._renewed_at = None
        if self._revision is None:
            try:
                self._revision = await self._kv.create(self._key, self._replica.encode())
                self._renewed_at = time.monotonic()
                log.info("acquired the dashboard-poller lease", extra={"replica": self._replica})
            except KeyWrongLastSequenceError:
                return False  # another replica holds it
        return self.valid()

    async def release(self) -> None:
        revision, self._revision, self._renewed_at = self._revision, None, None
        if revision is None:
            return
        try:
            await self._kv.delete(self._key, last=revision)
        except (KeyWrongLastSequenceError, NotFoundError):
            pass
