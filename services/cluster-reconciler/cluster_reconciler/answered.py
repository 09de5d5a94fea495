"""The auth token Secrets whose create the API server answered, per RayCluster incarnation.

Nothing in raybus watches Secrets (no ServiceAccount may list or watch them: one in raybus's own
namespace holds every bus credential), so the create is its own answer: 201 Created, or 409
AlreadyExists, which the command-executor counts as done too (decisions/cluster/auth_secret.py).
Remembered per uid: a RayCluster re-created under the same name owns none of the old one's
Secrets (the garbage collector takes them with it)."""

from __future__ import annotations

from typing import Any

from raybus.bus.envelopes import ObjectKey, Outcome


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
