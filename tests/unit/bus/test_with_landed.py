"""ledger.with_landed: what a batch's earlier deliveries landed is never lost to a later error."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raybus.bus.envelopes import CommandResult
from raybus.bus.ledger import with_landed

results = st.lists(st.builds(
    CommandResult, op=st.sampled_from(["create", "delete", "patch"]),
    target=st.sampled_from([f"Pod/default/p{i}" for i in range(4)]), ok=st.booleans(),
    code=st.sampled_from([0, 201, 409, 500])), max_size=6)


@given(landed=results, now=results)
def test_landed_commands_stay_landed_and_this_deliverys_successes_stand(
        landed: list[CommandResult], now: list[CommandResult]) -> None:
    merged = with_landed(landed, now)
    assert len(merged) >= len(now)
    for mine, r in zip(merged, now, strict=False):  # one per command of this delivery, in order
        assert (mine.op, mine.target) == (r.op, r.target)
        if r.ok:
            assert mine == r
    landed_keys = {(r.op, r.target) for r in landed if r.ok}
    merged_ok = {(r.op, r.target) for r in merged if r.ok}
    assert landed_keys <= merged_ok
    assert {(r.op, r.target) for r in now if r.ok} <= merged_ok
    assert all(r.ok or (r.op, r.target) not in landed_keys for r in merged)


def test_a_failed_create_that_landed_before_reports_the_earlier_201() -> None:
    created = CommandResult(op="create", target="Pod/default/w", ok=True, code=201)
    failed = CommandResult(op="create", target="Pod/default/w", ok=False, code=500)
    skipped = CommandResult(op="delete", target="Pod/default/x", ok=False, expired=True)
    assert with_landed([created], [failed, skipped]) == [created, skipped]
    assert with_landed([], [failed, skipped]) == [failed, skipped]
    assert with_landed([created], []) == [created]
