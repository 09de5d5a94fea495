"""What a reconciler knows about one of its published command batches (pure data).

KubeRay's writes are synchronous: when its reconcile records an expectation, the create has
happened. raybus's happen later, in the command-executor, so decision code must tell apart a batch
that is still queued or being applied (its effects may still come: wait, never replace them) from
one that is settled (applied, failed, or revoked so it can never be applied). The adapter resolves
this from the executor's Outcomes and the command ledger (`raybus.bus.ledger`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class BatchState(BaseModel):
    model_config = ConfigDict(frozen=True)

    settled: bool  # False: queued or being applied; its creates/deletes may still land
    finished_at: datetime | None = None
    revoked: bool = False  # never applied, and never will be
    # "Kind/namespace/name" of commands that did not take effect (failed, or skipped after an
    # earlier failure). Their objects were not created/deleted by this batch.
    not_applied: frozenset[str] = Field(default_factory=frozenset)
    # "Kind/namespace/name" -> resourceVersion of each object this batch created (when known):
    # once the informer cache has applied a watch event at or past it, the create has been seen.
    created_rv: dict[str, int] = Field(default_factory=dict)

    def applied(self, target: str) -> bool:
        return self.settled and not self.revoked and target not in self.not_applied


IN_FLIGHT = BatchState(settled=False)
