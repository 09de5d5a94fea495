"""The auth token Secrets the cluster-reconciler knows exist, from its creates' Outcomes (nothing
watches Secrets): 201 and 409 both mean "exists"; a refused or failed create does not; another
incarnation of the same RayCluster name knows none of the old one's."""

from __future__ import annotations

from datetime import UTC, datetime

from cluster_reconciler.state import AnsweredSecrets
from raybus.bus.envelopes import CommandResult, ObjectKey, Outcome

KEY = ObjectKey(namespace="ns", name="rc")


def outcome(*results: CommandResult, uid: str = "u1") -> Outcome:
    return Outcome(key=KEY, kind="raycluster", uid=uid, controller="cluster", reconcile_id="b",
                   results=list(results), finished_at=datetime.now(UTC))


def create(target: str, *, ok: bool = True, code: int = 201) -> CommandResult:
    return CommandResult(op="create", target=target, ok=ok, code=code)


def names(answered: AnsweredSecrets, uid: str = "u1") -> list[str]:
    return [s["metadata"]["name"] for s in answered.secrets(KEY, uid)]


def test_created_or_already_existing_counts_refused_does_not() -> None:
    answered = AnsweredSecrets()
    answered.record(outcome(create("Secret/ns/rc", ok=False, code=403), create("Service/ns/rc-head-svc")))
    assert names(answered) == []
    answered.record(outcome(create("Secret/ns/rc", code=409)))
    assert names(answered) == ["rc"]
    assert answered.secrets(KEY, "u1")[0] == {"apiVersion": "v1", "kind": "Secret",
                                               "metadata": {"name": "rc", "namespace": "ns"}}


def test_another_incarnation_knows_none_of_the_old_ones() -> None:
    answered = AnsweredSecrets()
    answered.record(outcome(create("Secret/ns/rc")))
    assert names(answered, "u2") == [] and names(answered, "") == []
    answered.record(outcome(create("Secret/ns/other"), uid="u2"))
    assert names(answered, "u2") == ["other"] and names(answered, "u1") == []
    answered.forget(KEY)
    assert names(answered, "u2") == []
