"""The poller's view of the bus: every owner's interest and the last published observation per
cluster.

Both come from last-value streams, read snapshot-first (deliver last-per-subject, `start` returns
once caught up) and then followed live, by every replica (leader or standby): a replica that takes
over compares against what was really published last, so it republishes nothing that did not
change. (Which commands are done is the command ledger's business: commands.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from raybus.bus import subjects as s
from raybus.bus.envelopes import DashboardInterestMessage, DashboardObservation
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.decisions.dashboard_poll import ClusterWant, OwnedInterest, Owner, merge_interests

log = logging.getLogger(__name__)
ClusterKey = tuple[str, str]  # namespace, RayCluster name


class BusView:
    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        # (interest subject, index) -> interest: an owner may follow several clusters
        self._interests: dict[tuple[str, int], OwnedInterest] = {}
        self._wants: dict[ClusterKey, ClusterWant] | None = None
        # cluster -> (last published observation, its stream seq, when it was published)
        self._observations: dict[ClusterKey, tuple[ClusterObservation, int, datetime]] = {}
        self.changed = asyncio.Event()  # interests changed: the scheduler looks again
        self._subs: list[Any] = []

    async def start(self, timeout_s: float = 60.0) -> None:
        for subject_filter, handler in ((s.dashboard_interest_filter(), self._on_interest),
                                        (s.dashboard_filter(), self._on_observation)):
            await self._follow(subject_filter, handler, timeout_s)
        log.info("bus view loaded", extra={"interests": len(self._interests),
                                           "observations": len(self._observations)})

    async def _follow(self, subject_filter: str, handler: Callable[[Msg], None],
                      timeout_s: float) -> None:
        caught_up = asyncio.Event()
        seen = False

        async def on_msg(msg: Msg) -> None:
            nonlocal seen
            seen = True
            handler(msg)
            if msg.metadata is not None and msg.metadata.num_pending == 0:
                caught_up.set()

        sub = await self._nc.jetstream().subscribe(
            subject_filter, ordered_consumer=True, cb=on_msg,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
        self._subs.append(sub)
        info = await sub.consumer_info()
        if (info.num_pending or 0) == 0 and sub.pending_msgs == 0 and not seen:
            caught_up.set()  # nothing on this filter yet
        await asyncio.wait_for(caught_up.wait(), timeout_s)

    async def stop(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    # --- interests ----------------------------------------------------------------------------
    def _on_interest(self, msg: Msg) -> None:
        try:
            m = DashboardInterestMessage.model_validate_json(msg.data)
        except ValidationError:
            log.warning("undecodable interest skipped", extra={"subject": msg.subject})
            return
        owner = Owner(controller=m.controller, namespace=m.key.namespace, name=m.key.name, kind=m.kind)
        for stale in [k for k in self._interests if k[0] == msg.subject]:
            del self._interests[stale]
        for index, interest in enumerate(m.all()):
            self._interests[(msg.subject, index)] = OwnedInterest(owner=owner, interest=interest)
        self._wants = None
        self.changed.set()

    def wants(self) -> dict[ClusterKey, ClusterWant]:
        if self._wants is None:
            self._wants = merge_interests(self._interests.values())
        return self._wants

    # --- observations ---------------------------------------------------------------------------
    def _on_observation(self, msg: Msg) -> None:
        try:
            m = DashboardObservation.model_validate_json(msg.data)
        except ValidationError:
            log.warning("undecodable observation skipped", extra={"subject": msg.subject})
            return
        self.record_observation(m.observation, msg.metadata.sequence.stream if msg.metadata else 0,
                                observed_at=m.observed_at)

    def record_observation(self, obs: ClusterObservation, seq: int, *, observed_at: datetime) -> None:
        """Keep the newest: our own publish is recorded at once, its echo later is no news."""
        key = (obs.namespace, obs.cluster)
        held = self._observations.get(key)
        if held is None or seq >= held[1]:
            self._observations[key] = (obs, seq, observed_at)

    def published_since(self, since: datetime) -> list[tuple[ClusterKey, int]]:
        """Clusters whose last observation was published at or after `since`, with its sequence."""
        return [(key, seq) for key, (_, seq, at) in self._observations.items() if at >= since]

    def observation(self, namespace: str, cluster: str) -> tuple[ClusterObservation | None, int]:
        held = self._observations.get((namespace, cluster))
        if held is None:
            return None, 0
        obs, seq, _ = held
        return obs, seq
