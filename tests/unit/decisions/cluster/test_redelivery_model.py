"""The redelivery invariant, as a hypothesis state machine over the real decision code and a model
of the bus (issue: "never a duplicate pod when commands are late").

The model is the pipeline with every way a command can be late: the reconciler (reconcile_cluster
+ the adapter's steps: expectations saved before publishing, batch states resolved from Outcomes,
"published by me", then the ledger with revocation), a work queue of batches delivered in any
order, redelivered and duplicated, an executor that claims batches in the ledger and may crash
mid-batch (leaving its claim to lapse), Outcomes that may be lost, an informer cache that lags the
API server by any amount (KubeRay assumes less than its 30 s ExpectationsTimeout; raybus waits for
the cache to pass each create's resourceVersion instead), pods that fail, a clock that jumps past
every timeout, and reconciler restarts that forget everything in memory. Invariants: never two head Pods at once; once everything has been
delivered and the reconciler has settled, exactly one head and the desired number of workers.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from raybus.decisions.batches import IN_FLIGHT, BatchState
from raybus.decisions.cluster.expectations import ScaleExpectations
from raybus.decisions.cluster.reconcile import ClusterSnapshot, CommandFailure, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject, DeleteObject
from tests.unit.decisions.cluster.test_reconcile_helpers import T0, make_cluster, running, worker_group

SETTINGS = OperatorSettings()


@dataclass
class Result:
    target: str
    ok: bool
    rv: int | None = None  # resourceVersion of a created object


@dataclass
class Ledger:
    """bus/ledger.py: absent -> applying -> done | absent -> revoked (compare-and-set)."""

    state: dict[str, str] = field(default_factory=dict)
    results: dict[str, list[Result]] = field(default_factory=dict)
    finished: dict[str, datetime] = field(default_factory=dict)


def _pod_target(name: str) -> str:
    return f"Pod/ns/{name}"


class RedeliveryModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.desired = 2
        self.api: dict[str, dict[str, Any]] = {}  # pods in the API server
        self.services: list[dict[str, Any]] = []
        self.cache: dict[str, dict[str, Any]] = {}  # the reconciler's (lagging) view of pods
        self.redis = ScaleExpectations()
        self.queue: list[tuple[str, list[Any]]] = []  # batches in RAYBUS_COMMANDS
        self.ledger = Ledger()
        self.outcomes: dict[str, BatchState] = {}  # Outcomes this reconciler process has seen
        self.last_failures: list[CommandFailure] = []
        self.published: set[str] = set()  # "published by me" (lost on restart)
        self.reject_next_create = False
        self.ids = itertools.count()
        self.max_heads = 0
        self.rv = 0  # the API server's resourceVersion counter
        self.watermark: int | None = None  # highest resourceVersion the cache has applied

    # --- the reconciler --------------------------------------------------------------------------
    def _state(self, batch_id: str) -> BatchState:
        """runtime/batches.BatchResolver.state."""
        if batch_id in self.outcomes:
            return self.outcomes[batch_id]
        state = self.ledger.state.get(batch_id)
        if state is None and batch_id in self.published:
            return IN_FLIGHT  # queued, not lost: never revoke our own published batch
        if state is None:
            self.ledger.state[batch_id] = "revoked"  # revoke: create-if-absent
            self.ledger.finished[batch_id] = self.now
            state = "revoked"
        if state == "applying":
            return IN_FLIGHT
        return self._settled(batch_id)

    def _settled(self, batch_id: str) -> BatchState:
        if self.ledger.state[batch_id] == "revoked":
            return BatchState(settled=True, finished_at=self.ledger.finished[batch_id], revoked=True)
        results = self.ledger.results[batch_id]
        return BatchState(settled=True, finished_at=self.ledger.finished[batch_id],
                          not_applied=frozenset(r.target for r in results if not r.ok),
                          created_rv={r.target: r.rv for r in results if r.ok and r.rv is not None})

    def _cluster(self) -> Any:
        return make_cluster(groups=[worker_group("small", replicas=self.desired, maxReplicas=10)])

    @rule(publish=st.booleans())
    def reconcile(self, publish: bool) -> None:
        batch_id = f"b{next(self.ids)}"
        snapshot = ClusterSnapshot(
            cluster=self._cluster(), pods=list(self.cache.values()), services=list(self.services),
            expectations=self.redis, last_failures=self.last_failures,
            batches={b: self._state(b) for b in self.redis.batches()}, batch_id=batch_id,
            pods_watermark=self.watermark)
        decision = reconcile_cluster(snapshot, settings=SETTINGS, now=self.now, entropy=batch_id)
        self.redis = decision.expectations  # saved before publishing
        commands = [c for c in decision.commands if isinstance(c, CreateObject | DeleteObject)]
        if not commands:
            return
        if publish:  # else: the reconciler crashed between saving and publishing
            self.published.add(batch_id)
            self.queue.append((batch_id, commands))

    @rule()
    def restart_reconciler(self) -> None:
        """A new process (or another replica taking over): memory is gone, Redis stays."""
        self.published.clear()
        self.outcomes.clear()
        self.last_failures = []

    # --- the executor ------------------------------------------------------------------------------
    def _apply(self, cmd: Any) -> Result:
        if isinstance(cmd, CreateObject):
            meta = cmd.object["metadata"]
            target = f"{cmd.object['kind']}/ns/{meta['name']}"
            if cmd.object["kind"] == "Service":
                if all(s["metadata"]["name"] != meta["name"] for s in self.services):
                    self.services.append(copy.deepcopy(cmd.object))
                return Result(target, True)
            if self.reject_next_create and meta["name"] not in self.api:
                self.reject_next_create = False
                return Result(target, False)  # e.g. 403 quota
            if meta["name"] not in self.api:
                self.rv += 1
                pod = running(copy.deepcopy(cmd.object))
                pod["metadata"]["resourceVersion"] = str(self.rv)
                self.api[meta["name"]] = pod
            heads = [p for p in self.api.values() if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
            self.max_heads = max(self.max_heads, len(heads))
            # 201 with the new object's version; 409 AlreadyExists: the executor reads it back
            return Result(target, True, int(self.api[meta["name"]]["metadata"]["resourceVersion"]))
        target = f"Pod/ns/{cmd.target.name}"
        if self.api.pop(cmd.target.name, None) is not None:
            self.rv += 1
        return Result(target, True)

    @rule(data=st.data(), crash_after=st.one_of(st.none(), st.integers(0, 3)),
          duplicate=st.booleans(), lose_outcome=st.booleans())
    def deliver(self, data: st.DataObject, crash_after: int | None, duplicate: bool,
                lose_outcome: bool) -> None:
        if not self.queue:
            return
        index = data.draw(st.integers(0, len(self.queue) - 1))  # any order
        batch_id, commands = self.queue[index]
        state = self.ledger.state.get(batch_id)
        if state in ("done", "revoked"):  # answered from the ledger, never applied again
            self.queue.pop(index)
            if not lose_outcome:
                self.outcomes[batch_id] = self._settled(batch_id)
            return
        self.ledger.state[batch_id] = "applying"  # claimed (or taken over after a lapsed lease)
        results: list[Result] = []
        for i, cmd in enumerate(commands):
            if crash_after is not None and i >= crash_after:
                return  # executor died mid-batch: the message stays queued, redelivered later
            result = self._apply(cmd)
            results.append(result)
            if not result.ok:  # the batch stops at its first failure; the rest never ran
                results += [Result(f"Pod/ns/{c.object['metadata']['name']}" if isinstance(c, CreateObject)
                                   else f"Pod/ns/{c.target.name}", False) for c in commands[i + 1:]]
                break
        self.ledger.state[batch_id] = "done"
        self.ledger.results[batch_id] = results
        self.ledger.finished[batch_id] = self.now
        if not duplicate:  # a duplicate keeps the message queued (JetStream redelivery)
            self.queue.pop(index)
        if not lose_outcome:
            self.outcomes[batch_id] = self._settled(batch_id)
            failed = [r for r in results if not r.ok]
            self.last_failures = [CommandFailure(reason="FailedCreateWorkerPod", target=r.target)
                                  for r in failed[:1]]

    # --- the world -----------------------------------------------------------------------------------
    @rule()
    def sync_cache(self) -> None:
        self.cache = copy.deepcopy(self.api)
        self.watermark = self.rv

    @rule(seconds=st.sampled_from([1, 5, 29, 31, 120, 600]))
    def tick(self, seconds: int) -> None:
        # No bound on how far the cache may lag: commands and watches may both be late by any
        # amount (a create's expectation waits for the cache to pass its resourceVersion).
        self.now += timedelta(seconds=seconds)

    @rule(desired=st.integers(0, 4))
    def scale(self, desired: int) -> None:
        self.desired = desired

    @rule()
    def reject_a_create(self) -> None:
        self.reject_next_create = True

    @precondition(lambda self: bool(self.api))
    @rule(data=st.data())
    def pod_fails(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.api)))
        self.rv += 1
        self.api[name]["status"]["phase"] = "Failed"
        self.api[name]["metadata"]["resourceVersion"] = str(self.rv)

    # --- invariants ------------------------------------------------------------------------------------
    @invariant()
    def never_two_heads(self) -> None:
        assert self.max_heads <= 1

    def teardown(self) -> None:
        """Settle: deliver everything, let the cache catch up and time pass, reconcile to a fixpoint."""
        self.reject_next_create = False
        for _ in range(40):
            while self.queue:
                batch_id, commands = self.queue[0]
                if self.ledger.state.get(batch_id) in ("done", "revoked"):
                    self.queue.pop(0)
                    self.outcomes[batch_id] = self._settled(batch_id)
                    continue
                self.ledger.state[batch_id] = "applying"
                results = [self._apply(c) for c in commands]
                self.ledger.state[batch_id] = "done"
                self.ledger.results[batch_id] = results
                self.ledger.finished[batch_id] = self.now
                self.outcomes[batch_id] = self._settled(batch_id)
                self.queue.pop(0)
            self.last_failures = []
            self.sync_cache()
            self.now += timedelta(seconds=40)
            self.reconcile(publish=True)
            if not self.queue and self.redis.is_empty() or not self.queue and _stable(self):
                break
        heads = [p for p in self.api.values() if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
        workers = [p for p in self.api.values() if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
        assert self.max_heads <= 1
        assert len(heads) == 1, sorted(self.api)
        assert len(workers) == self.desired, (len(workers), self.desired, sorted(self.api))


def _stable(model: RedeliveryModel) -> bool:
    return all(p["status"]["phase"] == "Running" for p in model.api.values())


RedeliveryModel.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestRedelivery = RedeliveryModel.TestCase
