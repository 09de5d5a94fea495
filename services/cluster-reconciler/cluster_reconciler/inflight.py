"""Writes this replica has asked for whose effect has not reached its cache yet.

KubeRay writes synchronously (client.Create, Status().Update) and reads its informer afterwards;
our writes go reconciler -> bus -> executor -> API -> watcher -> bus -> cache, and a reconcile in
between would ask for the same write again: the same status, or a second create of the same
head Service (409 AlreadyExists: harmless, but a redundant API write). Pods don't need this: scale
expectations (in Redis) already cover them. After `window_s` an unseen write counts as lost and
may be asked for again, which also covers a failed executor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from raybus.bus.envelopes import ObjectKey
from raybus.decisions.cluster.status import inconsistent_status
from raybus.decisions.commands import Command, CreateObject


class InFlightWrites:
    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_s
        self._clock = clock
        self._status: dict[ObjectKey, tuple[dict[str, Any], float]] = {}
        self._creates: dict[ObjectKey, dict[tuple[str, str, str], float]] = {}

    def _fresh(self, at: float) -> bool:
        return self._clock() - at <= self._window

    def status_pending(self, key: ObjectKey, status: dict[str, Any]) -> bool:
        sent = self._status.get(key)
        return sent is not None and self._fresh(sent[1]) and not inconsistent_status(sent[0], status)

    def mark_status(self, key: ObjectKey, status: dict[str, Any]) -> None:
        self._status[key] = (status, self._clock())

    @staticmethod
    def _create_key(cmd: CreateObject) -> tuple[str, str, str]:
        meta = cmd.object.get("metadata") or {}
        return (str(cmd.object.get("kind")), str(meta.get("namespace")), str(meta.get("name")))

    def drop_pending_creates(self, key: ObjectKey, commands: list[Command]) -> list[Command]:
        """`key`'s commands minus non-Pod creates already in flight; marks the remaining ones."""
        sent = self._creates.setdefault(key, {})
        out: list[Command] = []
        for cmd in commands:
            if isinstance(cmd, CreateObject) and cmd.object.get("kind") != "Pod":
                target = self._create_key(cmd)
                at = sent.get(target)
                if at is not None and self._fresh(at):
                    continue
                sent[target] = self._clock()
            out.append(cmd)
        return out

    def forget(self, key: ObjectKey) -> None:
        self._status.pop(key, None)
        self._creates.pop(key, None)
