"""batch/v1 Job controller stand-in: runs template pods, counts outcomes, sets Complete/Failed conditions.

Simplified: no job-tracking finalizers, no indexed completion, no podFailurePolicy, no activeDeadlineSeconds.
A failed pod is replaced after the Job controller's exponential back-off, scaled down: `backoff_s`
(real: 10 s), doubling per failure, capped at 32x (real: 6 min). The order matters to RayJobs: a
submitter that failed because its Ray job failed is retried only after the dashboard reported it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from raybus_sim.apiserver.defaults import now_rfc3339
from raybus_sim.apiserver.store import Event, Store
from raybus_sim.controllers.keyed import KeyedController


def _cond(ctype: str, reason: str, message: str) -> dict[str, Any]:
    now = now_rfc3339()
    return {"type": ctype, "status": "True", "reason": reason, "message": message, "lastProbeTime": now,
            "lastTransitionTime": now}


class JobController(KeyedController):
    name = "job"

    def __init__(self, store: Store, *, backoff_s: float = 0.5) -> None:
        super().__init__(store)
        self.backoff_s = backoff_s
        self._failures: dict[str, tuple[int, float]] = {}  # Job uid -> (failed pods seen, when the last was seen)
        self.job_rt = store.registry.get("batch", "v1", "jobs")
        self.pod_rt = store.registry.get("", "v1", "pods")
        store.listeners.append(self.on_event)

    def start(self) -> None:
        assert self.job_rt is not None
        self.start_with(self.store.list(self.job_rt, None))

    def on_event(self, ev: Event) -> None:
        meta = ev.obj["metadata"]
        if ev.rt.gr == "jobs.batch" and ev.type != "DELETED":
            self.mark(meta["namespace"], meta["name"])
        elif ev.rt.gr == "pods":
            for ref in meta.get("ownerReferences") or ():
                if ref.get("kind") == "Job" and ref.get("controller"):
                    self.mark(meta["namespace"], ref["name"])

    def sync(self, ns: str, name: str) -> None:
        assert self.job_rt and self.pod_rt
        job = self.store.find(self.job_rt, ns, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        status = dict(job.get("status") or {})
        if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in status.get("conditions") or []):
            return
        spec, uid = job.get("spec") or {}, job["metadata"]["uid"]
        pods = [p for p in self.store.list(self.pod_rt, ns)
                if any(r.get("uid") == uid and r.get("controller") for r in p["metadata"].get("ownerReferences") or ())]
        active = [p for p in pods if phase(p) not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")]
        succeeded = sum(1 for p in pods if phase(p) == "Succeeded")
        failed = sum(1 for p in pods if phase(p) == "Failed")
        completions, parallelism = spec.get("completions", 1), spec.get("parallelism", 1)
        status.setdefault("startTime", now_rfc3339())
        status["uncountedTerminatedPods"] = {}
        conditions = list(status.get("conditions") or [])
        done = False
        if succeeded >= completions:
            conditions += [_cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
                           _cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods")]
            status["completionTime"] = now_rfc3339()
            done = True
        elif failed > spec.get("backoffLimit", 6):
            conditions += [_cond("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
                           _cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]
            done = True
        if done:
            self._failures.pop(uid, None)
            for p in active:
                self.store.delete(self.pod_rt, ns, p["metadata"]["name"], propagation="Background")
            active = []
        elif not spec.get("suspend") and not self._backing_off(ns, name, uid, failed):
            want = min(parallelism, completions - succeeded) - len(active)
            tmpl = spec.get("template") or {}
            for _ in range(max(0, want)):
                tmeta = tmpl.get("metadata") or {}
                active.append(self.store.create(self.pod_rt, ns, {
                    "metadata": {"generateName": f"{name}-", "labels": dict(tmeta.get("labels") or {}),
                                 "annotations": dict(tmeta.get("annotations") or {}),
                                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                      "uid": uid, "controller": True, "blockOwnerDeletion": True}]},
                    "spec": _deep(tmpl.get("spec") or {})}))
        status.update(active=len(active), succeeded=succeeded, failed=failed, terminating=0,
                      ready=sum(1 for p in active if any(c.get("type") == "Ready" and c.get("status") == "True"
                                                         for c in (p.get("status") or {}).get("conditions") or [])))
        for k in ("active", "succeeded", "failed"):
            if status[k] == 0:
                del status[k]  # omitempty, like the real JobStatus
        if conditions:
            status["conditions"] = conditions
        if status != job.get("status"):
            self.store.update(self.job_rt, ns, name, dict(job, status=status), subresource="status")


    def _backing_off(self, ns: str, name: str, uid: str, failed: int) -> bool:
        """True while the replacement of the last failed pod waits (then the Job is synced again)."""
        if failed == 0:
            return False
        now = time.monotonic()
        seen, since = self._failures.get(uid, (0, now))
        if failed != seen:
            since = now
            self._failures[uid] = (failed, since)
        ready_at = since + self.backoff_s * 2 ** min(failed - 1, 5)
        if now >= ready_at:
            return False
        asyncio.get_running_loop().call_later(ready_at - now, self.mark, ns, name)
        return True


def phase(pod: dict[str, Any]) -> str | None:
    value: str | None = (pod.get("status") or {}).get("phase")
    return value


def _deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep(v) for v in value]
    return value
