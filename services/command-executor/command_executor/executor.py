"""Applies one CommandBatch against Kubernetes, in order and idempotently.

- create: 409 AlreadyExists counts as success (names are deterministic, so a redelivered batch
  finds its own pod: this is what makes "at least once" delivery safe);
- delete: 404 is success; with target.uid a uid precondition, and a precondition conflict means
  the addressed incarnation is already gone (also success);
- patch: JSON merge patch (with metadata.uid as precondition when the target names one);
- update_status: GET fresh, replace .status, PUT /status; 409 Conflict -> re-GET and retry
  (bounded, like client-go's retry.RetryOnConflict with DefaultRetry's 5 steps);
- consecutive creates go out concurrently (create_parallelism, default 8; 1 = KubeRay's strict
  order); the batch stops at the first failed step, as KubeRay's reconcile returns on the first
  failed create/delete (later commands may depend on earlier ones); the rest are reported skipped;
- Events are recorded after the commands, concurrently (client-go's recorder is asynchronous too);
- transient failures (429, 5xx, connection) are flagged so the caller can redeliver the batch.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import socket
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from command_executor.mapping import (
    core_event_manifest,
    describe,
    event_manifest,
    failure_event,
    failure_reason,
    involved_object,
    micro_time,
    success_event,
    target_of,
)
from raybus.adapters.kube import KubeClient, KubeError, UnknownResource, resource_for
from raybus.bus.envelopes import CommandBatch, CommandResult
from raybus.decisions.commands import (
    Command,
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    RecordEvent,
    UpdateStatus,
)
from raybus.observability.metrics import COMMANDS

log = logging.getLogger(__name__)
Json = dict[str, Any]
EVENT_RES = resource_for("events.k8s.io/v1", "Event")  # as KubeRay v1.7 records them
CORE_EVENT_RES = resource_for("v1", "Event")


@dataclass
class BatchResult:
    results: list[CommandResult] = field(default_factory=list)
    transient: bool = False  # a retryable API error stopped the batch

    @property
    def failed(self) -> bool:
        return any(not r.ok for r in self.results)


def _worker_group(cmd: Command) -> str | None:
    """The worker group of a worker Pod create (None for anything else, head Pods included)."""
    if not (isinstance(cmd, CreateObject) and cmd.object.get("kind") == "Pod"):
        return None
    labels = (cmd.object.get("metadata") or {}).get("labels") or {}
    if labels.get("ray.io/node-type") != "worker":
        return None
    return str(labels.get("ray.io/group") or "")


def _steps(commands: list[Command], parallelism: int) -> list[list[Command]]:
    """Runs of consecutive worker Pod creates of one group go out together, `parallelism` at a
    time; every other command alone, in order, so dependencies hold (ServiceAccount, Role,
    RoleBinding, Services, the head Pod, then each group's workers: KubeRay's reconcile funcs run
    in that order and return at the first error). KubeRay creates a group's Pods one by one; they
    never depend on each other, so at most parallelism-1 creates of that group are attempted past
    a failure (parallelism 1 = KubeRay's strict order)."""
    steps: list[list[Command]] = []
    for cmd in commands:
        group = _worker_group(cmd)
        if (group is not None and steps and _worker_group(steps[-1][0]) == group
                and len(steps[-1]) < parallelism):
            steps[-1].append(cmd)
        else:
            steps.append([cmd])
    return steps


def generated_secret_data(keys: tuple[str, ...]) -> dict[str, str]:
    """Fresh random tokens for a Secret's `data` (base64, as the API expects), generated here at
    create time so no decision, command batch, ledger entry or log ever holds them (e.g. KubeRay's
    auth token Secret, decisions/cluster/auth_secret.py). 32 random bytes, URL-safe base64 text."""
    return {key: base64.b64encode(secrets.token_urlsafe(32).encode()).decode() for key in keys}


def _rv(obj: Json | None) -> str | None:
    rv = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None


def _is_conflict(exc: BaseException) -> bool:
    return isinstance(exc, KubeError) and exc.conflict


class Executor:
    def __init__(self, kube: KubeClient, *, status_retries: int = 5, host: str | None = None,
                 create_parallelism: int = 8, events_kube: KubeClient | None = None) -> None:
        self._kube = kube
        # controller-runtime's event recorder builds its own client from the manager's config,
        # so KubeRay's Events are rate limited separately from its object writes.
        self._events_kube = events_kube or kube
        self._create_parallelism = max(1, create_parallelism)
        self._status_retries = status_retries
        self._host = host or socket.gethostname()
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._users: dict[tuple[str, str, str], int] = {}
        # client-go's EventCorrelator: identical events bump count on the existing Event (LRU 4096).
        self._events: OrderedDict[tuple[str, ...], tuple[str, int]] = OrderedDict()
        self._core_events = False  # events.k8s.io was forbidden: core/v1 Events from then on

    async def apply(self, batch: CommandBatch) -> BatchResult:
        """Serial per object within this replica: two batches for one RayCluster never interleave."""
        key = (batch.kind, batch.key.namespace, batch.key.name)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                return await self._apply(batch)
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key]
                del self._locks[key]

    async def _apply(self, batch: CommandBatch) -> BatchResult:
        out = BatchResult()
        involved = involved_object(batch)
        events: list[tuple[ObjectRef, str, str, str]] = []
        index = 0
        for step in _steps(batch.commands, self._create_parallelism):
            outcomes = await asyncio.gather(*(self._try(cmd, batch) for cmd in step))
            failed = False
            for cmd, (result, err) in zip(step, outcomes, strict=True):
                out.results.append(result)
                index += 1
                if err is None:
                    event = success_event(cmd)
                    if event is not None:
                        ref = cmd.target if isinstance(cmd, RecordEvent) else involved
                        events.append((ref, *event))
                    continue
                failed = True
                out.transient = out.transient or err.transient
                event = failure_event(cmd, err.message or err.reason, cluster=involved)
                if event is not None and not err.transient:
                    events.append((involved, *event))
            if failed:
                # Never attempted: the reconciler re-decides them (KubeRay returns at the first error).
                out.results += [CommandResult(op=c.op, target=describe(target_of(c, batch)), ok=False,
                                              expired=True, message="skipped: an earlier command failed")
                                for c in batch.commands[index:]]
                break
        # Events after the commands, concurrently: like client-go's asynchronous recorder they
        # are never on the path of the writes they describe.
        await asyncio.gather(*(self.record_event(ref, type_=type_, reason=reason, message=message)
                               for ref, type_, reason, message in events))
        return out

    async def _try(self, cmd: Command, batch: CommandBatch) -> tuple[CommandResult, KubeError | None]:
        target = target_of(cmd, batch)
        try:
            code, message, rv = await self._one(cmd, target)
        except (KubeError, UnknownResource) as exc:
            err = exc if isinstance(exc, KubeError) else KubeError(400, "UnknownKind", str(exc))
            if target.kind == "Secret":
                # 422 Invalid messages quote field values: never carry a Secret's onward.
                err = KubeError(err.code, err.reason, "message withheld (Secret)")
            COMMANDS.labels(cmd.op, "transient" if err.transient else "error").inc()
            log.warning("command failed", extra={
                "reconcile_id": batch.reconcile_id, "op": cmd.op, "target": describe(target),
                "code": err.code, "reason": err.reason, "why": cmd.reason})
            return CommandResult(op=cmd.op, target=describe(target), ok=False, code=err.code,
                                 error_reason=failure_reason(cmd),
                                 message=f"{err.reason}: {err.message}"[:1000]), err
        COMMANDS.labels(cmd.op, "ok").inc()
        return CommandResult(op=cmd.op, target=describe(target), ok=True, code=code,
                             message=message, resource_version=rv), None

    async def _one(self, cmd: Command, target: ObjectRef) -> tuple[int, str, str | None]:
        """Returns (HTTP-ish code, note, resourceVersion written); raises KubeError for failures the
        caller must see."""
        res = resource_for(target.api_version, target.kind)
        ns = target.namespace if res.namespaced else None
        if isinstance(cmd, CreateObject):
            body = dict(cmd.object)
            body["metadata"] = {**(body.get("metadata") or {}), "namespace": target.namespace}
            if cmd.generated_data_keys:
                body["data"] = {**(body.get("data") or {}), **generated_secret_data(cmd.generated_data_keys)}
            try:
                created = await self._kube.create(res, body, namespace=ns)
            except KubeError as exc:
                if not exc.already_exists:
                    raise
                note = "already exists (an earlier delivery or decision created it)"
                if target.kind != "Pod":
                    return 409, note, None
                # Its resourceVersion tells the reconciler when its cache has seen this Pod
                # (scale expectations): read it back, rare path (redeliveries, reused names).
                try:
                    existing = await self._kube.get(res, namespace=ns, name=target.name)
                except KubeError:
                    return 409, note, None
                return 409, note, _rv(existing)
            return 201, "", _rv(created)
        if isinstance(cmd, DeleteObject):
            try:
                await self._kube.delete(res, namespace=ns, name=target.name, uid=target.uid,
                                        propagation=cmd.propagation)
            except KubeError as exc:
                if exc.not_found:
                    return 404, "already gone", None
                if exc.conflict and target.uid:
                    return 409, "uid precondition failed: that incarnation is already gone", None
                raise
            return 200, "", None
        if isinstance(cmd, PatchObject):
            patch = dict(cmd.merge_patch)
            if target.uid:  # metadata.uid in a patch is checked by the API server (409 on mismatch)
                patch["metadata"] = {**(patch.get("metadata") or {}), "uid": target.uid}
            patched = await self._kube.merge_patch(res, namespace=ns, name=target.name, patch=patch)
            return 200, "", _rv(patched)
        if isinstance(cmd, UpdateStatus):
            return await self._update_status(cmd, target)
        if isinstance(cmd, RecordEvent):
            return 201, "", None  # recorded by the caller like every other command's event
        raise UnknownResource(f"op {cmd.op}")

    async def _update_status(self, cmd: UpdateStatus, target: ObjectRef) -> tuple[int, str, str | None]:
        res = resource_for(target.api_version, target.kind)
        if cmd.resource_version:
            try:
                return await self._put_status(cmd, target, resource_version=cmd.resource_version)
            except KubeError as exc:
                if exc.not_found:
                    return 404, "object gone; status not written", None
                if not exc.conflict or cmd.on_conflict == "fail":
                    raise
        ns = target.namespace if res.namespaced else None
        attempts = 0
        written: Json = {}
        async for attempt in AsyncRetrying(stop=stop_after_attempt(self._status_retries),
                                           wait=wait_random_exponential(multiplier=0.01, max=0.5),
                                           retry=retry_if_exception(_is_conflict), reraise=True):
            with attempt:
                attempts += 1
                try:
                    fresh = await self._kube.get(res, namespace=ns, name=target.name)
                except KubeError as exc:
                    if exc.not_found:
                        return 404, "object gone; status not written", None
                    raise
                uid = (fresh.get("metadata") or {}).get("uid")
                if target.uid and uid != target.uid:
                    raise KubeError(409, "Precondition",
                                    f"uid {uid} is not the incarnation {target.uid} the status was computed for")
                fresh["status"] = cmd.status
                written = await self._kube.replace_status(res, fresh)
        return 200, f"written after {attempts} attempt(s)" if attempts > 1 else "", _rv(written)

    async def _put_status(self, cmd: UpdateStatus, target: ObjectRef, *,
                          resource_version: str) -> tuple[int, str, str | None]:
        """PUT /status on the version the status was computed on: one API call, as KubeRay's
        Status().Update. The status subresource takes only .status from the body (the API server
        keeps everything else from the stored object), so name, version, uid and status suffice;
        a stale version or another incarnation is a 409."""
        meta: Json = {"name": target.name, "namespace": target.namespace,
                      "resourceVersion": resource_version}
        if target.uid:
            meta["uid"] = target.uid
        body = {"apiVersion": target.api_version, "kind": target.kind, "metadata": meta,
                "status": cmd.status}
        written = await self._kube.replace_status(resource_for(target.api_version, target.kind), body)
        return 200, "", _rv(written)

    async def record_event(self, involved: ObjectRef, *, type_: str, reason: str, message: str) -> None:
        """Best effort, like client-go's recorder: a failed Event never fails the command.

        events.k8s.io/v1 as KubeRay v1.7 records them; a repeat becomes a series. Where the
        executor's RBAC does not allow events.k8s.io (403), it says so once and writes core/v1
        Events instead, so Events never silently stop."""
        key = (involved.namespace, involved.kind, involved.name, involved.uid or "", type_, reason, message)
        now = datetime.now(UTC)
        try:
            seen = self._events.get(key)
            if seen is not None:
                name, count = seen
                patch: Json = ({"count": count + 1, "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
                               if self._core_events else
                               # client-go's events/v1 recorder: a repeated isomorphic Event is a series.
                               {"series": {"count": count + 1, "lastObservedTime": micro_time(now)}})
                try:
                    await self._events_kube.merge_patch(CORE_EVENT_RES if self._core_events else EVENT_RES,
                                                        namespace=involved.namespace, name=name, patch=patch)
                    self._events[key] = (name, count + 1)
                    self._events.move_to_end(key)
                    return
                except KubeError as exc:
                    if not exc.not_found:
                        raise
            body = event_manifest(involved, type_=type_, reason=reason, message=message, now=now,
                                  host=self._host)
            if not self._core_events:
                try:
                    await self._events_kube.create(EVENT_RES, body, namespace=involved.namespace)
                except KubeError as exc:
                    if exc.code != 403:
                        raise
                    log.warning("events.k8s.io events are forbidden to the executor: recording core/v1 "
                                "Events instead (grant events.k8s.io events create/patch)")
                    self._core_events = True
            if self._core_events:
                body = core_event_manifest(involved, type_=type_, reason=reason, message=message, now=now,
                                           host=self._host)
                await self._events_kube.create(CORE_EVENT_RES, body, namespace=involved.namespace)
            self._events[key] = (body["metadata"]["name"], 1)
            if len(self._events) > 4096:
                self._events.popitem(last=False)
        except KubeError as exc:
            log.warning("event not recorded", extra={"reason": reason, "code": exc.code,
                                                     "object": describe(involved)})
