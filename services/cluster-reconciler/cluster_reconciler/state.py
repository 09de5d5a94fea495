"""What the cluster-reconciler remembers between reconciles of one RayCluster: its scale
expectations (in Redis, memoised per ownership epoch) and the auth token Secrets whose create the
API server answered (in memory).

Nothing in raybus watches Secrets (no ServiceAccount may list or watch them: one in raybus's own
namespace holds every bus credential), so the create is its own answer: 201 Created, or 409
AlreadyExists, which the command-executor counts as done too (decisions/cluster/auth_secret.py).
Remembered per uid: a RayCluster re-created under the same name owns none of the old one's
Secrets (the garbage collector takes them with it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raybus.adapters.redis_state import EXPECTATIONS, StateStore
from raybus.bus.envelopes import ObjectKey, Outcome
from raybus.decisions.cluster.expectations import ScaleExpectations

# The RayCluster uid stored with its expectations, and how long they outlive its deletion: longer
# than any replica's cache can lag it (KubeRay's resync is 300 s).
UID_FIELD = "uid"
DELETED_EXPECTATIONS_TTL_S = 3600


class Expectations:
    """RayClusterScaleExpectation, kept in Redis. Redis is the truth (another replica may have
    owned the key); within one ownership epoch this replica is the only writer, so its own last
    write is what Redis holds. They are the RayCluster incarnation's (`uid`): another
    incarnation's are none of its own."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._memo: dict[ObjectKey, tuple[int, str, ScaleExpectations]] = {}
        self.epoch: Callable[[ObjectKey], int] = lambda key: -1  # bound by the app

    async def load(self, key: ObjectKey, uid: str) -> ScaleExpectations:
        memo = self._memo.get(key)
        epoch = self.epoch(key)
        if memo is not None and memo[0] == epoch and memo[1] == uid:
            return memo[2]
        stored = await self._store.load(EXPECTATIONS, namespace=key.namespace, name=key.name)
        if stored and stored.get(UID_FIELD, uid) != uid:
            stored = None
        expectations = ScaleExpectations.model_validate(stored) if stored else ScaleExpectations()
        self._memo[key] = (epoch, uid, expectations)
        return expectations

    async def save(self, key: ObjectKey, uid: str, expectations: ScaleExpectations) -> None:
        await self._store.save(EXPECTATIONS, namespace=key.namespace, name=key.name,
                               value={**expectations.model_dump(mode="json"), UID_FIELD: uid})
        self._memo[key] = (self.epoch(key), uid, expectations)

    async def deleted(self, key: ObjectKey) -> None:
        """RayClusterScaleExpectation.Delete on NotFound, but kept in Redis for a while: KubeRay
        deletes them in the process whose informer saw the deletion, which never decides on that
        RayCluster again. Here the partition may move to a replica whose cache still lags the
        deletion (a NATS node restart delays one kind's ordered consumer); finding no
        expectations, it would create a head Pod and every worker again, under new names, for
        Pods the previous owner had just created. Kept, they hold that replica back as they held
        the previous owner; tagged with the uid, they never hold back a new RayCluster of the
        same name."""
        await self._store.expire(EXPECTATIONS, namespace=key.namespace, name=key.name,
                                 seconds=DELETED_EXPECTATIONS_TTL_S)
        self._memo.pop(key, None)


class AnsweredSecrets:
    def __init__(self) -> None:
        self._known: dict[ObjectKey, tuple[str, frozenset[str]]] = {}

    def record(self, outcome: Outcome) -> None:
        """Every Secret create of this Outcome that succeeded (201 or 409)."""
        names = {r.target.rpartition("/")[2] for r in outcome.results
                 if r.op == "create" and r.ok and r.target.startswith("Secret/")}
        if not names or not outcome.uid:
            return
        uid, known = self._known.get(outcome.key, ("", frozenset()))
        self._known[outcome.key] = (outcome.uid, (known if uid == outcome.uid else frozenset()) | names)

    def secrets(self, key: ObjectKey, uid: str) -> list[dict[str, Any]]:
        """The snapshot's `secrets` for this incarnation: metadata only, names sorted."""
        known_uid, names = self._known.get(key, ("", frozenset()))
        if not uid or known_uid != uid:
            return []
        return [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": n, "namespace": key.namespace}}
                for n in sorted(names)]

    def forget(self, key: ObjectKey) -> None:
        self._known.pop(key, None)
