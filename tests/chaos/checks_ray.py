"""The soak's RayJob/RayService part: runs workload_jobs.py beside soak.py's RayClusters, and
after the faults gathers the evidence for invariants_ray.py (the heads' journal, the command
ledger, the recorded Pods, the process table) and checks convergence over the API.

soak.py's hooks (a few lines): `enable_journal(stack)` before the stack starts; `RayPart(...)`,
`start()`, `workload.run(until)` beside the RayCluster workload, `check(...)` after the
RayClusters converged, `stop()` in the `finally`, `after_stop(...)` once the stack stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import nats
import yaml
from nats.js.errors import KeyNotFoundError

from raybus.adapters.kube import KubeClient, KubeError, new_api_client
from raybus.bus import subjects as s
from raybus.bus.ledger import BatchRecord
from raybus_sim.dashboard import journal
from raybus_sim.devstack.stack import LocalStack
from raybus_sim.testing.servers import NatsCluster
from tests.chaos import invariants_ray as inv
from tests.chaos.recorder import PodRecorder, Violation
from tests.chaos.workload_jobs import PREFIX, RayWorkload
from tests.integration.e2e import rayjob_kit as rj
from tests.integration.e2e import rayservice_kit as rs
from tests.integration.e2e.conftest import NS, Kube

Json = dict[str, Any]


def fault_logger(soak: Any) -> Callable[[str], None]:
    """Head faults of workload_jobs.py go into soak.py's fault log as kind "head", and move its
    last-fault time (convergence is measured from it)."""
    def log(detail: str) -> None:
        soak.faults.append(f"{time.strftime('%H:%M:%S')} head {detail}")
        print(f"fault: {soak.faults[-1]}", flush=True)
        soak.last_fault = time.monotonic()
    return log


def journal_path(home: Path) -> Path:
    return home / "dashboard-journal.jsonl"


def enable_journal(stack: LocalStack) -> None:
    """kube-sim (and every restart of it) gets the stack's env: its heads journal every write.
    Through extra_env, not os.environ, so a later stack in the same process is not affected."""
    stack.extra_env[journal.ENV] = str(journal_path(stack.home))


class RayPart:
    def __init__(self, stack: LocalStack, kube: Kube, seed: int, on_fault: Callable[[str], None]) -> None:
        self.stack, self.kube = stack, kube
        self.workload = RayWorkload(kube, random.Random(seed * 7919 + 22), on_fault)
        self.recorder: PodRecorder | None = None
        self.summary: dict[str, Any] = {}
        self.sessions: set[int] = set()

    async def start(self) -> None:
        self.recorder = PodRecorder(KubeClient(await new_api_client(str(self.stack.kubeconfig))), PREFIX)
        await self.recorder.start()

    async def stop(self) -> None:
        self.sessions = self._sessions()  # before the stack stops them (after_stop looks)
        if self.recorder is not None:
            await self.recorder.stop()
            await self.recorder.client.close()

    # --- after the faults --------------------------------------------------------------------
    async def check(self, converge_s: float, last_fault: float, soak_recorder: PodRecorder | None) -> list[Violation]:
        out = await self.converged(converge_s, last_fault)
        rows = journal.read(str(journal_path(self.stack.home)))
        found, stats = inv.job_submissions(rows, PREFIX)
        out += found
        found, serve_stats = inv.serve_repeats(rows, PREFIX)
        out += found
        pods: dict[str, set[str]] = {}
        for rec in (soak_recorder, self.recorder):
            if rec is not None:
                for name, uids in rec.pod_uids.items():
                    pods.setdefault(name, set()).update(uids)
        found, ledger_stats = inv.ledger_vs_api(await self.ledger(), pods)
        out += found
        if self.recorder is not None:
            out += self.recorder.violations + self.recorder.duplicate_heads()
            late = self.recorder.heads_after_delete()
            out += [Violation("at most one head Pod created after its RayCluster's deletion", f"{c}: {n}")
                    for c, n in late.items() if len(n) > 1]
        self.summary.update(ops=self.workload.ops, journal_rows=len(rows), **stats, **serve_stats, **ledger_stats,
                            rayjobs=len(self.workload.jobs), rayservices=len(self.workload.services),
                            ray_clusters=len(self.recorder.created) if self.recorder else 0)
        return out

    async def converged(self, timeout: float, last_fault: float) -> list[Violation]:
        """Every RayJob terminal (and its cluster gone when shutdownAfterJobFinishes), every
        RayService Ready on one cluster serving its latest serveConfigV2, everything deleted gone
        with its clusters, within `timeout` s."""
        deadline = time.monotonic() + timeout
        pending: dict[str, str] = {}
        while time.monotonic() < deadline:
            await self.workload.user_actions()
            try:
                pending = await self._pending()
            except (KubeError, httpx.HTTPError, OSError) as err:
                pending = {"api": str(err)}
            if not pending:
                self.summary["converged_s_after_last_fault"] = round(time.monotonic() - last_fault, 1)
                return []
            await asyncio.sleep(1.0)
        return [Violation(f"every RayJob terminal and RayService Ready with its latest config within {timeout:.0f}s",
                          str(pending))]

    async def _pending(self) -> dict[str, str]:
        c, pending = self.kube.c, {}
        clusters, _ = await c.list_all(rj.RC, namespace=NS)
        live = {i["metadata"]["name"]: i for i in clusters if not i["metadata"].get("deletionTimestamp")}
        origin = {n: (i["metadata"].get("labels") or {}).get(rj.ORIGIN) for n, i in live.items()}
        ends: dict[str, int] = {}
        for name, plan in self.workload.jobs.items():
            job = await _get(c, rj.RJ, name)
            if plan.deleted:
                left = sorted(n for n, o in origin.items() if o == name)
                if job is not None or left:
                    pending[name] = f"deleted RayJob still there or its clusters {left}"
                continue
            if job is None:
                pending[name] = "RayJob missing"
                continue
            st = rj.status(job)
            if rj.jds(job) not in rj.TERMINAL:
                pending[name] = f"{rj.jds(job)}/{st.get('jobStatus')}"
            elif plan.shutdown and st.get("rayClusterName") in live:
                pending[name] = f"{rj.jds(job)} but its cluster {st.get('rayClusterName')} not deleted"
            else:
                ends[f"{rj.jds(job)}/{st.get('jobStatus')}"] = ends.get(f"{rj.jds(job)}/{st.get('jobStatus')}", 0) + 1
        self.summary["rayjob_ends"] = ends
        for name, deleted in self.workload.services.items():
            svc = await _get(c, rs.RS, name)
            mine = sorted(n for n, o in origin.items() if o == name)
            if deleted:
                if svc is not None or mine:
                    pending[name] = f"deleted RayService still there or its clusters {mine}"
                continue
            if svc is None:
                pending[name] = "RayService missing"
            elif not rs.is_ready(svc) or rs.pending_name(svc) or mine != [rs.active_name(svc)]:
                pending[name] = (f"ready={rs.is_ready(svc)} active={rs.active_name(svc)} "
                                 f"pending={rs.pending_name(svc)} clusters={mine} apps={rs.app_statuses(svc)}")
            else:
                stale = await self._stale_apps(svc)
                if stale:
                    pending[name] = f"head of {rs.active_name(svc)} serves an older config: {stale}"
        return pending

    async def _stale_apps(self, svc: Json) -> list[str]:
        """Apps whose deployed config (the active head's, GET /api/serve/applications/) lacks a
        field of serveConfigV2 as the spec has it now."""
        wanted = (yaml.safe_load(svc["spec"]["serveConfigV2"]) or {}).get("applications") or []
        url = f"{self.stack.dashboard_url}/{NS}/{rs.active_name(svc)}/api/serve/applications/"
        try:
            async with httpx.AsyncClient(timeout=5.0) as http:
                r = await http.get(url)
            r.raise_for_status()
            apps = r.json().get("applications") or {}
            deployed = {n: a.get("deployed_app_config") for n, a in apps.items()}
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            # The soak's head faults last 1-4 requests, and this read may be one of them (a
            # 2-minute soak beside two CPU hogs met a truncated JSON here): not converged yet.
            return [f"the head's answer was no app list ({exc!r}); asking again"]
        return [str(app.get("name")) for app in wanted if not _subset(app, deployed.get(app.get("name")))]

    async def ledger(self) -> dict[str, list[dict[str, Any]]]:
        """Every done batch's results from the KV bucket `raybus-batches` (kept 2 h)."""
        assert self.stack.nats is not None
        nc = await nats.connect(**self.stack.nats.options())
        out: dict[str, list[dict[str, Any]]] = {}
        try:
            js = nc.jetstream()
            kv = await js.key_value(s.KV_BATCHES)
            # The keys from the stream's per-subject counts, not `kv.keys()`: nats-py's watcher
            # asks consumer info right after creating the consumer, which on a 3-node cluster
            # can report 0 pending and end the listing empty (a run read 0 batches of 300).
            prefix = f"$KV.{s.KV_BATCHES}."
            info = await js.stream_info(f"KV_{s.KV_BATCHES}", subjects_filter=f"{prefix}>")
            keys = sorted(subject[len(prefix):] for subject in (info.state.subjects or {}))
            for key in keys:
                try:
                    entry = await kv.get(key)
                except KeyNotFoundError:  # expired (kept 2 h) between the listing and the read
                    continue
                with contextlib.suppress(ValueError):
                    record = BatchRecord.model_validate_json(entry.value or b"")
                    if record.state == "done":
                        out[key] = [r.model_dump() for r in record.results]
        finally:
            await nc.close()
        return out

    def _sessions(self) -> set[int]:
        """Session ids of every process the stack runs now (each leads its own session)."""
        st = self.stack
        pids = [p.popen.pid for p in st.procs]
        servers = [*(st.nats.nodes if isinstance(st.nats, NatsCluster) else [st.nats]), st.redis]
        pids += [srv.proc.pid for srv in servers if srv is not None and srv.proc is not None]
        return set(pids)

    def after_stop(self) -> list[Violation]:
        return inv.leftover_processes(_process_table(), self.sessions, str(self.stack.home))


async def _get(c: KubeClient, res: Any, name: str) -> Json | None:
    try:
        return await c.get(res, namespace=NS, name=name)
    except KubeError as exc:
        if exc.not_found:
            return None
        raise


def _subset(want: Any, have: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_subset, want, have))
    return bool(want == have)


def _stat(pid: int | str) -> list[str]:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...


def _process_table() -> list[tuple[int, int, str]]:
    """(pid, session id, command line) of every live process but this one and its ancestors
    (`make chaos` names the home on its command line too), from /proc; zombies are not running."""
    mine, pid = set(), os.getpid()
    while pid > 1:
        mine.add(pid)
        pid = int(_stat(pid)[1])
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat(entry.name)
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if fields[0] != "Z":
                out.append((int(entry.name), int(fields[3]), cmd))
    return out
