"""Executor admission (pure): a batch is applied only if a reconciler's decision code could have
produced it from the objects the API server holds. policy.py has the rules; exempt.py the fields
that are not rebuilt."""

from raybus.decisions.admission.exempt import EXEMPT_FIELDS
from raybus.decisions.admission.policy import CREATES, DELETES, PATCHES, PRIMARY, admit, live_kinds
from raybus.decisions.admission.verdict import (
    ADMIT,
    FOREIGN_STATUS,
    FOREIGN_TARGET,
    KIND,
    MALFORMED,
    NAMESPACE,
    NOT_BUILT,
    OBJECT_DELETED,
    OBJECT_NOT_LIVE,
    OWNER,
    PATCH_CONTENT,
    ROUTINE,
    UNKNOWN_CONTROLLER,
    LiveView,
    StaticView,
    Verdict,
)

__all__ = [
    "ADMIT", "CREATES", "DELETES", "EXEMPT_FIELDS", "FOREIGN_STATUS", "FOREIGN_TARGET", "KIND", "MALFORMED",
    "NAMESPACE", "NOT_BUILT", "OBJECT_DELETED", "OBJECT_NOT_LIVE", "OWNER", "PATCHES", "PATCH_CONTENT",
    "PRIMARY", "ROUTINE", "UNKNOWN_CONTROLLER", "LiveView", "StaticView", "Verdict", "admit", "live_kinds",
]
